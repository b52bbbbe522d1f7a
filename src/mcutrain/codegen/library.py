"""Write a self-contained C library for one model: model.c/h, the runtime, build files, README.

Layout of the output directory:
    model.h, model.c           the model (see `emit.py`)
    runtime/                   the mcutrain C runtime: the files `runtime_files.runtime_files(kernels)`
                               picks from the package's folders, in one flat folder
    harness/main.c             a file-in, file-out driver (host or semihosting), optional to use
    Makefile, CMakeLists.txt   build `libmodel.a` (C99, -Wall -Wextra -Werror)
    README.md                  the API, the model's facts and how to build
Files are written atomically; a failed export leaves an earlier one intact file by file.

Example:
    >>> from mcutrain import zoo
    >>> from mcutrain.engines import ptq
    >>> x = np.random.default_rng(0).random((8, 8, 8, 1), dtype=np.float32)
    >>> qm = ptq.quantize_model(zoo.build("digits-cnn"), x)
    >>> res = export_library(qm, tmp_path, kernels="ref")   # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mcutrain.codegen.build_files import build_files, harness_sources
from mcutrain.codegen.dispatch import emit_training
from mcutrain.codegen.emit import ModelSource, emit_model
from mcutrain.codegen.rounding_c import CONFIG_HEADER, config_header, fqt_rounding
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.codegen.templates import render
from mcutrain.io import atomic_write_bytes
from mcutrain.qmodel import QuantModel


@dataclass
class ExportResult:
    """What `export_library` wrote and the model's memory figures."""

    out_dir: Path
    files: list[str]
    kernels: str
    arena_bytes: int
    const_bytes: int
    layers: list[str] = field(default_factory=list)
    model: ModelSource | None = None


def _write(path: Path, text: str) -> None:
    atomic_write_bytes(path, lambda f: f.write(text.encode()))


def export_library(qm: QuantModel, out_dir: str | Path, kernels: str = "dsp", planner: str = "greedy",
                   provenance: str = "", target: str = "") -> ExportResult:
    """Generate the library for `qm` into `out_dir` (created if needed)."""
    out = Path(out_dir)
    src = emit_model(qm, kernels=kernels, planner=planner, provenance=provenance)
    files: dict[str, str] = {"model.h": src.header, "model.c": src.source, **harness_sources(training=False)}
    for name, text in runtime_files(kernels).items():
        files[f"runtime/{name}"] = text
    files[f"runtime/{CONFIG_HEADER}"] = config_header(qm.rounding)
    files.update(build_files(kernels, training=False))
    g = qm.graph
    files["README.md"] = render(
        "README_inference.md", name=g.name, provenance=provenance or "(not recorded)",
        target=target or "(any)", kernels=kernels, planner=planner, arena=src.plan.arena_bytes,
        consts=src.const_bytes, macs=g.total_macs(), summary=g.summary(), in_shape=str(list(g.input_shape)),
        k=g.num_classes)
    for rel, text in files.items():
        _write(out / rel, text)
    return ExportResult(out, sorted(files), kernels, src.plan.arena_bytes, src.const_bytes, src.layers, src)


def export_training_library(method, out_dir: str | Path, batch: int = 1, kernels: str = "dsp",
                            provenance: str = "", target: str = "", lr: float = 0.0) -> ExportResult:
    """Generate a training library for `method` (ZOMethod, BPQASMethod or FQT) into `out_dir`.

    The files are those of `export_library` plus `harness/train_main.c`; the Makefile and CMake
    builds add `-ffp-contract=off` (the float32 order of the update). `res.model` holds the
    `TrainSource` (plan, state layout) for callers that run the library.
    """

    out = Path(out_dir)
    src = emit_training(method, batch=batch, kernels=kernels, provenance=provenance)
    files: dict[str, str] = {"model.h": src.header, "model.c": src.source, **harness_sources(training=True)}
    for name, text in runtime_files(kernels, training=True).items():
        files[f"runtime/{name}"] = text
    rounding = method.qm.rounding if hasattr(method, "qm") else fqt_rounding(method)   # FQT: no qm
    files[f"runtime/{CONFIG_HEADER}"] = config_header(rounding)
    files.update(build_files(kernels, training=True))
    g = method.qm.graph if hasattr(method, "qm") else method.graph   # FQT keeps its own graph
    s = src.plan.schedule
    files["README.md"] = render(
        "README_training.md", name=g.name, method=method.name, provenance=provenance or "(not recorded)",
        target=target or "(any)", kernels=kernels, batch=batch, arena=src.arena_bytes,
        train_arena=src.plan.arena_bytes,
        infer_arena=src.inference_arena_bytes, ram_w=src.ram_weight_bytes, consts=src.const_bytes,
        state=src.state_bytes, macs=sum(s.macs_by_phase().values()),
        trainable=", ".join(s.trainable) or "(none)",
        options=", ".join(f"{k} {v}" for k, v in src.options.items() if k != "method"),
        entries="\n".join(f"| {e.name} | {e.dtype} | {list(e.shape)} | {e.nbytes} |" for e in src.state),
        summary=g.summary(), in_shape=str(list(g.input_shape)), k=g.num_classes, lr=lr)
    for rel, text in files.items():
        _write(out / rel, text)
    return ExportResult(out, sorted(files), kernels, src.arena_bytes, src.const_bytes,
                        [n.name for n in g.nodes], src)
