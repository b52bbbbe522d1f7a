"""What each method accepts from a saved state: expected arrays from the live method, value ranges.

Shapes and dtypes come from the method as built for this model and
configuration (its own `state()`); arrays that only appear after the first
step (gradient statistics, momentum buffers, Adam moments) are described
beside them with the shape of the parameter they belong to. Value rules are
those the methods rely on: symmetric int8 weights in [-127, 127], scales
finite and > 0, EMA ranges finite with lo <= hi, the xorshift32 state in
[1, 2^32 - 1], step counters in [0, the run's total], FQT's loss maximum > 0
once a step ran. Each function returns a list of problems (empty: usable).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mcutrain.methods.state_schema import ArraySpec, check_arrays, conform, ema_range, int_in, qparams_entry

RNG_MAX = 2**32 - 1
LOSS_MAX_LIMIT = 2**31 - 1
"""FQT's loss maximum is an int32 Q16 loss in the C runtime."""


def _specs(live: dict[str, np.ndarray], rules: dict[str, dict[str, Any]]) -> dict[str, ArraySpec]:
    """Specs like the live arrays, with per-family rules keyed by the key's first component."""
    return {k: ArraySpec.like(a, **rules.get(k.split("/", 1)[0], {})) for k, a in live.items()}


def _specs_int8(live: dict[str, np.ndarray], lo: int = -127, hi: int = 127) -> dict[str, ArraySpec]:
    """Int8-graph methods: weights in [lo, hi], widened to what the model itself holds.

    Models quantized here are symmetric (-127..127) and updates clip to that
    range; an imported model may hold -128, which then stays acceptable.
    """
    specs = _specs(live, {})
    for k, a in live.items():
        if k.startswith("w/") and a.dtype == np.int8 and a.size:
            specs[k] = ArraySpec.like(a, lo=min(lo, int(a.min())), hi=max(hi, int(a.max())))
    return specs


def fqt(m: Any, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
    """FQT: weights, biases, scales and gradient statistics; counters, RNG, EMA ranges, qparams."""
    live_meta, live = m.state()
    wrule = {"lo": -127, "hi": 127} if m.prec.weights == "s8" else {}
    specs = _specs(live, {"w": wrule, "bscale": {"positive": True}, "stepscale": {"positive": True}})
    for name, w in m.w.items():
        o = w.shape[0]
        for stat, dtype, lo in (("mu", np.float32, None), ("sd", np.float32, 0.0), ("init", np.bool_, None)):
            specs[f"norm/{name}/{stat}"] = ArraySpec(np.dtype(dtype), (o,), lo=lo, required=False,
                                                     group=f"norm/{name}")
    problems = check_arrays(arrays, specs)
    if not isinstance(meta, dict):
        return [*problems, "state is not an object"]
    fixed = {k: v for k, v in live_meta.items() if k not in ("err", "grad")}
    got = {k: v for k, v in meta.items() if k not in ("err", "grad")}
    problems += conform(got, fixed, "state")
    for table in ("err", "grad"):
        entries = meta.get(table)
        if not isinstance(entries, dict):
            problems.append(f"state.{table} is not an object")
            continue
        unknown = sorted(set(entries) - set(m.n_consumers))
        if unknown:
            problems.append(f"state.{table} names tensors this model lacks: {unknown[:5]}")
        for t, e in entries.items():
            problems += ema_range(e, f"state.{table}.{t}")
    if problems:
        return problems
    problems += int_in(meta["steps"], 0, max_steps, "state.steps")
    problems += int_in(meta["loss_max"], 1 if meta["steps"] > 0 else 0, LOSS_MAX_LIMIT, "state.loss_max")
    problems += int_in(meta["rng"], 1, RNG_MAX, "state.rng")
    for table in ("act", "wrange"):
        for t, e in meta[table].items():
            problems += ema_range(e, f"state.{table}.{t}")
    for name, qp in meta["wqp"].items():
        problems += qparams_entry(qp, f"state.wqp.{name}")
    return problems


def zo(m: Any, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
    """ZO: int8 weights and int32 biases of the trained layers; the RNG and the step counter."""
    live_meta, live = m.state()
    problems = check_arrays(arrays, _specs_int8(live)) + conform(meta, live_meta, "state")
    if problems:
        return problems
    return int_in(meta["rng"], 1, RNG_MAX, "state.rng") + int_in(meta["steps"], 0, max_steps, "state.steps")


def bp_qas(m: Any, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
    """BP-QAS: int8 weights in the QAS range, int32 biases; momentum buffers after the first step;
    with stochastic update rounding, the RNG."""
    from mcutrain.methods import qas
    live_meta, live = m.state()
    specs = _specs_int8(live, qas.W_MIN, qas.W_MAX)
    if m.cfg.momentum:
        params = {f"{n}.weight": m.qm.weights[n] for n in m.weight_layers}
        params |= {f"{n}.bias": m.qm.biases[n] for n in m.bias_layers}
        for key, p in params.items():
            specs.setdefault(f"v/{key}", ArraySpec(np.dtype(np.float32), p.shape, required=False,
                                                   group="velocity"))
    problems = check_arrays(arrays, specs) + conform(meta, live_meta, "state")
    if problems or "rng" not in live_meta:
        return problems
    return int_in(meta["rng"], 1, RNG_MAX, "state.rng")


def float_method(m: Any, meta: Any, arrays: dict[str, np.ndarray], max_steps: int) -> list[str]:
    """Float: the trained parameters; the optimizer's buffers, with the parameters' shapes."""
    _live_meta, live = m.state()
    specs = _specs(live, {})
    for key, spec in m.optimizer.state_specs(m.params).items():
        specs.setdefault(f"opt/{key}", spec)
    problems = check_arrays(arrays, specs)
    if not isinstance(meta, dict) or set(meta) != {"optimizer"}:
        return [*problems, "state is not {optimizer: ...}"]
    opt_arrays = {k[4:]: v for k, v in arrays.items() if k.startswith("opt/")}
    return problems + m.optimizer.check_state(meta["optimizer"], opt_arrays, max_steps)
