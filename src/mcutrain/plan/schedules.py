"""Schedule builders: one training step of each method as ordered kernels over declared tensors.

`build_schedule(graph, method, ...)` dispatches to:

- `none`: the int8 inference pass (what `plan_inference_arena` plans, so both agree);
- `fqt` (`uint8`, `mixed`, `float32`, `int8`): one sample at a time (FQT accumulates
  per-sample gradients), forward keeping what the backward reads (the input of each trainable
  layer, activated outputs for their masks, max-pool argmax), loss, error propagation, weight
  gradient into a gradient buffer, update in place. With `batch` 1 each layer is updated right
  after its backward (its weights are not read again in the step, so the result is the
  simulator's); with `batch` > 1 the per-sample part is a loop and the gradient buffers live
  across it, updated after the last sample. Partial updates are planned for the layers the
  method's decisions name (`methods.decisions.fqt_partial_layers`), at their worst case (every
  structure kept), plus the ranking scratch and the C library's kept lists as method state;
- `bp-qas` and `float`: the whole batch in one pass, as the simulators do; errors float32
  (the STE kernels). Their update is elementwise (QAS-scaled or plain SGD), so each output
  channel's weight gradient is applied as soon as it is complete: one row of gradient at a
  time instead of a layer-sized buffer (Lin et al., NeurIPS 2022, likewise apply updates
  during the backward pass to free gradient memory);
- `zo`: the batch in one pass, as the simulator does. A base pass gives the losses; each
  perturbation unit then runs its queries one at a time (the simulator stacks them; the
  numbers are the same), each re-running only the tail of the network from the unit's cached
  base tensors, and updates its layers right after its last query (a unit's tail never
  contains an earlier unit's layer, so this equals the simulator's update at the end). Two
  ways to have the cached tensors: `cache` keeps them from the base pass (the simulator's way;
  small when few layers train), `recompute` runs a second base pass that stops at each unit
  and frees what no later unit needs (one extra forward pass of MACs; small when every layer
  trains). `auto` plans both and keeps the smaller arena.
"""

from __future__ import annotations

from mcutrain.graph import Graph
from mcutrain.methods.decisions import bp_qas_decisions, float_decisions, fqt_decisions
from mcutrain.methods.fqt_state import PRECISIONS, FQTConfig
from mcutrain.methods.trainable import resolve_trainable
from mcutrain.plan.schedule import Schedule
from mcutrain.plan.schedule_builder import inference_schedule, prepare
from mcutrain.plan.schedules_backprop import bp_qas_schedule, float_schedule, fqt_schedule
from mcutrain.plan.schedules_zo import zo_schedule
from mcutrain.targets import Target

__all__ = ["METHODS", "build_schedule", "prepare", "schedule_for"]

METHODS = ("none", "fqt", "zo", "bp-qas", "float")


# ---------------------------------------------------------------- dispatch


def build_schedule(graph: Graph, method: str, trainable: str = "all", batch: int = 1,
                   precision: str = "uint8", perturb: str = "mix", queries: int = 50, mask: str = "none",
                   lambda_min: float = 1.0, lambda_max: float = 1.0, partial_output: bool = False,
                   bias_last: int = 0, momentum: float = 0.0, kernels: str = "dsp",
                   zo_base: str = "auto", target: str | Target | None = None) -> Schedule:
    """The schedule of one training step of `method` on `graph` (see the module docstring).

    The method's decisions are made by the function the method itself uses (`methods.decisions`),
    so a plan request and a built method with the same settings give the same step.

    >>> from mcutrain import zoo
    >>> s = build_schedule(zoo.build("digits-cnn"), "fqt", trainable="last:1")
    >>> [k.name for k in s.kernels if k.phase != "forward"]
    ['loss', 'fc.bwd_w', 'fc.update', 'ema_update']
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if method == "none":
        return inference_schedule(prepare(graph), batch, kernels, target)
    g = prepare(graph)
    if method == "fqt":
        if precision not in PRECISIONS:
            raise ValueError(f"unknown FQT precision {precision!r}; use one of {', '.join(PRECISIONS)}")
        cfg = FQTConfig(precision=precision, trainable=trainable, lambda_min=lambda_min,
                        lambda_max=lambda_max, partial_output=partial_output)
        return fqt_schedule(g, fqt_decisions(g, cfg), batch, kernels)
    if method == "zo":
        return zo_schedule(g, trainable, batch, perturb, queries, mask, kernels, zo_base)
    if method == "bp-qas":
        return bp_qas_schedule(g, bp_qas_decisions(g, trainable, bias_last, momentum), batch, kernels)
    if method == "float":
        return float_schedule(g, float_decisions(g, resolve_trainable(g, trainable)), batch, kernels)
    raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def schedule_for(method, batch: int = 1, kernels: str = "dsp") -> Schedule:
    """The schedule of a built training method (`FQT`, `ZOMethod`, `BPQASMethod`, `FloatMethod`).

    What the code generator calls with the method a user trained: the step is built from the
    method's own decisions (`method.decisions`), so it cannot drift from what the simulator ran.
    """
    name = getattr(method, "name", "")
    if name == "fqt":
        return fqt_schedule(method.graph, method.decisions, batch, kernels)
    if name == "zo":
        c = method.cfg
        s = zo_schedule(method.qm.graph, "layers:" + ",".join(method.layers), batch, c.perturb, c.queries,
                        c.mask, kernels)
        s.decisions = method.decisions
        return s
    if name == "bp-qas":
        return bp_qas_schedule(method.qm.graph, method.decisions, batch, kernels)
    if name == "float":
        return float_schedule(method.graph, method.decisions, batch, kernels)
    raise ValueError(f"no schedule for method {name!r}; known: fqt, zo, bp-qas, float")
