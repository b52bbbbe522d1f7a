import pytest

from mcutrain import zoo
from mcutrain.methods.trainable import resolve_trainable


def test_specs_on_mcunet():
    g = zoo.build("mcunet-5fps", input_shape=(32, 32, 3))
    assert resolve_trainable(g, "last:1") == ["head"]
    assert resolve_trainable(g, "layers:blocks.4-7.pw1") == [f"blocks.{i}.pw1" for i in range(4, 8)]
    assert resolve_trainable(g, "layers:head, blocks.13.*") == [
        "blocks.13.pw1", "blocks.13.dw", "blocks.13.pw2", "head"]
    assert len(resolve_trainable(g, "all")) == len(g.parametric()) == 1 + 13 * 3 + 2 + 1


@pytest.mark.parametrize("spec, needle", [
    ("last:9", "has 4 layers"), ("last:x", "whole number"), ("layers:conv9", "no layer matches 'conv9'"),
    ("some", "unknown trainable spec"), ("layers:conv3-1", "backwards")])
def test_bad_specs(spec, needle):
    with pytest.raises(ValueError, match=needle):
        resolve_trainable(zoo.build("small-cnn"), spec)
