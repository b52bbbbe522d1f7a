"""The operators of a .tflite import that move or reduce activations without weights.

Split from `tflite_import` (which holds the walk, the edges and the weighted operators) to
keep each module small; `ShapeOps` is a mixin of `tflite_import._Importer` and uses its
helpers (`value`, `const`, `emit`, `same_qparams`, `shape_of`, `unique`, `act`).
Pools, MEAN, RESHAPE, PAD and a standalone RELU/RELU6 keep their input's quantization in
mcutrain's int8 format, so each checks that the file's output qparams equal the input's.
"""

from __future__ import annotations

import numpy as np

from mcutrain import graph as G
from mcutrain.graph import Op
from mcutrain.interop import tflite_read as R
from mcutrain.interop.builder import InteropError, same_padding


class ShapeOps:
    """MAX_POOL_2D, AVERAGE_POOL_2D, MEAN, ADD, RESHAPE, PAD (pending until its conv), RELU, RELU6."""

    def _pool(self, op: R.Operator, kind: Op) -> None:
        x = self.value(op, 0)
        if self.act(op) != "none":
            raise InteropError(f"{op.where}: a fused activation on a pool is not supported")
        h, w, _ = self.shape_of(x)
        kh, kw = op.options["filter"]
        sh, sw = op.options["stride"]
        if min(kh, kw, sh, sw) < 1 or kh > h or kw > w:
            raise InteropError(f"{op.where}: filter {kh}x{kw} / stride {sh}x{sw} invalid for input {h}x{w}")
        if op.options["padding"] == "SAME" and (same_padding(h, kh, sh) != (0, 0)
                                                or same_padding(w, kw, sw) != (0, 0)):
            raise InteropError(f"{op.where}: SAME padding that pads is not supported for pools (mcutrain's "
                               "pools have no padding); use VALID")
        out = self.t(op.outputs[0])
        qp = self.same_qparams(op, x, out)
        make = G.maxpool if kind == Op.MAXPOOL else G.avgpool
        self.emit(make(self.unique(out.name), x, (kh, kw), (sh, sw)), out, qp)

    def op_max_pool_2d(self, op: R.Operator) -> None:
        self._pool(op, Op.MAXPOOL)

    def op_average_pool_2d(self, op: R.Operator) -> None:
        self._pool(op, Op.AVGPOOL)

    def op_mean(self, op: R.Operator) -> None:
        x = self.value(op, 0)
        axis = self.const(op, 1, "int32", "axis")
        shape = self.shape_of(x)
        if len(shape) != 3 or sorted(int(a) % 4 for a in axis.data.reshape(-1)) != [1, 2]:
            raise InteropError(f"{op.where}: MEAN is supported over H and W (axes 1, 2) of an (1, H, W, C) "
                               f"map, got axes {axis.data.reshape(-1).tolist()}")
        out = self.t(op.outputs[0])
        qp = self.same_qparams(op, x, out)
        name = self.unique(out.name)
        keep = op.options["keep_dims"]
        self.nodes.append(G.global_avgpool(name, x))
        self.acts[name] = qp
        self.meta["mean"][name] = {"keep_dims": keep, "axis_name": axis.name,
                                   "axis": [int(a) for a in axis.data.reshape(-1)]}
        if not keep:
            flat = self.unique(out.name + ".flat")
            self.nodes.append(G.flatten(flat, name))
            self.acts[flat] = qp
            self.meta["implicit_flatten"].append(flat)
            name = flat
        self.ir[out.index] = name

    def op_add(self, op: R.Operator) -> None:
        a, b = self.value(op, 0), self.value(op, 1)
        if self.shape_of(a) != self.shape_of(b):
            raise InteropError(f"{op.where}: broadcasting ADD ({self.shape_of(a)} + {self.shape_of(b)}) is "
                               "not supported; both inputs must have the same shape")
        out = self.t(op.outputs[0])
        self.emit(G.add(self.unique(out.name), a, b, self.act(op)), out, self.act_qp(op.where, out))

    def op_reshape(self, op: R.Operator) -> None:
        x = self.value(op, 0)
        out = self.t(op.outputs[0])
        qp = self.same_qparams(op, x, out)
        shape = self.shape_of(x)
        n = int(np.prod(shape))
        if out.shape not in ((1, n), (n,)):
            raise InteropError(f"{op.where}: only a reshape to (1, {n}) (a flatten) is supported, got "
                               f"{out.shape}")
        if len(shape) == 1:            # flat to flat: nothing to do
            self.ir[out.index] = x
            return
        name = self.unique(out.name)
        self.emit(G.flatten(name, x), out, qp)
        if len(op.inputs) > 1 and op.inputs[1] >= 0:
            self.meta.setdefault("shape_names", {})[name] = self.t(op.inputs[1]).name

    def op_pad(self, op: R.Operator) -> None:
        x = self.value(op, 0)
        p = self.const(op, 1, "int32", "paddings")
        out = self.t(op.outputs[0])
        self.same_qparams(op, x, out)
        if p.data.shape != (4, 2) or np.any(p.data < 0) or np.any(p.data[[0, 3]] != 0) \
                or np.any(p.data > R.MAX_DIM):
            raise InteropError(f"{op.where}: only non-negative padding of H and W of an (1, H, W, C) map "
                               f"is supported, got {p.data.tolist()}")
        users = self.consumers.get(out.index, [])
        if len(users) != 1 or self.m.operators[users[0]].name not in ("CONV_2D", "DEPTHWISE_CONV_2D") \
                or self.m.operators[users[0]].inputs[0] != out.index:
            raise InteropError(f"{op.where}: a PAD is supported only right before one CONV_2D or "
                               "DEPTHWISE_CONV_2D (folded into its padding)")
        (t, b), (lft, r) = p.data[1], p.data[2]
        self.pads[out.index] = (op, x, (int(t), int(b), int(lft), int(r)))

    def _relu(self, op: R.Operator, kind: str) -> None:
        x = self.value(op, 0)
        out = self.t(op.outputs[0])
        qp = self.same_qparams(op, x, out)
        make = G.relu if kind == "relu" else G.relu6
        self.emit(make(self.unique(out.name), x), out, qp)

    def op_relu(self, op: R.Operator) -> None:
        self._relu(op, "relu")

    def op_relu6(self, op: R.Operator) -> None:
        self._relu(op, "relu6")
