"""When a step does not fit: what would. Also `--trainable auto` (the most layers that fit).

The planner tries, in this order, and keeps every candidate that fits:
1. the same method with fewer trainable layers (`last:N`, N from the current count down);
2. the same method with a smaller batch (halving; only methods whose arena grows with it);
3. sparse ZO (`zo`, `mix` perturbation) on the same trainable layers, then on fewer.
The best is the fitting candidate that trains the most parameters, preferring the same method
(ties: the smaller RAM). Each is named as the options of `mcutrain plan` that give it.

Example:
    >>> from mcutrain import zoo
    >>> g = zoo.build("small-cnn")
    >>> pick_trainable(g, "fqt", "cortex-m0plus", budget=100_000, precision="uint8")
    'last:1'
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from mcutrain.graph import Graph
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.plan.memory import MemoryReport, account
from mcutrain.plan.schedules import build_schedule, prepare
from mcutrain.targets import Target, get_target


@dataclass(frozen=True)
class PlanRequest:
    """Everything `build_schedule` needs besides the graph (what a user asks `plan` for)."""

    method: str
    trainable: str = "all"
    batch: int = 1
    precision: str = "uint8"
    perturb: str = "mix"
    queries: int = 50
    mask: str = "none"
    lambda_min: float = 1.0
    """fqt partial updates: lambda_min and lambda_max (1 = off); the output layer only with partial_output."""
    lambda_max: float = 1.0
    partial_output: bool = False
    bias_last: int = 0

    def build(self, g: Graph, target: str | Target | None = None):
        """The step's schedule; `target` lays out an inference export's Flash weights."""
        return build_schedule(g, self.method, trainable=self.trainable, batch=self.batch,
                              precision=self.precision, perturb=self.perturb, queries=self.queries,
                              mask=self.mask, lambda_min=self.lambda_min, lambda_max=self.lambda_max,
                              partial_output=self.partial_output, bias_last=self.bias_last, target=target)

    def options(self) -> str:
        """The `mcutrain plan` options naming this request."""
        parts = [f"--method {self.method}"]
        if self.method == "fqt":
            parts.append(f"--precision {self.precision}")
            if self.lambda_min < 1.0:
                parts.append(f"--partial {self.lambda_min} --partial-max {self.lambda_max}"
                             + (" --partial-output" if self.partial_output else ""))
        if self.method == "zo":
            parts.append(f"--perturb {self.perturb} --queries {self.queries}")
        parts += [f"--trainable {self.trainable}", f"--batch {self.batch}"]
        return " ".join(parts)


def plan(g: Graph, req: PlanRequest, target: str | Target) -> MemoryReport:
    return account(req.build(g, target), target)


def _trained_params(g: Graph, layers: list[str]) -> int:
    return sum(g.num_params(g.node(n)) for n in layers)


def _largest_last(g: Graph, req: PlanRequest, target: Target, limit: int, n_max: int
                  ) -> tuple[PlanRequest, MemoryReport] | None:
    """The largest `last:N` (N <= n_max) whose RAM is at most `limit`, by bisection.

    NOTE: bisection assumes RAM grows with N (more layers keep more for the backward and move
    more weights to RAM); the answer is always re-checked, so a non-monotone case can only make
    the search settle on a smaller N that does fit, never on one that does not.
    """
    cache: dict[int, MemoryReport] = {}

    def ok(n: int) -> bool:
        if n not in cache:
            cache[n] = plan(g, replace(req, trainable=f"last:{n}"), target)
        r = cache[n]
        return r.ram_bytes <= limit and r.flash_bytes <= target.flash_bytes

    if n_max < 1 or not ok(1):
        return None
    lo, hi = 1, n_max            # ok(lo) holds
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return replace(req, trainable=f"last:{lo}"), cache[lo]


def pick_trainable(g: Graph, method: str, target: str | Target, budget: int | None = None,
                   **kw: Any) -> str:
    """`--trainable auto[:BYTES]`: the largest `last:N` whose RAM fits `budget` (default: target RAM)."""
    t = get_target(target)
    limit = t.ram_bytes if budget is None else int(budget)
    g = prepare(g)
    hit = _largest_last(g, PlanRequest(method, **kw), t, limit, len(g.parametric()))
    if hit is None:
        raise ValueError(f"no trainable part of '{g.name}' fits {limit:,} bytes of RAM with method "
                         f"{method}, not even the last layer alone; try method zo or a larger target")
    return hit[0].trainable


def suggest(g: Graph, req: PlanRequest, target: str | Target) -> dict[str, Any]:
    """Candidates that fit (module docstring) and the best of them; `best` is None if nothing fits."""
    t = get_target(target)
    g = prepare(g)
    tried: list[dict[str, Any]] = []

    def record(kind: str, cand: PlanRequest, r: MemoryReport) -> None:
        tried.append({"kind": kind, "options": cand.options(), "ram_bytes": r.ram_bytes,
                      "flash_bytes": r.flash_bytes, "fits": r.fits, "method": cand.method,
                      "trained_params": _trained_params(g, r.schedule.trainable)})

    n_now = len(resolve_trainable(g, req.trainable))
    hit = _largest_last(g, req, t, t.ram_bytes, n_now - 1)
    if hit:
        record("fewer trainable layers", *hit)
    if req.method in ("zo", "bp-qas", "float") and req.batch > 1:
        b = req.batch // 2
        while b >= 1:
            cand = replace(req, batch=b)
            r = plan(g, cand, t)
            if r.fits:
                record("smaller batch", cand, r)
                break
            b //= 2
    if req.method != "zo" or req.perturb != "mix":
        zo = PlanRequest("zo", trainable=req.trainable, batch=1, perturb="mix", queries=req.queries)
        r = plan(g, zo, t)
        if r.fits:
            record("sparse zo", zo, r)
        else:
            hit = _largest_last(g, zo, t, t.ram_bytes, n_now - 1)
            if hit:
                record("sparse zo", *hit)
    fits = [c for c in tried if c["fits"]]
    best = None
    if fits:
        best = max(fits, key=lambda c: (c["method"] == req.method, c["trained_params"], -c["ram_bytes"]))
    return {"best": best, "tried": tried}
