"""Dataset specs: the grammar, canonical forms, and clear refusals."""

import pytest

from mcutrain.data import DatasetSpec, SpecError, parse_spec
from mcutrain.data.spec import format_classes, parse_classes


@pytest.mark.parametrize("text, spec", [
    ("fashion-mnist", DatasetSpec("fashion-mnist")),
    ("fashion-mnist-c:gaussian_noise:5", DatasetSpec("fashion-mnist", "gaussian_noise", 5)),
    ("digits-c:contrast:3", DatasetSpec("digits", "contrast", 3)),
    ("fashion-mnist[0-4]", DatasetSpec("fashion-mnist", None, 0, (0, 1, 2, 3, 4))),
    ("mnist[5,0,2]", DatasetSpec("mnist", None, 0, (0, 2, 5))),
    ("fashion-mnist-c:fog:3[5-9]", DatasetSpec("fashion-mnist", "fog", 3, (5, 6, 7, 8, 9))),
    ("fashion-mnist[5-9]-c:fog:3", DatasetSpec("fashion-mnist", "fog", 3, (5, 6, 7, 8, 9))),
    ("mnist1d", DatasetSpec("mnist1d")),
])
def test_parse(text, spec):
    assert parse_spec(text) == spec


def test_canonical_form_round_trips():
    for text in ["fashion-mnist", "digits-c:contrast:3", "mnist[0-2,5,7-8]", "fashion-mnist-c:fog:3[0,2]"]:
        assert str(parse_spec(text)) == text
    assert str(parse_spec("fashion-mnist[9,8,7]-c:fog:1")) == "fashion-mnist-c:fog:1[7-9]"


def test_classes_helpers():
    assert parse_classes("0-2,7") == (0, 1, 2, 7)
    assert format_classes((0, 1, 2, 5, 7, 8)) == "0-2,5,7-8"


@pytest.mark.parametrize("text, match", [
    ("fashion-mnist-c:snow:3", "unknown corruption 'snow'"),
    ("fashion-mnist-c:fog:6", "outside 1..5"),
    ("fashion-mnist-c:fog:0", "outside 1..5"),
    ("fashion-mnist[4-2]", "backwards"),
    ("fashion-mnist[1,1]", "twice"),
    ("fashion-mnist[a]", "not N or N-M"),
    ("fashion-mnist[0-1]-c:fog:1[2-3]", "at most one"),
    ("Fashion MNIST", "grammar"),
])
def test_refusals_explain(text, match):
    with pytest.raises(SpecError, match=match):
        parse_spec(text)
