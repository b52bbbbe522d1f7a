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


def test_original_names_of_an_imported_model_select_its_renamed_layers():
    from mcutrain.methods.trainable import internal_spec, source_names_of

    g = zoo.build("small-cnn")
    orig = {"conv1": "/features/0/Conv", "fc2": "classifier out*/"}
    assert resolve_trainable(g, "layers:/features/0/Conv", orig) == ["conv1"]
    assert resolve_trainable(g, "layers:/features/*", orig) == ["conv1"]
    assert resolve_trainable(g, "layers:classifier out*/,fc1", orig) == ["fc1", "fc2"]
    assert resolve_trainable(g, "layers:conv1", orig) == ["conv1"]            # IR names still work
    with pytest.raises(ValueError, match="no layer matches"):
        resolve_trainable(g, "layers:/features/0/Conv")                       # not without the mapping
    assert internal_spec(g, "layers:/features/0/Conv, fc2", orig) == "layers:conv1,fc2"
    assert internal_spec(g, "last:2", orig) == "last:2" and internal_spec(g, "layers:x", None) == "layers:x"
    assert source_names_of({"source_names": {"a": "b", "c": 3}}) == {"a": "b"}
    assert source_names_of({"source_names": "junk"}) == {} == source_names_of(None)


def test_an_exact_name_wins_over_a_range():
    from mcutrain import graph as G

    g = G.Graph((4,), [G.linear("fc1-2", "input", 4, in_features=4),
                       G.linear("fc1", "fc1-2", 2, in_features=4)])
    assert resolve_trainable(g, "layers:fc1-2") == ["fc1-2"]
