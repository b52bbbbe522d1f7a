"""Write a self-contained C library for one model: model.c/h, the runtime, build files, README.

Layout of the output directory:
    model.h, model.c           the model (see `emit.py`)
    runtime/                   the mcutrain C runtime: the files `runtime_files.runtime_files(kernels)`
                               picks from the package's folders, in one flat folder
    harness/main.c             a file-in, file-out driver (host or semihosting), optional to use
    Makefile, CMakeLists.txt   build `libmodel.a` (C99, -Wall -Wextra -Werror, -O2)
    cmake/arm-none-eabi.cmake  CMake toolchain file for the target's core (when a target is given;
                               cmake/riscv64-unknown-elf.cmake for a RISC-V target)
    README.md                  the API, the model's facts and how to build
Files are written atomically; a failed export leaves an earlier one intact file by file.
With `prefix='kws_'` every name and file of the library starts with it (`kws_model.h`,
`kws_model_predict`, `runtime/kws_mt_nn.h`, `libkws_model.a`; `codegen/prefix.py`), so two
libraries link into one image; without one the files are those of every earlier version.

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

from mcutrain.codegen.build_files import build_files, harness_programs, harness_sources, toolchain_path
from mcutrain.codegen.compiled_in import compiled_in, readme_rows
from mcutrain.codegen.dispatch import emit_training
from mcutrain.codegen.emit import ModelSource, emit_model
from mcutrain.codegen.examples import LibraryFacts, example_files
from mcutrain.codegen.prefix import LIBRARY_NAME, prefixed_files
from mcutrain.codegen.rounding_c import CONFIG_HEADER, config_header, fqt_rounding
from mcutrain.codegen.runtime_files import runtime_files
from mcutrain.codegen.templates import render
from mcutrain.io import atomic_write_bytes
from mcutrain.plan.lifetimes import widens_inference_weights
from mcutrain.qmodel import QuantModel
from mcutrain.targets import helium_target, m0_target


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


def _write_all(out: Path, files: dict[str, str], prefix: str, training: bool, examples: tuple[str, ...] = (),
               facts: LibraryFacts | None = None) -> list[str]:
    """Write `files` and the `examples` of the library `facts` describes (all renamed for `prefix`)
    under `out`; their relative paths, sorted."""
    if examples and facts is not None:
        files = {**files, **example_files(list(examples), facts, files)}
    files = prefixed_files(files, prefix, harness_programs(training))
    for rel, text in files.items():
        atomic_write_bytes(out / rel, lambda f, text=text: f.write(text.encode()))
    return sorted(files)


def export_library(qm: QuantModel, out_dir: str | Path, kernels: str = "dsp", planner: str = "greedy",
                   provenance: str = "", target: str = "", prefix: str = "",
                   examples: tuple[str, ...] = ()) -> ExportResult:
    """Generate the library for `qm` into `out_dir` (created if needed); `prefix` see the module doc,
    `examples` the firmware layouts of `codegen/examples.py` ('arduino', 'baremetal-nrf52840', ...)."""
    out = Path(out_dir)
    helium = kernels == "dsp" and helium_target(target)
    m0 = kernels == "ref" and m0_target(target)
    src = emit_model(qm, kernels=kernels, planner=planner, provenance=provenance,
                     widen=widens_inference_weights(kernels, target))
    files: dict[str, str] = {"model.h": src.header, "model.c": src.source, **harness_sources(training=False)}
    for name, text in runtime_files(kernels, helium=helium, m0=m0).items():
        files[f"runtime/{name}"] = text
    files[f"runtime/{CONFIG_HEADER}"] = config_header(qm.rounding)
    files.update(build_files(kernels, training=False, prefix=prefix, target=target))
    g = qm.graph
    files["README.md"] = render(
        "README_inference.md", name=g.name, provenance=provenance or "(not recorded)",
        target=target or "(any)", toolchain=toolchain_path(target), kernels=kernels, planner=planner,
        arena=src.plan.arena_bytes,
        consts=src.const_bytes, macs=g.total_macs(), summary=g.summary(), in_shape=str(list(g.input_shape)),
        k=g.num_classes, lib=prefix + LIBRARY_NAME,
        compiled_in=readme_rows(compiled_in(None, batch=1, rounding=qm.rounding, kernels=kernels)))
    facts = LibraryFacts(prefix + LIBRARY_NAME, prefix, False, "none", kernels, target)
    written = _write_all(out, files, prefix, training=False, examples=examples, facts=facts)
    return ExportResult(out, written, kernels, src.plan.arena_bytes, src.const_bytes, src.layers, src)


def export_training_library(method, out_dir: str | Path, batch: int = 1, kernels: str = "dsp",
                            provenance: str = "", target: str = "", lr: float = 0.0,
                            prefix: str = "", examples: tuple[str, ...] = ()) -> ExportResult:
    """Generate a training library for `method` (ZOMethod, BPQASMethod or FQT) into `out_dir`.

    The files are those of `export_library` plus `harness/train_main.c`; the Makefile and CMake
    builds add `-ffp-contract=off` (the float32 order of the update). `res.model` holds the
    `TrainSource` (plan, state layout) for callers that run the library.
    """

    out = Path(out_dir)
    src = emit_training(method, batch=batch, kernels=kernels, provenance=provenance)
    files: dict[str, str] = {"model.h": src.header, "model.c": src.source, **harness_sources(training=True)}
    helium = kernels == "dsp" and helium_target(target)
    m0 = kernels == "ref" and m0_target(target)
    for name, text in runtime_files(kernels, training=True, helium=helium, m0=m0).items():
        files[f"runtime/{name}"] = text
    rounding = method.qm.rounding if hasattr(method, "qm") else fqt_rounding(method)   # FQT: no qm
    files[f"runtime/{CONFIG_HEADER}"] = config_header(rounding)
    files.update(build_files(kernels, training=True, prefix=prefix, target=target))
    g = method.qm.graph if hasattr(method, "qm") else method.graph   # FQT keeps its own graph
    s = src.plan.schedule
    files["README.md"] = render(
        "README_training.md", name=g.name, method=method.name, provenance=provenance or "(not recorded)",
        target=target or "(any)", toolchain=toolchain_path(target), kernels=kernels, batch=batch,
        arena=src.arena_bytes,
        train_arena=src.plan.arena_bytes,
        infer_arena=src.inference_arena_bytes, ram_w=src.ram_weight_bytes, consts=src.const_bytes,
        state=src.state_bytes, macs=sum(s.macs_by_phase().values()),
        trainable=", ".join(s.trainable) or "(none)",
        options=", ".join(f"{k} {v}" for k, v in src.options.items() if k != "method"),
        entries="\n".join(f"| {e.name} | {e.dtype} | {list(e.shape)} | {e.nbytes} |" for e in src.state),
        summary=g.summary(), in_shape=str(list(g.input_shape)), k=g.num_classes, lr=lr,
        lib=prefix + LIBRARY_NAME,
        compiled_in=readme_rows(compiled_in(s.decisions, batch, rounding, kernels)))
    facts = LibraryFacts(prefix + LIBRARY_NAME, prefix, True, method.name, kernels, target, lr)
    written = _write_all(out, files, prefix, training=True, examples=examples, facts=facts)
    return ExportResult(out, written, kernels, src.arena_bytes, src.const_bytes,
                        [n.name for n in g.nodes], src)
