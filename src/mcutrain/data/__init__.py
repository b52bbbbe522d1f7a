"""Datasets, corruptions and splits (numpy only; the bottom layer with graph/io/zoo)."""

from mcutrain.data.corruptions import CORRUPTIONS, CorruptionError, corrupt

__all__ = ["CORRUPTIONS", "CorruptionError", "corrupt"]
