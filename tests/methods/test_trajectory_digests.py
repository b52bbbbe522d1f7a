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
    "fqt/small-cnn@default/b8/int8-single/precision=int8": "d9ff487897a43529",
    "fqt/small-cnn@default/b8/int8-tflite/precision=int8": "4e13f96afa34308a",
    "fqt/small-cnn@default/b1/float/precision=uint8": "1fb2152046892bd1",
    "fqt/small-cnn@default/b8/float/precision=uint8": "60b494e01b492c6f",
    "fqt/small-cnn@default/b32/float/precision=uint8": "4ceb8af6c542a30f",
    "fqt/small-cnn@default/b8/float/lambda_min=0.1,precision=uint8": "34bafe6df336b8aa",
    "fqt/small-cnn@default/b1/float/seq,precision=mixed": "8785a22e4ad28114",
    "fqt/small-cnn@default/b8/float/seq,precision=mixed": "2afedd244b87a17a",
    "fqt/small-cnn@default/b1/float/seq,precision=float32": "63b0e3ff613d8c17",
    "fqt/small-cnn@default/b8/float/seq,precision=float32": "ac4912ced48772bd",
    "fqt/small-cnn@default/b8/float/seq,lambda_min=0.1,precision=mixed": "d10dad87ebcf9c48",
    "fqt/digits-cnn@default/b1/float/precision=int8": "41bf170c60f19189",
    "fqt/digits-cnn@default/b8/float/precision=int8": "56f7cda32c4f75fc",
    "fqt/digits-cnn@default/b1/float/precision=uint8": "be87af8dc2ac46f2",
    "fqt/digits-cnn@default/b8/float/precision=uint8": "010fa51f89d7b7d8",
    "fqt/digits-cnn@default/b8/float/seq,precision=float32": "ceeb776b6fabe92b",
    "fqt/mcunet-5fps@32x32/b1/float/precision=int8": "c47488ce658d8331",
    "fqt/mcunet-5fps@32x32/b8/float/precision=int8": "6bc2eb8d003a479e",
    "fqt/mcunet-5fps@32x32/b8/float/lambda_min=0.1,precision=int8": "efa6e22a49366030",
    "fqt/mcunet-5fps@32x32/b4/float/precision=uint8": "c5bb1c09e61866d4",
    "fqt/mcunet-5fps@32x32/b2/float/seq,precision=mixed": "02c8acdb13335db2",
    "bp-qas/small-cnn@default/b1/float/momentum=0.9": "ca43a81a1e01c703",
    "bp-qas/small-cnn@default/b8/float/momentum=0.9": "7291a975b9844711",
    "bp-qas/small-cnn@default/b32/float/": "7b5441024f71d6ec",
    "bp-qas/small-cnn@default/b8/float/channel_ratio=0.5,momentum=0.9,trainable=last:2": "32c2599f471a39b8",
    "bp-qas/digits-cnn@default/b8/float/momentum=0.9": "8735de9233c82103",
    "bp-qas/mcunet-5fps@32x32/b1/float/momentum=0.9": "743cfd70e64e81d8",
    "bp-qas/mcunet-5fps@32x32/b8/float/momentum=0.9": "da5bb2736fda5be8",
}


def test_every_case_has_a_digest():
    assert sorted(DIGESTS) == sorted(c.key for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.key for c in CASES])
def test_trajectory_is_bit_identical(case):
    assert digest(case) == DIGESTS[case.key]
