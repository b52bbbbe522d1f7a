"""Exact instruction counts of a guest run: total, per function, per mnemonic, per address.

`count_instructions` runs an ELF in QEMU with the insncount plugin and maps the per-address
counts to functions (symbol table) and mnemonics (disassembly). When the program calls the
markers `mt_mark_begin()` / `mt_mark_end()` (from `mt_board.h`), `Profile.region` holds the
counts of just the instructions between them, summed over all regions: this is what "instructions
per training step" needs, free of file I/O, semihosting and startup. The marker bodies are left
out of the region; the caller's call to `mt_mark_end` (one `bl`) is inside it.

Example:
    >>> p = count_instructions("train.elf", "cortex-m4", ["data.bin"])   # doctest: +SKIP
    >>> p.region.total / p.n_regions                                      # doctest: +SKIP
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mcutrain.mcu.disasm import UNKNOWN, Disassembly, load_disassembly
from mcutrain.mcu.plugin import plugin_path
from mcutrain.mcu.qemu import QemuError, run_elf
from mcutrain.targets import Target, get_target

MARKERS = ("mt_mark_begin", "mt_mark_end")


@dataclass(frozen=True)
class Counts:
    """Executed-instruction counts, broken down three ways (all sum to `total`)."""

    total: int
    per_function: dict[str, int]
    per_mnemonic: dict[str, int]
    per_address: dict[int, int] = field(repr=False)


@dataclass(frozen=True)
class Profile:
    """A guest run under the instruction counter: whole-run counts, region counts, exit and output."""

    total: int
    per_function: dict[str, int]
    per_mnemonic: dict[str, int]
    exit_code: int
    stdout: str
    per_address: dict[int, int] = field(repr=False)
    region: Counts | None = None
    n_regions: int = 0
    seconds: float = 0.0
    elf: Path | None = None
    target: Target | None = None
    stderr: str = ""
    """What the guest (and QEMU) wrote to stderr: a failed harness says why there."""

    @property
    def whole(self) -> Counts:
        return Counts(self.total, self.per_function, self.per_mnemonic, self.per_address)


def _breakdown(dis: Disassembly, addrs: np.ndarray, counts: np.ndarray) -> Counts:
    """Per-function and per-mnemonic sums of per-address counts (sorted by count, descending)."""
    keep = counts > 0
    addrs, counts = addrs[keep], counts[keep]
    fidx = dis.function_index(addrs)
    per_function = _sum_by(fidx, counts, dis.func_name)
    iidx = dis.insn_index(addrs)
    mnems = sorted(set(dis.mnemonic))
    code = {m: i for i, m in enumerate(mnems)}
    mcode = np.asarray([code[m] for m in dis.mnemonic], dtype=np.int64)
    per_mnemonic = _sum_by(np.where(iidx >= 0, mcode[np.maximum(iidx, 0)], -1), counts, mnems)
    per_address = dict(zip(addrs.tolist(), counts.tolist()))
    return Counts(int(counts.sum()), per_function, per_mnemonic, per_address)


def _sum_by(index: np.ndarray, counts: np.ndarray, names: list[str]) -> dict[str, int]:
    sums = np.zeros(len(names) + 1, dtype=np.int64)
    np.add.at(sums, index, counts)  # index -1 lands in the extra last slot: UNKNOWN
    order = np.argsort(-sums, kind="stable")
    out: dict[str, int] = {}
    for i in order[sums[order] > 0]:
        name = UNKNOWN if i == len(names) else names[i]
        out[name] = out.get(name, 0) + int(sums[i])
    return out


def read_counts(path: str | Path) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray]:
    """Parse the plugin's output: header fields, addresses, whole-run and region counts."""
    lines = Path(path).read_text().splitlines()
    if not lines or lines[0] != "insncount 1":
        raise QemuError(f"{path}: not an insncount output file")
    header = {k: int(v) for k, v in (ln.split() for ln in lines[1:4])}
    body = lines[4:]
    if body:
        table = np.asarray([ln.split() for ln in body])
        addrs = np.asarray([int(a, 16) for a in table[:, 0]], dtype=np.uint64)
        return header, addrs, table[:, 1].astype(np.int64), table[:, 2].astype(np.int64)
    empty = np.zeros(0, dtype=np.int64)
    return header, empty.astype(np.uint64), empty, empty


def count_instructions(elf: str | Path, target: str | Target, args: Sequence[str] = (), *,
                       cwd: str | Path | None = None, timeout: float = 120.0) -> Profile:
    """Run `elf` on the board of `target` and count every executed instruction exactly.

    Returns a `Profile`; `region` is set when the ELF defines the markers and the guest ran at
    least one begin/end pair. Raises `QemuError` if the markers were unbalanced.
    """
    target = get_target(target)
    elf = Path(elf)
    dis = load_disassembly(elf)
    plugin_args = [str(plugin_path())]
    have_markers = all(m in dis.func_name for m in MARKERS)
    if have_markers:
        begin, end = (dis.symbol(m)[0] for m in MARKERS)
        plugin_args += [f"begin=0x{begin:x}", f"end=0x{end:x}"]
    with tempfile.TemporaryDirectory(prefix="mcutrain-insn-") as tmp:
        out = Path(tmp) / "counts.txt"
        plugin_args.append(f"out={out}")
        result = run_elf(elf, target, args, cwd=cwd, timeout=timeout, plugin=",".join(plugin_args))
        if not out.is_file():
            raise QemuError(f"the instruction counter wrote no output for {elf.name} "
                            f"(exit code {result.exit_code}): {result.stderr.strip()}")
        header, addrs, counts, region_counts = read_counts(out)
    whole = _breakdown(dis, addrs, counts)
    if whole.total != header["total"]:
        raise QemuError(f"insncount total {header['total']} != sum of per-address counts {whole.total}")
    region = None
    if header["unmatched"]:
        raise QemuError(f"{elf.name}: {header['unmatched']} unmatched mt_mark_begin/mt_mark_end calls; "
                        "every begin needs one end before the next begin")
    if have_markers and header["regions"] > 0:
        in_marker = np.zeros(len(addrs), dtype=bool)
        for m in MARKERS:
            lo, hi = dis.symbol(m)
            in_marker |= (addrs >= lo) & (addrs < hi)
        region = _breakdown(dis, addrs, np.where(in_marker, 0, region_counts))
    return Profile(total=whole.total, per_function=whole.per_function, per_mnemonic=whole.per_mnemonic,
                   exit_code=result.exit_code, stdout=result.stdout, per_address=whole.per_address,
                   region=region, n_regions=header["regions"], seconds=result.seconds, elf=elf,
                   target=target, stderr=result.stderr)
