"""The corruption grid: the cells it shows and the PNG it writes."""

import numpy as np
import pytest

from mcutrain.data import CORRUPTIONS, DatasetError, corrupt, load_dataset
from mcutrain.data.grid import grid_rows, mosaic, save_grid
from mcutrain.data.spec import parse_spec


def test_rows_per_corruption_for_a_clean_spec():
    labels, cells, class_names = grid_rows(parse_spec("digits"))
    assert cells.shape == (len(CORRUPTIONS), 6, 8, 8, 1)
    assert labels[0] == "gaussian noise" and class_names[:3] == ["0", "1", "2"]
    ds = load_dataset("digits")
    first = ds.x_test[np.argmax(ds.y_test == 0)]
    assert np.array_equal(cells[0, 0], first)                             # clean column
    assert np.array_equal(cells[0, 3], corrupt(first[None], CORRUPTIONS[0], 3, 0, stream=1)[0])


def test_rows_per_class_for_a_corrupted_subset():
    labels, cells, class_names = grid_rows(parse_spec("digits-c:fog:2[3-5]"))
    assert cells.shape == (3, 6, 8, 8, 1) and class_names == ["3", "4", "5"] and set(labels) == {"fog"}


def test_mosaic_layout():
    cells = np.zeros((2, 3, 4, 4, 1), np.float32)
    m = mosaic(cells, gap=1, fill=0.5)
    assert m.shape == (9, 14, 1) and m[4, 0, 0] == 0.5 and m[0, 4, 0] == 0.5 and m[0, 0, 0] == 0


def test_png_written(tmp_path):
    out = save_grid("digits-c:zigzag:4[0-2]", tmp_path / "grid.png", seed=3)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_signals_have_no_grid(tmp_path):
    with pytest.raises(DatasetError, match="1-D signals"):
        save_grid("mnist1d", tmp_path / "x.png")
