"""Experiments over grids: `mcutrain sweep` and the reading of its folder (docs/sweeps.md).

`spec` reads and checks a sweep file into keyed cells, `cell` runs one cell through the Python
API, `store` keeps the results folder, `engine` runs the unfinished cells on local processes or
(`ray_tasks`) a Ray cluster, `table` and `plots` are what `mcutrain report SWEEP_DIR` writes.
"""
