"""`FqtEmitter`: the names and shared C snippets of one FQT library, the base of every FQT op emitter.

The op emitters (`emit_fqt_ops`, `emit_fqt_float`, `emit_fqt_graph`) and the library's state and
source (`emit_fqt_source`, `emit_fqt`) all name the same things -- arena macros, activation and
error qparams, layer ids -- so that naming lives in one class below all of them.
"""

from __future__ import annotations

from mcutrain.codegen.cformat import unique_idents
from mcutrain.codegen.emit import ExportError
from mcutrain.graph import INPUT, Node
from mcutrain.plan.fqt_ranges import error_range_keys
from mcutrain.plan.schedule import Schedule
from mcutrain.plan.training import TrainingPlan


class FqtEmitter:
    """Names and C snippets of one FQT library (state variables, tensors, parameters)."""

    def __init__(self, method, s: Schedule, plan: TrainingPlan):
        self.m, self.s, self.plan = method, s, plan
        self.g = method.graph
        self.ids = unique_idents([INPUT] + [n.name for n in self.g.nodes])
        self.tids = unique_idents(sorted(plan.offsets))
        self.trained = [n.name for n in self.g.parametric() if n.name in method.trainable]
        self.err_key = error_range_keys(self.g, method.needs)
        self.seed_pass = False
        self.u8 = method.prec.acts == "u8"      # uint8 weights and activations: uint8 and mixed
        self.partial = list(s.decisions.partial_layers)   # the schedule's decision, not re-derived
        self.kept_only = self.partial if s.batch == 1 else []
        """Layers whose backward runs the kept structures only (mt_fqt_keep.h); with a batch the dense
        kernels run on the masked errors (the samples keep different structures)."""
        self.q = "u8" if self.u8 else "s8"

    def err_qp(self, node: str, scale: str, zp: str) -> list[str]:
        """Declarations of `scale` (and for uint8 `zp`) of the error EMA of `node`'s output."""
        r = self.err(node)
        if not self.u8:
            return [f"const float {scale} = mt_fqt_err_scale(&{r});"]
        return [f"float {scale};", f"int32_t {zp};", f"mt_fqt_qparams_u8({r}.lo, {r}.hi, &{scale}, &{zp});"]

    def sample_mask(self, lid: str) -> str:
        """C name of the update mask one sample's top-k writes: the layer's own (batch 1), or a
        per-sample one OR-ed into it (a batch updates the union of its samples' structures)."""
        return f"{lid}_upd" if self.s.batch == 1 else f"{lid}_smp"

    # -- names
    def t(self, name: str) -> str:
        if name not in self.plan.offsets:
            raise ExportError(f"tensor '{name}' has no arena offset")
        return f"A_{self.tids[name]}"

    def lid(self, layer: str) -> str:
        return self.ids[layer]

    def act(self, tensor: str) -> str:
        """C name prefix of the activation qparams owning `tensor`."""
        return f"act_{self.ids[self.m.owner[tensor]]}"

    def err(self, node: str) -> str:
        return f"err_{self.ids[self.err_key[node]]}"

    @staticmethod
    def node_of(tensor: str) -> str:
        return tensor.split(":", 1)[1] if ":" in tensor else tensor

    def dims(self, shape: tuple[int, ...]) -> str:
        shape = tuple(shape)
        d = (1,) * (3 - len(shape)) + shape
        return f"{{1, {d[0]}, {d[1]}, {d[2]}}}"

    def conv_head(self, n: Node) -> list[str]:
        a = n.attrs
        (sh, sw), (pt, _, pl, _) = a["stride"], a["padding"]
        x, y = self.act(n.inputs[0]), self.act(n.name)
        return [f"mt_conv_params p = {{{x}_zp, {y}_zp, {sh}, {sw}, {pt}, {pl}, {a['groups']}, -128, 127}};",
                f"static const mt_dims in_d = {self.dims(self.g.shape(n.inputs[0]))};",
                f"static const mt_dims f_d = {{{', '.join(map(str, n.params['weight'].shape))}}};",
                f"static const mt_dims out_d = {self.dims(self.g.shape(n.name))};"]
