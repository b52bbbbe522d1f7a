"""Datasets, corruptions and splits (numpy only; the bottom layer with graph/io/zoo).

    from mcutrain.data import load_dataset, adaptation_split
    ds = load_dataset("fashion-mnist-c:gaussian_noise:5", seed=0)
    x_tr, y_tr, x_val, y_val, x_te, y_te = adaptation_split(ds.x_test, ds.y_test, 100, 10, seed=0)
"""

from mcutrain.data.corruptions import CORRUPTIONS, CorruptionError, corrupt
from mcutrain.data.dataset import Dataset
from mcutrain.data.registry import DATASETS, DatasetError, dataset_status, load_dataset
from mcutrain.data.spec import DatasetSpec, SpecError, parse_spec
from mcutrain.data.splits import SplitError, adaptation_split, stratified_split

__all__ = ["CORRUPTIONS", "DATASETS", "CorruptionError", "Dataset", "DatasetError", "DatasetSpec",
           "SpecError", "SplitError", "adaptation_split", "corrupt", "dataset_status", "load_dataset",
           "parse_spec", "stratified_split"]
