"""Source specs `KIND:PATH?a=1&b=2`: what parses, what is refused, and that registry specs are not taken."""

import pytest

from mcutrain.data import DatasetError, load_dataset
from mcutrain.data.source_spec import KINDS, is_source_spec, parse_source


def test_kind_path_and_options_are_split():
    s = parse_source("csv:runs/a b.csv?window=128&stride=64&label=activity")
    assert (s.kind, s.path, s.options) == ("csv", "runs/a b.csv", {"window": "128", "stride": "64",
                                                                    "label": "activity"})
    assert str(s) == "csv:runs/a b.csv?window=128&stride=64&label=activity"
    assert s.int_of("window") == 128 and s.int_of("missing", 7) == 7


@pytest.mark.parametrize("text", ["digits", "fashion-mnist-c:fog:3", "digits[0-4]", "mine.npz", "x:y", ""])
def test_registry_specs_and_unknown_kinds_are_not_source_specs(text):
    assert not is_source_spec(text)


def test_every_kind_is_recognized():
    assert all(is_source_spec(f"{k}:somewhere") for k in KINDS)


@pytest.mark.parametrize("text, message", [
    ("images:", "not a source spec"),
    ("images:?size=8", "names no path"),
    ("images:d?size", "is not NAME=VALUE"),
    ("images:d?size=8&size=9", "given twice"),
    ("images:d?Size=8", "is not NAME=VALUE"),
])
def test_malformed_specs_are_refused(text, message):
    with pytest.raises(DatasetError, match=message):
        parse_source(text)


@pytest.mark.parametrize("option, value, want", [
    ("size", "8y8", "HxW"), ("test", "1.5", "strictly between 0 and 1"), ("test", "abc", "a fraction"),
])
def test_bad_option_values_name_the_option(option, value, want):
    s = parse_source(f"images:d?{option}={value}")
    with pytest.raises(DatasetError, match=f"option {option}={value} is not .*{want}"):
        s.size_of() if option == "size" else s.fraction_of("test", 0.2)


def test_a_bare_folder_is_told_to_name_its_kind(tmp_path):
    (tmp_path / "photos").mkdir()
    with pytest.raises(DatasetError, match=r"is a folder; name its kind: images:.*photos"):
        load_dataset(str(tmp_path / "photos"))
