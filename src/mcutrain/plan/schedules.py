"""Schedule builders: one training step of each method as ordered kernels over declared tensors.

`build_schedule(graph, method, ...)` dispatches to:

- `none`: the int8 inference pass (what `plan_inference_arena` plans, so both agree);
- `fqt` (`uint8`, `mixed`, `float32`, `int8`): one sample at a time (FQT accumulates
  per-sample gradients), forward keeping what the backward reads (the input of each trainable
  layer, activated outputs for their masks, max-pool argmax), loss, error propagation, weight
  gradient into a gradient buffer, update in place. With `batch` 1 each layer is updated right
  after its backward (its weights are not read again in the step, so the result is the
  simulator's); with `batch` > 1 the per-sample part is a loop and the gradient buffers live
  across it, updated after the last sample. Partial updates are planned at their worst case
  (every structure kept), plus the ranking scratch;
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
from mcutrain.plan.schedule import Schedule
from mcutrain.plan.schedule_builder import inference_schedule, prepare
from mcutrain.plan.schedules_backprop import bp_qas_schedule, float_schedule, fqt_schedule
from mcutrain.plan.schedules_zo import zo_schedule

__all__ = ["METHODS", "build_schedule", "prepare", "schedule_for"]

METHODS = ("none", "fqt", "zo", "bp-qas", "float")


# ---------------------------------------------------------------- dispatch


def build_schedule(graph: Graph, method: str, trainable: str = "all", batch: int = 1,
                   precision: str = "uint8", perturb: str = "mix", queries: int = 50, mask: str = "none",
                   partial: bool = False, bias_last: int = 0, momentum: float = 0.0,
                   kernels: str = "dsp", zo_base: str = "auto") -> Schedule:
    """The schedule of one training step of `method` on `graph` (see the module docstring).

    >>> from mcutrain import zoo
    >>> s = build_schedule(zoo.build("digits-cnn"), "fqt", trainable="last:1")
    >>> [k.name for k in s.kernels if k.phase != "forward"]
    ['loss', 'fc.bwd_w', 'fc.update', 'ema_update']
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    if method == "none":
        return inference_schedule(prepare(graph), batch, kernels)
    if method == "fqt":
        return fqt_schedule(graph, precision, trainable, batch, partial, kernels)
    if method == "zo":
        return zo_schedule(graph, trainable, batch, perturb, queries, mask, kernels, zo_base)
    if method == "bp-qas":
        return bp_qas_schedule(graph, trainable, batch, bias_last, momentum, kernels)
    if method == "float":
        return float_schedule(graph, trainable, batch, kernels)
    raise ValueError(f"unknown method {method!r}; use one of {', '.join(METHODS)}")


def schedule_for(method, batch: int = 1, kernels: str = "dsp") -> Schedule:
    """The schedule of a built training method (`FQT`, `ZOMethod`, `BPQASMethod`, `FloatMethod`).

    What the code generator calls with the method a user trained: the step is derived from the
    method's own configuration and graph, so it cannot drift from what the simulator ran.
    """
    name = getattr(method, "name", "")
    if name == "fqt":
        c = method.cfg
        return fqt_schedule(method.graph, c.precision, c.trainable, batch, c.lambda_min < 1.0, kernels)
    if name == "zo":
        c = method.cfg
        return zo_schedule(method.qm.graph, "layers:" + ",".join(method.layers), batch, c.perturb, c.queries,
                           c.mask, kernels)
    if name == "bp-qas":
        c = method.cfg
        return bp_qas_schedule(method.qm.graph, c.trainable, batch, c.bias_last, c.momentum, kernels)
    if name == "float":
        return float_schedule(method.graph, "layers:" + ",".join(method.trainable), batch, kernels)
    raise ValueError(f"no schedule for method {name!r}; known: fqt, zo, bp-qas, float")
