"""The package's import graph has no circle, and its modules stay small.

A circle between modules means neither can be understood, tested or moved
without the other, and it is usually hidden by a function-local import that
defers the failure to run time. So this test reads every module of
`src/mcutrain` with `ast` (no import runs), takes every `import` and
`from ... import` at any depth -- module level and inside functions alike --
plus `importlib.import_module(...)` calls whose argument is a string literal
or an f-string (a placeholder matches any one name), and asserts the graph of
intra-package imports is acyclic, printing a circle when it is not. A module
name held in a variable (`cli.build_parser`'s loop over its command list) is not
followed: write the pattern into an f-string where it matters.
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

PACKAGE = "mcutrain"
ROOT = Path(__file__).resolve().parents[1] / "src" / PACKAGE

MAX_LINES = 500
OVER_LIMIT_TODAY: dict[str, int] = {
    # Modules allowed over the limit, each with its line count that day. Empty: every module of
    # the package is at most MAX_LINES long. The list may only shrink.
}


DYNAMIC_EXEMPT: dict[str, str] = {
    # Modules whose dynamic imports (only those) are left out of the graph, each with why. None today:
    # the benchmark registry (bench/runner.py) sits above its modules, which write through bench/files.py.
}


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every module's dotted name -> (file, is a package `__init__`)."""
    mods: dict[str, tuple[Path, bool]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts.pop()
        mods[".".join(parts)] = (path, is_pkg)
    return mods


def _dynamic_target(call: ast.Call) -> str | None:
    """The module pattern of `importlib.import_module(<literal or f-string>)`, else None."""
    f = call.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    if name != "import_module" or not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "*" for v in arg.values)
    return None


def _resolve(name: str, mods: dict[str, tuple[Path, bool]]) -> list[str]:
    """The package modules a dotted name (or pattern) imports."""
    if "*" in name:
        return [m for m in mods if fnmatch.fnmatchcase(m, name)
                and m.count(".") == name.count(".")]
    return [name] if name in mods else []


def import_graph() -> dict[str, set[str]]:
    """module -> the package modules it imports (anywhere in its body)."""
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, (path, is_pkg) in mods.items():
        here = mod if is_pkg else mod.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                for alias in node.names:
                    # `import a.b.c` binds `a` but runs a, a.b and a.b.c: the deepest is the edge.
                    targets += _resolve(alias.name, mods)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here.split(".")[: len(here.split(".")) - node.level + 1]
                    src = ".".join(base + ([node.module] if node.module else []))
                else:
                    src = node.module or ""
                for alias in node.names:
                    sub = f"{src}.{alias.name}"
                    targets += _resolve(sub, mods) or _resolve(src, mods)
            elif isinstance(node, ast.Call) and mod not in DYNAMIC_EXEMPT:
                pattern = _dynamic_target(node)
                if pattern:
                    targets += _resolve(pattern, mods)
            graph[mod].update(t for t in targets if t != mod and t.startswith(PACKAGE))
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle as a closed path [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_graph_sees_all_kinds_of_import():
    graph = import_graph()
    # a function-local import (cli.main) is an edge
    assert "mcutrain.allocator" in graph["mcutrain.cli"]
    # `from mcutrain import io` names a module, `from mcutrain.cli import print_json` a name in one
    assert {"mcutrain.io", "mcutrain.errors"} <= graph["mcutrain.api.training"]
    assert "mcutrain.cli" in graph["mcutrain.commands.train"]
    # the package's face re-exports the API: an edge to the API's package
    assert "mcutrain.api" in graph["mcutrain"]


def test_find_cycle_reports_a_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_circle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_modules_are_small():
    lines = {m: len(p.read_text().splitlines()) for m, (p, _) in _modules().items()}
    over = {m: n for m, n in lines.items() if n > MAX_LINES and m not in OVER_LIMIT_TODAY}
    assert not over, f"modules over {MAX_LINES} lines: {over}"
    grown = {m: (lines.get(m), n) for m, n in OVER_LIMIT_TODAY.items() if lines.get(m, 0) > n}
    assert not grown, f"allow-listed modules grew (now, then): {grown}"


PRIVATE_CHECKED = ("mcutrain.codegen.", "mcutrain.commands.", "mcutrain.api", "mcutrain.mcu.twin",
                   "mcutrain.methods.factory")
"""Where a `_name` may not be imported from another module: a name used across modules is part of
its module's interface, so it is public (no leading underscore) and its module says so."""


def test_no_private_name_imported_across_modules():
    mods = _modules()
    found = []
    for mod, (path, _) in mods.items():
        if not mod.startswith(PRIVATE_CHECKED):
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
                found += [f"{mod}: from {node.module} import {a.name}" for a in node.names
                          if a.name.startswith("_") and a.name != "__version__"]
    assert not found, "private names imported across modules:\n" + "\n".join(found)


def test_planning_does_not_reach_into_deployment():
    """The planner sizes for boards (`mcutrain.targets`, which imports nothing of the package);
    it never uses `mcu` or `codegen`, the layer above it."""
    graph = import_graph()
    assert graph["mcutrain.targets"] == set()
    upward = {m: sorted(t for t in ts if t.startswith(("mcutrain.mcu", "mcutrain.codegen")))
              for m, ts in graph.items() if m.startswith("mcutrain.plan")}
    assert {m: ts for m, ts in upward.items() if ts} == {}


def test_literal_dynamic_imports_are_read():
    call = ast.parse('importlib.import_module(f"mcutrain.commands._{name}_options")').body[0].value
    assert _dynamic_target(call) == "mcutrain.commands._*_options"
