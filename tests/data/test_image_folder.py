"""`images:FOLDER`: PNG/JPEG/BMP class folders decoded by Pillow, sized, split, corrupted, and refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from mcutrain.data import DatasetError, corrupt, load_dataset


def write_folder(root: Path, classes=("cat", "dog", "emu"), per_class=5, size=(6, 7), mode="L",
                 formats=("png", "bmp")) -> dict[str, list[int]]:
    """Constant-grey images (value 10 * class + file) in the given formats; returns the values."""
    values: dict[str, list[int]] = {}
    for c, name in enumerate(classes):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            v = 10 * c + i
            px = np.full((*size, 3), v, np.uint8) if mode == "RGB" else np.full(size, v, np.uint8)
            Image.fromarray(px, mode).save(root / name / f"{i}.{formats[i % len(formats)]}")
            values.setdefault(name, []).append(v)
    return values


def test_lossless_files_decode_to_their_pixels_with_sorted_class_names(tmp_path):
    values = write_folder(tmp_path / "d", classes=("zebra", "ant", "mole"))
    ds = load_dataset(f"images:{tmp_path / 'd'}")
    assert ds.class_names == ("ant", "mole", "zebra") and ds.shape == (6, 7, 1)
    assert ds.n_train + ds.n_test == 15 and ds.n_test == 3       # 20% of each class of 5
    for split_x, split_y in ((ds.x_train, ds.y_train), (ds.x_test, ds.y_test)):
        for x, y in zip(split_x, split_y):
            assert np.all(x == x.flat[0])
            assert round(float(x.flat[0]) * 255) in values[ds.class_names[y]]
    assert np.bincount(ds.y_test).tolist() == [1, 1, 1]


def test_jpeg_is_decoded_too(tmp_path):
    write_folder(tmp_path / "d", formats=("jpg", "jpeg"), size=(8, 8))
    ds = load_dataset(f"images:{tmp_path / 'd'}")
    assert ds.shape == (8, 8, 1) and ds.n_train == 12


def test_colour_images_give_rgb_and_channels_1_gives_grey(tmp_path):
    write_folder(tmp_path / "d", mode="RGB")
    assert load_dataset(f"images:{tmp_path / 'd'}").shape == (6, 7, 3)
    assert load_dataset(f"images:{tmp_path / 'd'}?channels=1").shape == (6, 7, 1)


def test_model_input_shape_resizes_and_converts(tmp_path):
    write_folder(tmp_path / "d")
    ds = load_dataset(f"images:{tmp_path / 'd'}", sample_shape=(8, 8, 3))
    assert ds.shape == (8, 8, 3)
    assert np.all(ds.x_train[..., 0] == ds.x_train[..., 2])      # grey to RGB: equal channels


def test_mixed_sizes_are_refused_naming_files_unless_a_size_is_given(tmp_path):
    write_folder(tmp_path / "d")
    Image.fromarray(np.zeros((9, 9), np.uint8)).save(tmp_path / "d" / "dog" / "big.png")
    with pytest.raises(DatasetError, match=r"differ in size .*6x7: '.*'.*9x9: '.*big\.png'.*size=HxW"):
        load_dataset(f"images:{tmp_path / 'd'}")
    assert load_dataset(f"images:{tmp_path / 'd'}?size=5x4").shape == (5, 4, 1)


def test_train_and_test_folders_are_the_split(tmp_path):
    write_folder(tmp_path / "d" / "train", per_class=4)
    write_folder(tmp_path / "d" / "test", classes=("cat", "emu"), per_class=2)
    ds = load_dataset(f"images:{tmp_path / 'd'}")
    assert (ds.n_train, ds.n_test) == (12, 4) and ds.class_names == ("cat", "dog", "emu")
    assert sorted(set(ds.y_test.tolist())) == [0, 2]


def test_split_is_seeded_by_split_seed_not_by_seed(tmp_path):
    write_folder(tmp_path / "d", per_class=10)
    spec = f"images:{tmp_path / 'd'}"
    a, b = load_dataset(spec, seed=0), load_dataset(spec, seed=5)
    c = load_dataset(spec + "?split_seed=3")
    assert np.array_equal(a.x_test, b.x_test)
    assert not np.array_equal(a.x_test, c.x_test)


def test_corruption_and_class_subset_apply(tmp_path):
    write_folder(tmp_path / "d", size=(8, 8), per_class=5)
    clean = load_dataset(f"images:{tmp_path / 'd'}?classes=1-2")
    assert clean.class_names == ("dog", "emu") and clean.classes == (1, 2)
    ds = load_dataset(f"images:{tmp_path / 'd'}?classes=1-2&corruption=gaussian_noise&severity=4", seed=2)
    assert np.array_equal(ds.x_test, corrupt(clean.x_test, "gaussian_noise", 4, 2, stream=1))
    assert not np.array_equal(ds.x_test, clean.x_test)


def _bad(root: Path, case: str) -> str:
    if case == "empty folder":
        root.mkdir()
    elif case == "one class":
        write_folder(root, classes=("cat",))
    elif case == "empty class":
        write_folder(root)
        (root / "fox").mkdir()
    elif case == "undecodable":
        write_folder(root)
        (root / "cat" / "broken.png").write_bytes(b"\x89PNG not really")
    elif case == "extra test class":
        write_folder(root / "train", classes=("cat", "dog"))
        write_folder(root / "test", classes=("cat", "yak"))
    return f"images:{root}"


@pytest.mark.parametrize("case, message", [
    ("empty folder", "has no class subfolders"),
    ("one class", "holds only the class 'cat'; classification needs at least two"),
    ("empty class", r"class folder '.*fox' holds no PNG/JPEG/BMP images"),
    ("undecodable", r"cannot decode image '.*broken\.png'"),
    ("extra test class", r"test/ has classes \['yak'\]"),
])
def test_bad_folders_are_refused_naming_the_file_and_the_problem(tmp_path, case, message):
    with pytest.raises(DatasetError, match=message):
        load_dataset(_bad(tmp_path / "d", case))


def test_missing_folder_unknown_option_and_bad_channels(tmp_path):
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(f"images:{tmp_path / 'nope'}")
    write_folder(tmp_path / "d")
    with pytest.raises(DatasetError, match="takes no option 'window'"):
        load_dataset(f"images:{tmp_path / 'd'}?window=3")
    with pytest.raises(DatasetError, match="channels=2"):
        load_dataset(f"images:{tmp_path / 'd'}?channels=2")
    with pytest.raises(DatasetError, match="not H x W x 1 or 3 images"):
        load_dataset(f"images:{tmp_path / 'd'}", sample_shape=(1, 40, 2))


def test_decoded_pixels_are_cached_until_a_file_changes(tmp_path, monkeypatch):
    from mcutrain.data import image_folder

    write_folder(tmp_path / "d")
    spec = f"images:{tmp_path / 'd'}"
    first = load_dataset(spec)

    def no_decode(*args):
        raise AssertionError("decoded again")

    monkeypatch.setattr(image_folder, "decode", no_decode)
    again = load_dataset(spec)
    assert np.array_equal(first.x_train, again.x_train) and np.array_equal(first.y_test, again.y_test)
    Image.fromarray(np.zeros((6, 7), np.uint8)).save(tmp_path / "d" / "cat" / "new.png")
    with pytest.raises(AssertionError, match="decoded again"):
        load_dataset(spec)
