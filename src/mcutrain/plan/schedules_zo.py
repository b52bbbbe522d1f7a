"""Schedules of zeroth-order training: base pass, per-unit queries over cached tails, updates."""

from __future__ import annotations

from types import SimpleNamespace

from mcutrain.graph import INPUT, Graph
from mcutrain.methods import zo_forward as zf
from mcutrain.methods.decisions import INT8, zo_decisions
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.methods.zo import plan_units
from mcutrain.plan import plan_inference_arena
from mcutrain.plan.schedule import Role, Schedule
from mcutrain.plan.schedule_builder import StepBuilder, prepare
from mcutrain.plan.training import plan_training


def zo_units(g: Graph, layers: list[str], perturb: str):
    """The method's own perturbation units (`zo.plan_units`) from shapes alone."""
    shapes = SimpleNamespace(graph=g, weights={n.name: n.params["weight"] for n in g.parametric()},
                             biases={n.name: n.params["bias"] for n in g.parametric()})
    return plan_units(shapes, layers, perturb)   # type: ignore[arg-type]


def zo_schedule(g: Graph, trainable: str = "all", batch: int = 1, perturb: str = "mix", queries: int = 50,
                mask: str = "none", kernels: str = "dsp", base: str = "auto") -> Schedule:
    """ZO (seed B): `base` 'cache' keeps every unit's base tensors from one base pass (the
    simulator's order); 'recompute' runs a second base pass that stops at each unit (module
    docstring); 'auto' plans both and keeps the one with the smaller arena.
    """
    if base == "auto":
        a = zo_schedule(g, trainable, batch, perturb, queries, mask, kernels, "cache")
        b = zo_schedule(g, trainable, batch, perturb, queries, mask, kernels, "recompute")
        return a if plan_training(a).arena_bytes <= plan_training(b).arena_bytes else b
    if base not in ("cache", "recompute"):
        raise ValueError(f"ZO base pass {base!r}: use auto, cache or recompute")
    if queries < 1:
        raise ValueError(f"queries must be at least 1, got {queries}")
    g = prepare(g)
    layers = resolve_trainable(g, trainable)
    units = zo_units(g, layers, perturb)
    b = StepBuilder(g, "zo", batch, INT8, set(layers), set(), kernels)
    s = b.s
    s.trainable = list(layers)
    s.decisions = zo_decisions(g, layers, perturb, queries, mask)
    s.predict_arena_bytes = plan_inference_arena(g, kernels=kernels).arena_bytes
    s.options.update({"perturb": perturb, "queries": queries, "mask": mask, "samples_per_pass": batch,
                      "base": base, "units": [f"{u.kind}:{','.join(u.layers)}" for u in units]})
    s.tensor("state:counters", (2,), "s32", Role.STATE, "RNG state, step")
    s.tensor(INPUT, (batch, *g.input_shape), "s8", Role.INPUT)
    order = {n.name: i for i, n in enumerate(g.nodes)}
    order[INPUT] = -1

    # what each unit reads from the base pass
    plans = []
    for u in units:
        shim = SimpleNamespace(graph=g)
        affected = zf.affected_nodes(shim, set(u.layers))   # type: ignore[arg-type]
        names = {n.name for n in affected}
        rerun = [n for n in affected if not (u.kind == "np" and n.name == u.layers[0])]
        cached = {x for n in rerun for x in n.inputs if x not in names}
        if u.kind == "np":
            cached |= {u.layers[0], g.node(u.layers[0]).inputs[0]}
        plans.append((u, rerun, cached))
    all_cached = {t for _, _, c in plans for t in c}

    # pass A: losses of the unperturbed model (cache: it also keeps the units' base tensors)
    name_a = {INPUT: INPUT}
    keep = all_cached if base == "cache" else set()
    b.forward(g.nodes, name_a, batch, "a:", lambda t: Role.KEPT if t in keep else Role.ACTIVATION)
    l0 = s.tensor("l0", (batch,), "s32", Role.LOGITS)
    s.kernel("a:loss", "softmax_ce", "loss", g.output, [name_a[g.output]], [l0], batch * g.num_classes)
    if base == "cache":
        for p in plans:
            _zo_unit(b, p, name_a, batch, queries, mask)
            _zo_update(b, p, name_a)
        s.validate()
        return s

    # pass B with the units' queries; a unit runs once its cached tensors exist
    last_needed = max((order[t] for t in all_cached), default=-1)
    name_b = {INPUT: INPUT}
    waiting: list = []
    for p in plans:
        if max(order[t] for t in p[2]) == -1:
            _zo_unit(b, p, name_b, batch, queries, mask)
            waiting.append(p)
    waiting = _zo_flush_updates(b, waiting, name_b, order, -1, last_needed)
    for n in g.nodes[: last_needed + 1]:
        b.forward([n], name_b, batch, "b:", lambda t: Role.KEPT if t in all_cached else Role.ACTIVATION)
        for p in plans:
            if max(order[t] for t in p[2]) == order[n.name]:
                _zo_unit(b, p, name_b, batch, queries, mask)
                waiting.append(p)
        waiting = _zo_flush_updates(b, waiting, name_b, order, order[n.name], last_needed)
    _zo_flush_updates(b, waiting, name_b, order, len(g.nodes), last_needed)
    s.validate()
    return s


def _zo_flush_updates(b: StepBuilder, waiting: list, name_b: dict[str, str], order: dict[str, int], done: int,
                      last_needed: int) -> list:
    """Update each waiting unit whose layers pass B has computed (or will never compute)."""
    keep = []
    for p in waiting:
        u = p[0]
        if all(order[m] <= done or order[m] > last_needed for m in u.layers) or done >= len(order) - 1:
            _zo_update(b, p, name_b)
        else:
            keep.append(p)
    return keep


def _zo_unit(b: StepBuilder, plan, name_b: dict[str, str], batch: int, queries: int, mask: str) -> None:
    u, rerun, _ = plan
    s, g = b.s, b.g
    tag = f"{u.kind}:{u.layers[0]}"
    loop = f"queries:{tag}"
    big = "s64" if u.kind == "wp" or queries > 127 else "s32"
    if u.kind == "wp":
        acc = s.tensor(f"S:{tag}", (u.dim,), big, Role.GRADIENT, "sum over queries of dL * u, per parameter")
    else:
        acc = s.tensor(f"gy:{tag}", (batch, u.dim), big, Role.GRADIENT, "node gradient sums")
    s.kernel(f"{tag}.zero", "zero", "query", u.layers[0], [], [acc])
    msk: list[str] = []
    if mask != "none":
        n_mask = u.dim if u.kind == "wp" else g.shape(u.layers[0])[-1]
        msk = [s.tensor(f"mask:{tag}", (n_mask,), "u8", Role.GRADIENT)]
        reads = [name_b[u.layers[0]]] if u.kind == "np" else []
        s.kernel(f"{tag}.mask", "zo_mask", "query", u.layers[0], [*reads, "state:counters"], msk)
    kw = {"loop": loop, "repeat": queries}
    names = dict(name_b)
    extra: dict[str, list[str]] = {}
    if u.kind == "wp":
        for m in u.layers:
            node = g.node(m)
            pw = s.tensor(f"pw:{m}.weight", node.params["weight"].shape, "s8", Role.PERTURBED)
            pb = s.tensor(f"pw:{m}.bias", node.params["bias"].shape, "s32", Role.PERTURBED)
            s.kernel(f"{tag}.perturb.{m}", "zo_perturb_wp", "query", m,
                     [*b.params(node), "state:counters", *msk], [pw, pb, "state:counters"], **kw)
            extra[m] = [pw, pb]
    else:
        y = u.layers[0]
        py = s.tensor(f"py:{y}", (batch, *g.shape(y)), "s8", Role.PERTURBED)
        s.kernel(f"{tag}.perturb", "zo_perturb_np", "query", y, [name_b[y], "state:counters", *msk],
                 [py, "state:counters"], **kw)
        names[y] = py
    b.forward(rerun, names, batch, f"q:{tag}:", lambda t: Role.QUERY, phase="query", loop=loop,
              repeat=queries, extra_reads=extra or None, op_suffix="query")
    lq = s.tensor(f"lq:{tag}", (batch,), "s32", Role.QUERY)
    s.kernel(f"{tag}.loss", "softmax_ce", "query", g.output, [names[g.output]], [lq],
             batch * g.num_classes, **kw)
    s.kernel(f"{tag}.accumulate", f"zo_accumulate_{u.kind}", "query", u.layers[0],
             [lq, "l0", acc, "state:counters", *msk], [acc, "state:counters"],
             s.tensors[acc].elements, **kw)


def _zo_update(b: StepBuilder, plan, name_b: dict[str, str]) -> None:
    u, _, _ = plan
    s, g = b.s, b.g
    tag = f"{u.kind}:{u.layers[0]}"
    acc = f"S:{tag}" if u.kind == "wp" else f"gy:{tag}"
    msk = [f"mask:{tag}"] if f"mask:{tag}" in s.tensors else []
    for m in u.layers:
        node = g.node(m)
        params = b.params(node)
        if u.kind == "wp":
            s.kernel(f"{m}.update", "qas_update", "update", m, [acc, *msk, *params], params,
                     node.params["weight"].size + node.params["bias"].size)
        else:
            # local weight gradient from the cached input, fused into the QAS update per output channel
            x = name_b[node.inputs[0]]
            s.kernel(f"{m}.bwd_w_update", f"{node.op.value}_bwd_w_qas_update", "weight_grad", m,
                     [acc, x, name_b[m], *msk, *params], params, s.batch * g.macs(node))


