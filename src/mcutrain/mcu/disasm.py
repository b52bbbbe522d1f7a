"""What an ELF contains, instruction by instruction: addresses, sizes, mnemonics and functions.

Built from `objdump -d` and `nm` of the ELF's architecture (Arm or RISC-V), cached per file (path, size and
modification time), and used to turn the per-address counts of the insncount plugin into
per-function and per-mnemonic counts (`profile.py`) and into cycle estimates (`cycles.py`).
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mcutrain.mcu.toolchain import elf_arch, find_toolchain

_INSN_RE = re.compile(
    r"^\s*([0-9a-f]+):\t([0-9a-f]{8}|[0-9a-f]{4}(?: [0-9a-f]{4})?)\s*\t(\S+)(?:\t([^@;]*))?")
"""One instruction line: Thumb prints 16-bit halves ("f7ff fffe"), RISC-V one word ("00000297") or
one compressed halfword; `@` and `;` start Arm comments (a RISC-V `# ...` comment stays in the operands)."""
_NM_RE = re.compile(r"^([0-9a-f]+)(?: ([0-9a-f]+))? ([TtWw]) (\S+)$")
_WIDTH_SUFFIX_RE = re.compile(r"\.(w|n)$")

UNKNOWN = "?"
"""Name used for addresses outside every function symbol / not found in the disassembly."""


@dataclass(frozen=True, eq=False)
class Disassembly:
    """Instructions and function symbols of one ELF, as sorted numpy arrays plus lists.

    Compared and hashed by identity (it is cached per file), so derived tables can be cached too.
    """

    address: np.ndarray       # uint64, sorted: address of each instruction
    size: np.ndarray          # uint8: 2 or 4 bytes
    mnemonic: list[str]       # lower case, width qualifier (.w/.n) removed
    operands: list[str]
    func_start: np.ndarray    # uint64, sorted
    func_end: np.ndarray      # uint64, exclusive
    func_name: list[str]

    def symbol(self, name: str) -> tuple[int, int]:
        """(start, end) address of function `name`; KeyError if the ELF has no such function."""
        i = self.func_name.index(name) if name in self.func_name else -1
        if i < 0:
            raise KeyError(f"no function {name!r} in the symbol table")
        return int(self.func_start[i]), int(self.func_end[i])

    def function_index(self, addrs: np.ndarray) -> np.ndarray:
        """Index into func_name for each address, -1 where no function covers it."""
        idx = np.searchsorted(self.func_start, addrs, side="right") - 1
        ok = idx >= 0
        ok[ok] &= addrs[ok] < self.func_end[idx[ok]]
        return np.where(ok, idx, -1)

    def insn_index(self, addrs: np.ndarray) -> np.ndarray:
        """Index of the instruction at each address, -1 where the disassembly has none."""
        idx = np.searchsorted(self.address, addrs)
        idx_c = np.minimum(idx, len(self.address) - 1)
        ok = (idx < len(self.address)) & (self.address[idx_c] == addrs)
        return np.where(ok, idx_c, -1)


def load_disassembly(elf: str | Path) -> Disassembly:
    """Disassemble `elf` (cached while the file is unchanged)."""
    p = Path(elf).resolve()
    st = p.stat()
    return _load(str(p), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _load(path: str, size: int, mtime_ns: int) -> Disassembly:
    arch = elf_arch(path)
    tools = find_toolchain(arch)
    # NOTE: `-m armv8.1-m.main` decodes Helium (MVE) instructions, which objdump otherwise shows as
    # coprocessor ones (cdp, ldc) in a linked image; every older Cortex-M's Thumb code decodes the same.
    machine = ["-m", "armv8.1-m.main"] if arch == "arm" else []
    dump = subprocess.run([tools.objdump, "-d", *machine, path],
                          capture_output=True, text=True, check=True).stdout
    addr, sz, mn, ops = [], [], [], []
    for line in dump.splitlines():
        m = _INSN_RE.match(line)
        if m is None or m.group(3).startswith("."):
            continue  # headers, labels, literal pools (.word)
        addr.append(int(m.group(1), 16))
        sz.append(len(m.group(2).replace(" ", "")) // 2)
        mn.append(_WIDTH_SUFFIX_RE.sub("", m.group(3).lower()))
        ops.append((m.group(4) or "").strip())
    order = np.argsort(np.asarray(addr, dtype=np.uint64), kind="stable")
    nm = subprocess.run([tools.nm, "-S", "-n", "--defined-only", path],
                        capture_output=True, text=True, check=True).stdout
    starts, sizes, names = [], [], []
    for line in nm.splitlines():
        m = _NM_RE.match(line.strip())
        if m is None:
            continue
        starts.append(int(m.group(1), 16) & ~1)  # Thumb symbols may carry bit 0
        sizes.append(int(m.group(2), 16) if m.group(2) else 0)
        names.append(m.group(4))
    fs = np.asarray(starts, dtype=np.uint64)
    fsz = np.asarray(sizes, dtype=np.uint64)
    forder = np.argsort(fs, kind="stable")
    fs, fsz, names = fs[forder], fsz[forder], [names[i] for i in forder]
    # Symbols without a size (some hand-written assembly) extend to the next symbol.
    nxt = np.append(fs[1:], np.uint64(np.iinfo(np.uint64).max))
    fe = np.where(fsz > 0, fs + fsz, nxt)
    return Disassembly(
        address=np.asarray(addr, dtype=np.uint64)[order], size=np.asarray(sz, dtype=np.uint8)[order],
        mnemonic=[mn[i] for i in order], operands=[ops[i] for i in order],
        func_start=fs, func_end=fe, func_name=names)
