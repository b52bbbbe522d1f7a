"""Host side of the training-kernel drivers: build them, write their input files, read their results.

`drivers/train_step.c` runs whole `zo` / `bp-qas` steps on a sequential int8 model;
`drivers/train_kernels.c` runs one kernel per case. Both read little-endian int32 words
(floats as their bits) and write raw results; the layouts are defined here, next to the
writers, and mirrored by the C readers.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutrain.codegen.runtime_files import include_dirs, runtime_paths
from mcutrain.graph import INPUT, Op
from mcutrain.qmodel import QuantModel

DRIVERS = Path(__file__).parent / "drivers"
RUNTIME_INCLUDES = include_dirs()
HELIUM_INCLUDES = include_dirs("dsp", helium=True)
M0_INCLUDES = include_dirs("ref", m0=True)
HOST_FLAGS = ["-std=c99", "-Wall", "-Wextra", "-Werror", "-ffp-contract=off", "-O1", "-g",
              "-fsanitize=address,undefined,float-cast-overflow",
              "-fno-sanitize-recover=undefined,float-cast-overflow"]
MAGIC = 0x4D545453
OPS = {Op.CONV2D: 1, Op.LINEAR: 2, Op.MAXPOOL: 3, Op.AVGPOOL: 4, Op.GLOBAL_AVGPOOL: 5, Op.FLATTEN: 6,
       Op.RELU: 7, Op.RELU6: 7}
TRAIN = {"none": 0, "wp": 1, "np": 2, "bp": 3}
METHODS = {"zo": 1, "bp-qas": 2}


def runtime_sources(kernels: str = "ref", helium: bool = False, m0: bool = False) -> list[Path]:
    """Every runtime source of a training build with `kernels` ('ref' or 'dsp'; `helium`: the MVE
    twins first; `m0`: the ARMv6-M twins first), compiled in place."""
    return [p for n, p in runtime_paths(kernels, training=True, helium=helium, m0=m0).items()
            if n.endswith(".c")]


def build_host_driver(name: str, out: Path, defines: tuple[str, ...] = ()) -> Path:
    """Compile drivers/<name>.c with every runtime source (host gcc, ASan + UBSan)."""
    cc = shutil.which("gcc")
    assert cc is not None
    cmd = [cc, *HOST_FLAGS, *(f"-D{d}" for d in defines), *(f"-I{d}" for d in RUNTIME_INCLUDES),
           str(DRIVERS / f"{name}.c"), *map(str, runtime_sources()), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return out


def _f32_bits(v) -> np.ndarray:
    return np.asarray(v, np.float32).reshape(-1).view(np.int32)


def _hwc(shape: tuple[int, ...]) -> tuple[int, int, int]:
    return tuple(shape) if len(shape) == 3 else (1, 1, int(np.prod(shape)))


@dataclass
class StepConfig:
    """What `train_step.c` runs: the method's settings as the C step reads them."""

    method: str
    lr: float
    train: dict[str, str]          # layer -> wp | np | bp
    queries: int = 0
    sigma_w: int = 1
    sigma_b: int = 100
    sigma_node: int = 5
    gns: bool = True
    qas: bool = True
    rng_state: int = 1
    momentum: float = 0.0
    max_step: int = 254
    """The C value of the ZO weight-step limit (`step_limit.c_max_step`; 254: none)."""


def write_step_file(path: Path, qm: QuantModel, cfg: StepConfig, batches: list[tuple[np.ndarray, np.ndarray]]
                    ) -> None:
    """Layout: header (magic, method, B, steps, K, input size, nodes, logit scale, lr, momentum,
    queries, sigma_w, sigma_b, sigma_node, gns, qas, rng state, ZO max step); per node 20 words (op, source
    node or -1, in h/w/c, out h/w/c, kh, kw, sh, sw, pad top, pad left, groups, z_x, z_y,
    act_min, act_max, train kind) and, for conv2d/linear, O, K, s_x, s_y, w[O*K], b[O],
    multiplier[O], shift[O], s_w[O]; then per step the int8 batch (B * input size) and labels (B)."""
    g = qm.graph
    names = [n.name for n in g.nodes]
    bsz = len(batches[0][1])
    out_qp = qm.act_qparams[g.output]
    words: list[np.ndarray] = [np.array([
        MAGIC, METHODS[cfg.method], bsz, len(batches), g.num_classes, int(np.prod(g.input_shape)),
        len(names)],
        np.int32), _f32_bits([out_qp.scale, cfg.lr, cfg.momentum]),
        np.array([cfg.queries, cfg.sigma_w, cfg.sigma_b, cfg.sigma_node, int(cfg.gns), int(cfg.qas),
                  np.uint32(cfg.rng_state).view(np.int32), cfg.max_step], np.int32)]
    for n in g.nodes:
        if n.op not in OPS:
            raise ValueError(f"train_step.c has no op {n.op.value} (node '{n.name}')")
        src = n.inputs[0]
        a = n.attrs
        kh, kw = a.get("kernel", (0, 0))
        sh, sw = a.get("stride", (0, 0))
        pad = a.get("padding", (0, 0, 0, 0))
        lo, hi = qm.act_range(n) if n.op in (Op.CONV2D, Op.LINEAR, Op.RELU, Op.RELU6) else (-128, 127)
        zx = qm.zero_point(src)
        zy = qm.zero_point(n.name)
        rec = [OPS[n.op], -1 if src == INPUT else names.index(src), *_hwc(g.shape(src)),
               *_hwc(g.shape(n.name)),
               kh, kw, sh, sw, pad[0], pad[2], a.get("groups", 1), zx, zy, lo, hi,
               TRAIN[cfg.train.get(n.name, "none")]]
        words.append(np.array(rec, np.int32))
        if n.op in (Op.CONV2D, Op.LINEAR):
            w = qm.weights[n.name]
            o = w.shape[0]
            mult, shift = qm.requant_params(n)
            s_w = np.broadcast_to(qm.weight_qparams[n.name].scale, (o,))
            words += [np.array([o, w.size // o], np.int32), _f32_bits([qm.scale(src), qm.scale(n.name)]),
                      w.reshape(-1).astype(np.int32), qm.biases[n.name].astype(np.int32),
                      np.asarray(mult, np.int32), np.asarray(shift, np.int32), _f32_bits(s_w)]
    for x_q, y in batches:
        words += [x_q.reshape(-1).astype(np.int32), np.asarray(y, np.int32)]
    path.write_bytes(np.concatenate(words).astype("<i4").tobytes())


@dataclass
class StepResult:
    losses: np.ndarray                      # (B,) int32 Q16 losses of the step's base pass
    weights: dict[str, np.ndarray]
    biases: dict[str, np.ndarray]
    rng_state: int


def read_step_results(path: Path, qm: QuantModel, trained: list[str], bsz: int,
                      steps: int) -> list[StepResult]:
    """Per step: losses (B int32), per trained layer in graph order int8 w then int32 b, rng state."""
    raw = path.read_bytes()
    off = 0

    def take(dtype, count: int) -> np.ndarray:
        nonlocal off
        size = np.dtype(dtype).itemsize * count
        assert off + size <= len(raw), f"result file ends early at byte {off} (need {size} more)"
        a = np.frombuffer(raw[off:off + size], dtype).copy()
        off += size
        return a

    order = [n.name for n in qm.graph.nodes if n.name in trained]
    out = []
    for _ in range(steps):
        losses = take("<i4", bsz)
        w, b = {}, {}
        for name in order:
            w[name] = take(np.int8, qm.weights[name].size).reshape(qm.weights[name].shape)
            b[name] = take("<i4", qm.biases[name].size)
        out.append(StepResult(losses, w, b, int(take("<u4", 1)[0])))
    assert off == len(raw), f"{len(raw) - off} unread bytes in the result file"
    return out


def first_mismatch(name: str, got: np.ndarray, want: np.ndarray) -> str:
    """'' when equal, else the tensor, the count and the first differing index with both values."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != {want.shape}"
    bad = np.argwhere(got != want)
    if not len(bad):
        return ""
    i = tuple(bad[0])
    return f"{name}: {len(bad)} differ, first at {list(i)}: C {got[i]} != Python {want[i]}"
