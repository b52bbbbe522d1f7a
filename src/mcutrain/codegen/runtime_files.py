"""Which runtime C files a build uses: derived from the folders of `codegen/runtime/`, never listed.

The runtime is laid out the way TensorFlow Lite Micro lays out its kernels:

    runtime/include/      shared headers: types, arch switches, fixed point, public inference API
    runtime/nn/           the portable reference kernels of inference (the contract)
    runtime/train/        training kernels: shared ones (loss, RNG, SGD) at the top, then
                          zo/ (zeroth order), qas/ (BP-QAS), fqt/ (fully quantized training)
    runtime/dsp/          optimized kernels for cores with the DSP extension, each the SAME file
                          name as the reference (in nn/ or train/) it replaces in a DSP build
    runtime/mve/          Helium (MVE) kernels for cores with the vector extension (Cortex-M55),
                          again same-named twins, plus their shared `mt_mve*.h` headers
    runtime/m0/           ARMv6-M (Cortex-M0+) kernels: same-named twins of reference files for a
                          core with eight low registers, MULS only, no SMULL and no divide, plus
                          their shared `mt_m0*.h` headers

The rule, per file name: a DSP build (`kernels='dsp'`) takes `dsp/NAME` where it exists and the
reference otherwise; a reference build takes the reference. An inference library ships
`include/` and `nn/`; a training library ships every folder. A DSP file is bit-exact with its
reference and falls back to it for the cases it is not fast for (and when `MT_DSP` is 0: a core
without the extension, or `-DMT_KERNELS_REF`), so a DSP library still builds everywhere. A
reference `.c` holds no DSP code; what a twin shares with it is in an always-inline `NAME_ref.h`
beside the reference, and a file that is all DSP keeps an empty reference unit of its name.

A Helium build (`helium=True`: a DSP build for an MVE core, `targets.helium_target`) takes `mve/NAME`
before `dsp/NAME`; an MVE twin runs the reference body where it does not apply (and when `MT_MVE`
is 0), so its library too builds, with the same results, everywhere. No other build ships an
`mve/` file, so the libraries of the other cores are unchanged by them.

An M0 build (`m0=True`: a reference build for a core of `targets.M0_CORES`, the Cortex-M0+ and
the RV32 cores, `targets.m0_target`) takes `m0/NAME` before the reference. An M0 twin is portable
C with its Thumb-1 assembly behind `MT_M0_ASM` (ARMv6-M with GCC or Clang), bit-exact with the
reference, so its library too builds everywhere; no other build ships an `m0/` file.

Every name is unique across the folders (apart from the twins), so an exported library holds
the chosen set in one flat `runtime/` folder and its Makefile and CMake files need no list.

Example:
    >>> sorted(runtime_files("ref"))[:2]
    ['mt_add_fwd_s8.c', 'mt_arch.h']
    >>> "mt_train.h" in runtime_files("dsp", training=True)
    True
"""

from __future__ import annotations

from pathlib import Path

RUNTIME_DIR = Path(__file__).resolve().parent / "runtime"
"""The runtime sources shipped in the package."""

INFERENCE_FOLDERS = ("include", "nn")
"""The folders an inference library ships (training kernels are left out)."""

DSP_FOLDER = "dsp"
"""Same-named optimized twins, chosen per file name by a DSP build."""

MVE_FOLDER = "mve"
"""Same-named Helium twins (and their `mt_mve*.h` headers), chosen by a Helium build."""

M0_FOLDER = "m0"
"""Same-named ARMv6-M twins (and their `mt_m0*.h` headers), chosen by an ARMv6-M reference build."""

KERNEL_CHOICES = ("ref", "dsp")
"""`kernels=` of every build: the portable reference files, or the DSP twins where they exist."""


class RuntimeLayoutError(RuntimeError):
    """The runtime folders break the layout rule (a name twice, or a DSP file without a reference)."""


def _sources(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.suffix in (".c", ".h"))


def _reference_paths(training: bool) -> dict[str, Path]:
    roots = [RUNTIME_DIR / f for f in INFERENCE_FOLDERS]
    if training:
        roots += [p for p in sorted(RUNTIME_DIR.iterdir()) if p.is_dir() and p.name not in
                  (*INFERENCE_FOLDERS, DSP_FOLDER, MVE_FOLDER, M0_FOLDER)]
    out: dict[str, Path] = {}
    for root in roots:
        for p in _sources(root):
            if p.name in out:
                raise RuntimeLayoutError(f"runtime file {p.name} is in both {out[p.name].parent} "
                                         f"and {p.parent}")
            out[p.name] = p
    return out


def runtime_paths(kernels: str = "ref", training: bool = False, helium: bool = False,
                  m0: bool = False) -> dict[str, Path]:
    """File name -> the package file a build with `kernels` ('ref' or 'dsp') compiles, sorted by name.

    `training=False` is the inference set (`include/`, `nn/`); `training=True` adds `train/`.
    `helium` (with 'dsp') takes the `mve/` twins first and adds their headers; `m0` (with 'ref')
    takes the `m0/` twins and adds their headers.
    """
    if kernels not in KERNEL_CHOICES:
        raise ValueError(f"kernels must be one of {', '.join(KERNEL_CHOICES)}, not {kernels!r}")
    paths = _reference_paths(training)
    every = _reference_paths(True) if not training else paths
    for p in _sources(RUNTIME_DIR / DSP_FOLDER) if (RUNTIME_DIR / DSP_FOLDER).is_dir() else []:
        if p.name not in every:
            raise RuntimeLayoutError(f"dsp/{p.name} has no reference file of the same name in nn/ or train/")
        if kernels == "dsp" and p.name in paths:
            paths[p.name] = p
    for p in _sources(RUNTIME_DIR / MVE_FOLDER) if (RUNTIME_DIR / MVE_FOLDER).is_dir() else []:
        own_header = p.name.startswith("mt_mve") and p.suffix == ".h"
        if p.name not in every and not own_header:
            raise RuntimeLayoutError(f"mve/{p.name} has no reference file of the same name in nn/ or "
                                     "train/ (only mt_mve*.h headers may be new)")
        if kernels == "dsp" and helium and (p.name in paths or own_header):
            paths[p.name] = p
    for p in _sources(RUNTIME_DIR / M0_FOLDER) if (RUNTIME_DIR / M0_FOLDER).is_dir() else []:
        own_header = p.name.startswith("mt_m0") and p.suffix == ".h"
        if p.name not in every and not own_header:
            raise RuntimeLayoutError(f"m0/{p.name} has no reference file of the same name in nn/ or "
                                     "train/ (only mt_m0*.h headers may be new)")
        if kernels == "ref" and m0 and (p.name in paths or own_header):
            paths[p.name] = p
    return dict(sorted(paths.items()))


def runtime_files(kernels: str = "ref", training: bool = False, helium: bool = False,
                  m0: bool = False) -> dict[str, str]:
    """File name -> text of the runtime a build with `kernels` uses (what an exported library ships)."""
    return {name: p.read_text() for name, p in runtime_paths(kernels, training, helium, m0).items()}


def runtime_sources(kernels: str = "ref", training: bool = False, helium: bool = False,
                    m0: bool = False) -> list[str]:
    """The `.c` file names a build compiles, in name order (the headers come with them)."""
    return [n for n in runtime_paths(kernels, training, helium, m0) if n.endswith(".c")]


def include_dirs(kernels: str = "ref", training: bool = True, helium: bool = False,
                 m0: bool = False) -> list[Path]:
    """Every package folder holding a header of the set: `-I` these to compile in place."""
    return sorted({p.parent for n, p in runtime_paths(kernels, training, helium, m0).items()
                   if n.endswith(".h")})
