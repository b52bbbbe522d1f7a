"""`mcutrain train --method zo | bp-qas`: the options of the two int8-graph methods.

Both train an int8 model: a model file that already holds one (from
`mcutrain pretrain`) is used as is; a float model is quantized first (PTQ,
min/max over the calibration samples).
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from mcutrain.cli import UserError
from mcutrain.commands._numbers import momentum, non_negative_int, open_unit, positive_int
from mcutrain.commands.method_registry import MethodEntry, register_method
from mcutrain.graph import Graph
from mcutrain.methods.base import TrainingMethod


def _quantized(args: argparse.Namespace, graph: Graph, calib: np.ndarray):
    from mcutrain import io
    from mcutrain.engines import ptq
    from mcutrain.qmodel import QuantModel
    if getattr(args, "model", None):
        mf = io.load(args.model)
        if isinstance(mf.meta.get("quant"), dict) and mf.graph.input_shape == graph.input_shape \
                and mf.graph.output_shape == graph.output_shape:
            return QuantModel.from_file(mf)
    return ptq.quantize_model(graph, calib)


def _zo_args(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--queries", type=positive_int, default=50,
                   help="zo: queries per layer and step (default 50)")
    g.add_argument("--perturb", default="mix",
                   help="zo: wp | np | mix | mix:LAYER | model-wp (default mix)")
    g.add_argument("--sparse", default="none", metavar="SPEC",
                   help="zo: none | score:K | test:K (pick K of the trainable layers) | "
                        "topk:R | randk:R (perturbation masks)")
    g.add_argument("--no-gns", action="store_true", help="zo: no GNS shrink (ablation)")
    g.add_argument("--no-qas", action="store_true", help="zo / bp-qas: no QAS scaling (ablation)")


def _zo_build(args: argparse.Namespace, graph: Graph, calib: np.ndarray) -> TrainingMethod:
    from mcutrain.methods.zo import ZOConfig, ZOMethod
    from mcutrain.methods.zo_select import select_by_score
    qm = _quantized(args, graph, calib)
    sparse = args.sparse
    mask, trainable = "none", args.trainable
    try:
        if sparse.startswith(("topk:", "randk:")):
            mask = sparse
        elif sparse.startswith(("score:", "test:")):
            k = int(sparse.split(":", 1)[1])
            from mcutrain.methods.trainable import resolve_trainable
            cands = resolve_trainable(qm.graph, args.trainable)
            cfg = ZOConfig(queries=args.queries, perturb=args.perturb, seed=args.seed + 1)
            # NOTE: test-and-pick needs validation data the command does not split off; both
            # rules use the ZO score on the calibration samples here.
            trainable = "layers:" + ",".join(select_by_score(qm, calib, _calib_labels(args, calib),
                                                             cands, k, cfg))
        elif sparse != "none":
            raise ValueError(f"--sparse '{sparse}': use none, score:K, test:K, topk:R or randk:R")
        cfg = ZOConfig(trainable=trainable, queries=args.queries, perturb=args.perturb,
                       gns=not args.no_gns, qas=not args.no_qas, mask=mask, seed=args.seed + 1)
        return ZOMethod(qm, cfg)
    except ValueError as e:
        raise UserError(str(e)) from None


def _calib_labels(args: argparse.Namespace, calib: np.ndarray) -> np.ndarray:
    from mcutrain.data import load_dataset
    ds = load_dataset(args.dataset, seed=args.seed)
    return ds.y_train[:len(calib)]


def _zo_summary(args: argparse.Namespace) -> dict[str, Any]:
    return {"precision": "int8", "queries": args.queries, "perturb": args.perturb, "sparse": args.sparse}


def _bp_args(g: argparse._ArgumentGroup) -> None:
    g.add_argument("--momentum", type=momentum, default=0.0, help="bp-qas: SGD momentum (default 0)")
    g.add_argument("--bias-last", type=non_negative_int, default=0,
                   help="bp-qas: also train biases of the last N layers")
    g.add_argument("--channel-ratio", type=open_unit, default=1.0,
                   help="bp-qas: fraction of input channels whose weights train (static sparse update)")


def _bp_build(args: argparse.Namespace, graph: Graph, calib: np.ndarray) -> TrainingMethod:
    from mcutrain.methods.bp_qas import BPQASConfig, BPQASMethod
    try:
        return BPQASMethod(_quantized(args, graph, calib),
                           BPQASConfig(trainable=args.trainable, bias_last=args.bias_last,
                                       channel_ratio=args.channel_ratio, momentum=args.momentum,
                                       qas=not args.no_qas))
    except ValueError as e:
        raise UserError(str(e)) from None


def _bp_summary(args: argparse.Namespace) -> dict[str, Any]:
    return {"precision": "int8", "queries": 0, "momentum": args.momentum}


register_method("zo", MethodEntry(_zo_args, _zo_build, _zo_summary))
register_method("bp-qas", MethodEntry(_bp_args, _bp_build, _bp_summary))
