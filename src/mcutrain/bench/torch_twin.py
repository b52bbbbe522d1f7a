"""A PyTorch float32 twin of a model graph: what `sim-speed` holds the simulator's steps against.

The twin has the graph's layers and shapes (conv2d with any groups, depthwise included, linear,
max/average/global-average pools, flatten, relu/relu6, residual adds), runs NCHW as PyTorch
does, and trains every layer with plain SGD on cross-entropy: one `step()` is one training
step of a batch of random data. torch is imported inside the functions, so `mcutrain bench
--list` works without it.
"""

from __future__ import annotations

from collections.abc import Callable

from mcutrain.graph import Graph, Op


def torch_model(graph: Graph):
    """An `nn.Module` computing `graph` in float32 (NCHW), fresh PyTorch-initialized weights."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    act = {"relu": F.relu, "relu6": F.relu6, "none": None, None: None}

    class Twin(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleDict()
            for n in graph.nodes:
                a = n.attrs
                if n.op == Op.CONV2D:
                    cin = graph.shape(n.inputs[0])[-1]
                    self.layers[n.name.replace(".", "_")] = nn.Conv2d(
                        cin, a["out_channels"], a["kernel"], a["stride"], groups=a["groups"])
                elif n.op == Op.LINEAR:
                    self.layers[n.name.replace(".", "_")] = nn.Linear(
                        n.params["weight"].shape[1], a["out_features"])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            t = {"input": x}
            for n in graph.nodes:
                a, src = n.attrs, t[n.inputs[0]]
                if n.op == Op.CONV2D:
                    pt, pb, pl, pr = a["padding"]
                    y = self.layers[n.name.replace(".", "_")](F.pad(src, (pl, pr, pt, pb)))
                elif n.op == Op.LINEAR:
                    y = self.layers[n.name.replace(".", "_")](src)
                elif n.op == Op.MAXPOOL:
                    y = F.max_pool2d(src, a["kernel"], a["stride"])
                elif n.op == Op.AVGPOOL:
                    y = F.avg_pool2d(src, a["kernel"], a["stride"])
                elif n.op == Op.GLOBAL_AVGPOOL:
                    y = src.mean(dim=(2, 3), keepdim=True)
                elif n.op == Op.FLATTEN:
                    y = torch.flatten(src, 1)
                elif n.op in (Op.RELU, Op.RELU6):
                    y = act[n.op.value](src)
                elif n.op == Op.ADD:
                    y = src + t[n.inputs[1]]
                else:
                    raise ValueError(f"sim-speed: no torch twin for op {n.op.value}")
                f = act.get(a.get("act"))
                t[n.name] = y if f is None else f(y)
            return t[graph.output]

    return Twin()


def torch_step(graph: Graph, batch: int, threads: int = 1) -> Callable[[], None]:
    """One PyTorch float32 SGD training step of `graph` on a fixed random batch, on `threads`."""
    import torch
    from torch import nn
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch_model(graph)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    h, w, ch = graph.input_shape
    x = torch.rand(batch, ch, h, w)
    y = torch.randint(0, graph.num_classes, (batch,))

    def step() -> None:
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return step
