"""Benchmarks: one module per topic, one registry and runner (`mcutrain bench NAME`).

The package's face: the runner (`runner.py`), whose `benchmarks()` discovers every module of
this package and collects what their `register(add)` hooks add; `run(name, ...)` runs one;
`write_results`, `result_path`, `update_docs` and `markdown_table` (`files.py`) are the
helpers every benchmark writes its result JSON and docs block through. Topics: `fqt` (FQT accuracy and
simulator speed), `int8`, `memory`, `mcu` (training steps in QEMU), `mcu_inference`
(inference in QEMU), `zo`, `zo_cost`, `float_speed` (float engine vs PyTorch).
"""

from mcutrain.bench.files import (
    DOCS_PAGE,
    PAGE_HEAD,
    limit_threads,
    markdown_table,
    result_path,
    update_docs,
    write_results,
)
from mcutrain.bench.runner import BenchFunc, add, benchmarks, run

__all__ = ["DOCS_PAGE", "PAGE_HEAD", "BenchFunc", "add", "benchmarks", "limit_threads", "markdown_table",
           "result_path", "run", "update_docs", "write_results"]
