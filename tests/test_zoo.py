"""The zoo builds every architecture with the published shapes and seeded weights."""

import numpy as np
import pytest

from mcutrain import zoo


@pytest.mark.parametrize("arch", list(zoo.ARCHS))
def test_builds_with_seeded_weights(arch):
    a = zoo.build(arch, seed=1, input_shape=(32, 32, 3) if arch == "mcunet-5fps" else None)
    b = zoo.build(arch, seed=1, input_shape=(32, 32, 3) if arch == "mcunet-5fps" else None)
    c = zoo.build(arch, seed=2, input_shape=(32, 32, 3) if arch == "mcunet-5fps" else None)
    assert a.output_shape == (10,)
    for k, v in a.arrays().items():
        np.testing.assert_array_equal(v, b.arrays()[k])
    assert any(not np.array_equal(v, c.arrays()[k]) for k, v in a.arrays().items())


def test_small_cnn_has_four_trainable_layers():
    assert len(zoo.build("small-cnn").parametric()) == 4


def test_mcunet_matches_the_published_network():
    g = zoo.build("mcunet-5fps", num_classes=10)
    names = [n.name for n in g.parametric()]
    assert names[0] == "stem" and names[-1] == "head"
    assert "blocks.4.pw1" in names and "blocks.0.pw1" not in names  # block 0 has no expansion
    # The ZO seed counts 463,216 int8 backbone weights (everything but the task head).
    backbone = sum(n.params["weight"].size for n in g.parametric() if n.name != "head")
    assert backbone == 463_216
    assert g.shape("blocks.13.pw2") == (4, 4, 160)
    assert sum(n.op.value == "add" for n in g.nodes) == 7
    assert zoo.build("mcunet-5fps", num_classes=3, input_shape=(48, 48, 3)).output_shape == (3,)


def test_unknown_arch():
    with pytest.raises(ValueError, match="available: digits-cnn"):
        zoo.build("resnet")
