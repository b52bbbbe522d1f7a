"""Every bit of the simulator's trajectories: digests of losses and states over short runs.

A speed change of the FQT or BP-QAS simulator must leave these digests as they are. A change
that alters a trajectory on purpose (a new rounding rule, say) updates them: print the new ones
with `python tests/methods/trajectory_digest.py` and say in the commit why they changed.
"""

from __future__ import annotations

import pytest
from trajectory_digest import CASES, digest

DIGESTS = {
    "fqt/small-cnn@default/b1/float/precision=int8": "90437ff6e31f6c4e",
    "fqt/small-cnn@default/b8/float/precision=int8": "dc965d7e19509eaf",
    "fqt/small-cnn@default/b32/float/precision=int8": "95285ef7cc8adc1a",
    "fqt/small-cnn@default/b1/float/lambda_min=0.1,precision=int8": "71185c1d4988f728",
    "fqt/small-cnn@default/b8/float/lambda_min=0.1,precision=int8": "bf158bce6c7a6fff",
    "fqt/small-cnn@default/b32/float/lambda_min=0.1,precision=int8": "f8ac9e077094de13",
    "fqt/small-cnn@default/b8/float/precision=int8,weight_rounding=nearest": "958c0244a648342e",
    "fqt/small-cnn@default/b8/int8-single/precision=int8": "55774340297929dd",
    "fqt/small-cnn@default/b8/int8-tflite/precision=int8": "6be56d82b53cfc53",
    "fqt/small-cnn@default/b1/float/precision=uint8": "1fb2152046892bd1",
    "fqt/small-cnn@default/b8/float/precision=uint8": "60b494e01b492c6f",
    "fqt/small-cnn@default/b32/float/precision=uint8": "4ceb8af6c542a30f",
    "fqt/small-cnn@default/b8/float/lambda_min=0.1,precision=uint8": "34bafe6df336b8aa",
    "fqt/small-cnn@default/b1/float/seq,precision=mixed": "8785a22e4ad28114",
    "fqt/small-cnn@default/b8/float/seq,precision=mixed": "2afedd244b87a17a",
    "fqt/small-cnn@default/b1/float/seq,precision=float32": "63b0e3ff613d8c17",
    "fqt/small-cnn@default/b8/float/seq,precision=float32": "ad8647b9f016eb2f",
    "fqt/small-cnn@default/b8/float/seq,lambda_min=0.1,precision=mixed": "d10dad87ebcf9c48",
    "fqt/digits-cnn@default/b1/float/precision=int8": "41bf170c60f19189",
    "fqt/digits-cnn@default/b8/float/precision=int8": "56f7cda32c4f75fc",
    "fqt/digits-cnn@default/b1/float/precision=uint8": "be87af8dc2ac46f2",
    "fqt/digits-cnn@default/b8/float/precision=uint8": "010fa51f89d7b7d8",
    "fqt/digits-cnn@default/b8/float/seq,precision=float32": "a73a2b11742cefc5",
    "fqt/mcunet-5fps@32x32/b1/float/precision=int8": "c47488ce658d8331",
    "fqt/mcunet-5fps@32x32/b8/float/precision=int8": "6bc2eb8d003a479e",
    "fqt/mcunet-5fps@32x32/b8/float/lambda_min=0.1,precision=int8": "efa6e22a49366030",
    "fqt/mcunet-5fps@32x32/b4/float/precision=uint8": "c5bb1c09e61866d4",
    "fqt/mcunet-5fps@32x32/b2/float/seq,precision=mixed": "02c8acdb13335db2",
    "bp-qas/small-cnn@default/b1/float/momentum=0.9": "db54df8e71c9e12c",
    "bp-qas/small-cnn@default/b8/float/momentum=0.9": "b5b8b4087196f04d",
    "bp-qas/small-cnn@default/b32/float/": "7b5441024f71d6ec",
    "bp-qas/small-cnn@default/b8/float/channel_ratio=0.5,momentum=0.9,trainable=last:2": "f4bd15e534c17280",
    "bp-qas/digits-cnn@default/b8/float/momentum=0.9": "139415223e6ee6f6",
    "bp-qas/mcunet-5fps@32x32/b1/float/momentum=0.9": "42bf4c699d9205e6",
    "bp-qas/mcunet-5fps@32x32/b8/float/momentum=0.9": "7e0fab76280d6c5e",
}


def test_every_case_has_a_digest():
    assert sorted(DIGESTS) == sorted(c.key for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_trajectory_is_bit_identical(pinned_floats, case):
    assert digest(case) == DIGESTS[case.key]
