"""PyTorch import: an `nn.Module` traced with torch.fx -> a float IR `Graph` with its weights.

Why torch.fx: it records what `forward` actually does, including functional
calls (`F.relu`, `torch.flatten`, `x + y`) that a walk over `named_modules`
would miss, without running the model. The graph computes what
`module.eval()` computes: BatchNorm uses its running statistics and is folded
into the convolution before it, Dropout is the identity. The module itself is
neither run nor changed.

Layout: conv weights OIHW -> OHWI, activations NCHW -> NHWC, and the first
Linear after a Flatten of a (C, H, W) map gets its input columns permuted from
C, H, W to H, W, C order (see `builder`). A 1-D signal (N, C, L) is the IR's
(1, L, C), the shape of `zoo`'s mnist1d-cnn: Conv1d, MaxPool1d, AvgPool1d and
AdaptiveAvgPool1d(1) become their 2-D ops with a (1, k) window, which is also how
TFLite runs a Keras Conv1D (a CONV_2D over a height-1 map).

torch is imported only when `from_torch` is called, so the core of mcutrain
does not depend on it.

Example:
    >>> import torch.nn as nn
    >>> net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
    ...                     nn.Linear(4 * 8 * 8, 10))
    >>> g = from_torch(net, (8, 8, 1))
    >>> [(n.name, n.op.value, n.act) for n in g.nodes]
    [('0', 'conv2d', 'relu'), ('2', 'flatten', 'none'), ('3', 'linear', 'none')]
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from mcutrain.graph import Graph
from mcutrain.interop.builder import GraphBuilder, InteropError, Value, same_padding

SUPPORTED_MODULES = ("Conv2d (groups, padding int/tuple/'same'/'valid')", "Conv1d (the same, on (1, L, C))",
                     "BatchNorm2d", "BatchNorm1d", "ReLU", "ReLU6", "Hardtanh(0, 6)", "MaxPool2d",
                     "MaxPool1d", "AvgPool2d", "AvgPool1d", "AdaptiveAvgPool2d(1)", "AdaptiveAvgPool1d(1)",
                     "Flatten", "Linear", "Identity", "Dropout")
SUPPORTED_FUNCTIONS = ("F.relu/torch.relu/x.relu()", "F.relu6", "F.hardtanh(x, 0, 6)",
                       "torch.clamp(x, 0, 6)", "torch.flatten(x, 1)/x.flatten(1)",
                       "x.view(x.size(0), -1)/x.reshape(...)", "x + y/torch.add/x.add(y)",
                       "F.max_pool2d", "F.avg_pool2d", "F.adaptive_avg_pool2d(x, 1)", "x.mean((2, 3))")


class _NotTensor:
    """An fx value that is not a tensor (x.size(0), x.shape): fine unless a layer consumes it."""

    def __init__(self, what: str):
        self.what = what


def _torch():
    try:
        import torch
        import torch.fx
    except ImportError:
        raise ImportError("importing a PyTorch model needs torch: pip install torch") from None
    return torch


def _supported() -> str:
    return (f"supported modules: {', '.join(SUPPORTED_MODULES)}; "
            f"supported functions: {', '.join(SUPPORTED_FUNCTIONS)}")


def _input_shape(torch, example) -> tuple[int, ...]:
    """NHWC per-sample shape from a shape tuple (NHWC) or an example batch (NCHW, as torch takes it;
    a 1-D signal batch (N, C, L) is the IR's (1, L, C))."""
    if isinstance(example, (torch.Tensor, np.ndarray)):
        s = tuple(int(d) for d in example.shape)
        if len(s) == 4:
            return s[2], s[3], s[1]
        if len(s) == 3:
            return 1, s[2], s[1]
        if len(s) == 2:
            return (s[1],)
        raise InteropError(f"example input has shape {s}; pass a batch (N, C, H, W), (N, C, L) or (N, F)")
    try:
        s = tuple(int(d) for d in example)
    except TypeError:
        raise InteropError(f"input_shape must be an NHWC shape tuple or an example batch, got "
                           f"{type(example).__name__}") from None
    if len(s) not in (1, 3):
        raise InteropError(f"input_shape {s} must be the per-sample NHWC shape (H, W, C), or (F,)")
    return s


def _arg(node, pos: int, key: str, default: Any = None) -> Any:
    """Argument `pos` / keyword `key` of an fx call (the signatures of torch's functions)."""
    if len(node.args) > pos:
        return node.args[pos]
    return node.kwargs.get(key, default)


def _pair(v) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return int(v[0]), int(v[-1])
    return int(v), int(v)


class _Tracer:
    """Walks an fx graph and feeds the builder; `env` maps fx node names to Values."""

    def __init__(self, torch, gm, builder: GraphBuilder):
        self.torch, self.nn, self.gm, self.b = torch, torch.nn, gm, builder
        self.F = torch.nn.functional
        self.env: dict[str, Any] = {}

    def val(self, arg, where: str) -> Value:
        v = self.env.get(arg.name) if hasattr(arg, "name") and hasattr(arg, "op") else None
        if isinstance(v, Value):
            return v
        what = v.what if isinstance(v, _NotTensor) else repr(arg)
        raise InteropError(f"{where}: its input {what} is not a tensor the converter follows "
                           "(constants and parameters used directly in forward are not supported)")

    # -- modules
    def module(self, target: str, m, x: Value) -> Value:
        nn, b = self.nn, self.b
        where = f"module '{target}' ({type(m).__name__})"
        if isinstance(m, nn.Conv2d):
            return self.conv(target, x, m, where)
        if isinstance(m, nn.Conv1d):
            return self.conv1d(target, x, m, where)
        if isinstance(m, (nn.MaxPool1d, nn.AvgPool1d, nn.AdaptiveAvgPool1d)):
            return self.pool1d(target, x, m, where)
        if isinstance(m, nn.Linear):
            return b.linear(target, x, _np(m.weight), _np(m.bias), where)
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d)):
            if m.running_mean is None or m.running_var is None:
                raise InteropError(f"{where}: has no running statistics (track_running_stats=False); "
                                   "only BatchNorm with running statistics can be folded")
            c = m.num_features
            gamma = _np(m.weight) if m.affine else np.ones(c, np.float32)
            beta = _np(m.bias) if m.affine else np.zeros(c, np.float32)
            return b.batchnorm(target, x, gamma, beta, _np(m.running_mean), _np(m.running_var),
                               float(m.eps), where)
        if isinstance(m, nn.ReLU):
            return b.activation(target, x, "relu")
        if isinstance(m, nn.Hardtanh) and (m.min_val, m.max_val) == (0.0, 6.0):  # ReLU6 included
            return b.activation(target, x, "relu6")
        if isinstance(m, nn.MaxPool2d):
            return self.maxpool(target, x, m.kernel_size, m.stride, m.padding, m.dilation,
                                m.ceil_mode, m.return_indices, where)
        if isinstance(m, nn.AvgPool2d):
            return self.avgpool(target, x, m.kernel_size, m.stride, m.padding, m.ceil_mode,
                                m.divisor_override, where)
        if isinstance(m, nn.AdaptiveAvgPool2d):
            return self.adaptive(target, x, m.output_size, where)
        if isinstance(m, nn.Flatten):
            return self.flatten(target, x, m.start_dim, m.end_dim, where)
        if isinstance(m, (nn.Identity, nn.modules.dropout._DropoutNd)):
            return x
        raise InteropError(f"{where} is not supported; {_supported()}")

    def conv(self, target: str, x: Value, m, where: str) -> Value:
        if tuple(m.dilation) != (1, 1):
            raise InteropError(f"{where}: dilation {tuple(m.dilation)} is not supported (only 1)")
        if m.padding_mode != "zeros":
            raise InteropError(f"{where}: padding_mode '{m.padding_mode}' is not supported (only 'zeros')")
        kh, kw = m.kernel_size
        if m.padding == "valid":
            pad = (0, 0, 0, 0)
        elif m.padding == "same":
            h, w, _ = self.b.shape(x)
            pad = same_padding(h, kh, m.stride[0]) + same_padding(w, kw, m.stride[1])
        else:
            ph, pw = m.padding
            pad = (ph, ph, pw, pw)
        return self.b.conv(target, x, _np(m.weight), _np(m.bias), tuple(m.stride), pad, m.groups, where)

    def signal_length(self, x: Value, where: str) -> int:
        """L of a (1, L, C) signal; a 1-D layer on a 2-D map is refused."""
        shape = self.b.shape(x)
        if len(shape) != 3 or shape[0] != 1:
            raise InteropError(f"{where} reads a 1-D signal (N, C, L), but its input is {shape} (NHWC); "
                               "pass input_shape (1, L, C) or an example batch (N, C, L)")
        return shape[1]

    def conv1d(self, target: str, x: Value, m, where: str) -> Value:
        """Conv1d as the IR's conv2d with a (1, k) kernel over the (1, L, C) signal."""
        length = self.signal_length(x, where)
        if m.dilation != (1,):
            raise InteropError(f"{where}: dilation {m.dilation} is not supported (only 1)")
        if m.padding_mode != "zeros":
            raise InteropError(f"{where}: padding_mode '{m.padding_mode}' is not supported (only 'zeros')")
        (k,), (s,) = m.kernel_size, m.stride
        if m.padding == "valid":
            pad = (0, 0)
        elif m.padding == "same":
            pad = same_padding(length, k, s)
        else:
            pad = (m.padding[0], m.padding[0])
        return self.b.conv(target, x, _np(m.weight)[:, :, None, :], _np(m.bias), (1, s), (0, 0, *pad),
                           m.groups, where)

    def pool1d(self, target: str, x: Value, m, where: str) -> Value:
        """MaxPool1d / AvgPool1d / AdaptiveAvgPool1d as their 2-D ops with a (1, k) window."""
        self.signal_length(x, where)
        nn = self.nn
        if isinstance(m, nn.AdaptiveAvgPool1d):
            out = m.output_size[0] if isinstance(m.output_size, (list, tuple)) else m.output_size
            return self.adaptive(target, x, (1, out), where)
        k = _pair(m.kernel_size)[1]
        s = _pair(m.stride)[1] if m.stride not in (None, (), []) else k
        if isinstance(m, nn.MaxPool1d):
            return self.maxpool(target, x, (1, k), (1, s), m.padding, m.dilation, m.ceil_mode,
                                m.return_indices, where)
        return self.avgpool(target, x, (1, k), (1, s), m.padding, m.ceil_mode, None, where)

    def maxpool(self, name, x, kernel, stride, padding, dilation, ceil_mode, return_indices, where):
        if _pair(padding) != (0, 0):
            raise InteropError(f"{where}: padding {padding} is not supported (the IR's pools have no "
                               "padding); pad with the convolution before it or use padding=0")
        if _pair(dilation) != (1, 1):
            raise InteropError(f"{where}: dilation {dilation} is not supported (only 1)")
        if return_indices:
            raise InteropError(f"{where}: return_indices=True is not supported")
        k = _pair(kernel)
        s = _pair(stride) if stride not in (None, (), []) else k
        return self.b.pool("max", name, x, k, s, where, bool(ceil_mode))

    def avgpool(self, name, x, kernel, stride, padding, ceil_mode, divisor_override, where):
        if _pair(padding) != (0, 0):
            raise InteropError(f"{where}: padding {padding} is not supported (the IR's pools have no "
                               "padding); use padding=0")
        if divisor_override:
            raise InteropError(f"{where}: divisor_override is not supported")
        k = _pair(kernel)
        s = _pair(stride) if stride not in (None, (), []) else k
        return self.b.pool("avg", name, x, k, s, where, bool(ceil_mode))

    def adaptive(self, name, x, output_size, where):
        out = output_size if isinstance(output_size, (list, tuple)) else (output_size, output_size)
        return self.b.adaptive_avgpool(name, x, (out[0], out[-1]), where)

    def flatten(self, name, x, start_dim, end_dim, where):
        if start_dim != 1 or end_dim != -1:
            raise InteropError(f"{where}: only flatten(start_dim=1, end_dim=-1) is supported, got "
                               f"start_dim={start_dim}, end_dim={end_dim} (the batch stays separate)")
        return self.b.flatten(name, x)

    # -- functions and methods
    def call(self, node, fn) -> Value | _NotTensor:
        """`fn` is the function (call_function) or method name (call_method)."""
        F, torch, b = self.F, self.torch, self.b
        meth = isinstance(fn, str)
        label = f"Tensor.{fn}" if meth else getattr(fn, "__name__", repr(fn))
        where = f"call '{node.name}' ({label})"
        if fn in (getattr, "size", "dim") or (fn is operator.getitem and not self._is_tensor(node.args[0])):
            return _NotTensor(f"'{node.name}' ({label})")
        x = lambda: self.val(node.args[0], where)
        if fn in (F.relu, torch.relu, torch.relu_, "relu", "relu_"):
            return b.activation(node.name, x(), "relu")
        if fn is F.relu6 or (fn is F.hardtanh and (_arg(node, 1, "min_val", -1.0),
                                                  _arg(node, 2, "max_val", 1.0)) == (0, 6)):
            return b.activation(node.name, x(), "relu6")
        if fn in (torch.clamp, torch.clip, "clamp", "clip", "clamp_", "clip_"):
            lo, hi = _arg(node, 1, "min"), _arg(node, 2, "max")
            if lo == 0 and hi in (None, 6):
                return b.activation(node.name, x(), "relu" if hi is None else "relu6")
            raise InteropError(f"{where}: only clamp(x, 0) and clamp(x, 0, 6) are supported, "
                               f"got min={lo}, max={hi}")
        if fn in (torch.flatten, "flatten"):
            return self.flatten(node.name, x(), _arg(node, 1, "start_dim", 0),
                                _arg(node, 2, "end_dim", -1), where)
        if fn in ("view", "reshape") or fn is torch.reshape:
            return self.reshape(node, x(), where)
        if fn in ("contiguous",):
            return x()
        if fn in (operator.add, operator.iadd, torch.add, "add", "add_"):
            if _arg(node, 2, "alpha", 1) != 1:
                raise InteropError(f"{where}: add with alpha != 1 is not supported")
            other = _arg(node, 1, "other")
            if not self._is_tensor(other):
                raise InteropError(f"{where}: adds a constant ({other!r}); only tensor + tensor "
                                   "(residual connections) is supported")
            return b.add(node.name, x(), self.val(other, where), where)
        if fn is F.max_pool2d:
            return self.maxpool(node.name, x(), _arg(node, 1, "kernel_size"), _arg(node, 2, "stride"),
                                _arg(node, 3, "padding", 0), _arg(node, 4, "dilation", 1),
                                _arg(node, 5, "ceil_mode", False), _arg(node, 6, "return_indices", False),
                                where)
        if fn is F.avg_pool2d:
            return self.avgpool(node.name, x(), _arg(node, 1, "kernel_size"), _arg(node, 2, "stride"),
                                _arg(node, 3, "padding", 0), _arg(node, 4, "ceil_mode", False),
                                _arg(node, 6, "divisor_override"), where)
        if fn is F.adaptive_avg_pool2d:
            return self.adaptive(node.name, x(), _arg(node, 1, "output_size"), where)
        if fn in (torch.mean, "mean"):
            return self.mean(node, x(), where)
        if fn is F.dropout or fn in (torch.nn.functional.dropout2d,):
            return x()
        raise InteropError(f"{where} is not supported; {_supported()}")

    def reshape(self, node, x: Value, where: str) -> Value:
        """view/reshape to (batch, features): a flatten; anything else is refused."""
        shape = node.args[1:] if len(node.args) > 2 else _arg(node, 1, "shape", ())
        if isinstance(shape, (list, tuple)) and len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = shape[0]
        per_sample = int(np.prod(self.b.shape(x)))
        if len(shape) == 2:
            batch, feats = shape
            batch_ok = isinstance(self.env.get(getattr(batch, "name", None)), _NotTensor) or \
                (batch == -1 and feats == per_sample)
            if batch_ok and feats in (-1, per_sample):
                return self.b.flatten(node.name, x)
        raise InteropError(f"{where}: only reshapes to (batch, -1) (a flatten) are supported, "
                           f"got shape {shape}")

    def mean(self, node, x: Value, where: str) -> Value:
        dims = _arg(node, 1, "dim")
        keep = _arg(node, 2, "keepdim", False)
        dims = tuple(sorted(d % 4 for d in (dims if isinstance(dims, (list, tuple)) else (dims,))))
        if dims != (2, 3):
            raise InteropError(f"{where}: only the mean over (2, 3) (global average pooling) is "
                               f"supported, got dim={_arg(node, 1, 'dim')}")
        y = self.b.global_avgpool(node.name, x, where)
        return y if keep else self.b.flatten(node.name + "_flat", y)

    def _is_tensor(self, arg) -> bool:
        return isinstance(self.env.get(getattr(arg, "name", None)), Value)


def _np(t) -> np.ndarray | None:
    return None if t is None else t.detach().cpu().numpy().astype(np.float32)


def from_torch(module, input_shape, name: str | None = None) -> Graph:
    """Convert a PyTorch `nn.Module` into a float IR graph (BatchNorm folded, activations fused).

    `input_shape` is the per-sample NHWC shape, e.g. (28, 28, 1) (or (F,) for
    an MLP), or an example batch as the module takes it, (N, C, H, W). The
    graph computes what `module.eval()` computes. A layer the IR cannot
    express raises InteropError naming the module path and type and listing
    the supported layers.

    >>> import torch.nn as nn
    >>> g = from_torch(nn.Sequential(nn.Flatten(), nn.Linear(64, 10)), (8, 8, 1), name="mlp")
    >>> g.name, g.shape(g.output)
    ('mlp', (10,))

    Module paths outside the IR's naming rule are renamed (`builder.ir_name`); see
    `from_torch_mapped` for the mapping back to the module paths.
    """
    return from_torch_mapped(module, input_shape, name)[0]


def from_torch_mapped(module, input_shape, name: str | None = None) -> tuple[Graph, dict[str, str]]:
    """`from_torch`, plus `{IR node name: module path or fx node name}` of every renamed node."""
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise InteropError(f"from_torch needs a torch.nn.Module, got {type(module).__name__}")
    shape = _input_shape(torch, input_shape)
    try:
        gm = torch.fx.symbolic_trace(module)
    except Exception as e:
        raise InteropError(f"torch.fx could not trace {type(module).__name__}: {e}. The forward pass "
                           "must not branch on tensor values; move such logic out of forward") from e
    b = GraphBuilder(shape, name or type(module).__name__)
    t = _Tracer(torch, gm, b)
    out = None
    for node in gm.graph.nodes:
        try:
            out = _convert_node(t, gm, node, out)
        except InteropError:
            raise
        except MALFORMED as e:
            raise InteropError(f"fx node '{node.name}' ({node.op} {node.target}): cannot be converted "
                               f"({type(e).__name__}: {str(e)[:200]})") from None
    if out is None:  # pragma: no cover - fx always has an output node
        raise InteropError("the traced model has no output")
    g = b.finish(out)
    return g, dict(b.source_names)


MALFORMED = (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, RuntimeError)
"""What a module with unusual attributes makes the converter raise (e.g. a kernel size that is
not a pair, a shape torch refuses): each becomes an InteropError naming the fx node."""


def _convert_node(t: _Tracer, gm, node, out: Value | None) -> Value | None:
    """Feed one fx node to the builder; returns the output Value once the output node is seen."""
    b = t.b
    if node.op == "placeholder":
        if any(isinstance(v, Value) for v in t.env.values()):
            raise InteropError(f"the model takes more than one input ('{node.name}'); "
                               "mcutrain models take one tensor")
        t.env[node.name] = b.input()
    elif node.op == "call_module":
        sub = gm.get_submodule(node.target)
        where = f"module '{node.target}' ({type(sub).__name__})"
        t.env[node.name] = t.module(node.target, sub, t.val(node.args[0], where))
    elif node.op in ("call_function", "call_method"):
        t.env[node.name] = t.call(node, node.target)
    elif node.op == "get_attr":
        t.env[node.name] = _NotTensor(f"parameter '{node.target}'")
    elif node.op == "output":
        res = node.args[0]
        if isinstance(res, (list, tuple, dict)):
            raise InteropError("the model returns several values; mcutrain models return one "
                               "tensor of logits")
        out = t.val(res, "the model's output")
    return out
