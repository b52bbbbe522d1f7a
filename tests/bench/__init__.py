"""Tests of `mcutrain.bench`, one file per benchmark module (a package: its basenames repeat
other folders', e.g. test_memory.py)."""
