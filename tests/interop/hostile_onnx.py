"""ONNX models whose node, tensor, initializer and graph names carry C-injection payloads.

Built in code (no binary fixtures): the names are the attack, the weights are small and seeded.
"""

from __future__ import annotations

import numpy as np

PAYLOAD = '*/\n__attribute__((constructor)) static void p(void){system("touch CANARY");}/*'
"""Ends a C comment, then defines a function that runs at program start."""

CONV_NAME = PAYLOAD
RELU_NAME = "/features/0/Relu"
FLAT_OUTPUT = "*/flat\nint x; /*"          # the Flatten node is unnamed: its output name is used
FC_NAME = "\u00fcber layer " + "\u00e9" * 70   # unicode, a space, far over 64 characters


def hostile_onnx(seed: int = 0, side: int = 4, classes: int = 3):
    """conv 3x3 (2 channels) -> relu -> flatten -> linear on a 1 x side x side input, every name hostile."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    w = rng.standard_normal((2, 1, 3, 3)).astype(np.float32) * 0.5
    b = rng.standard_normal(2).astype(np.float32) * 0.1
    fw = rng.standard_normal((classes, 2 * side * side)).astype(np.float32) * 0.3
    fb = rng.standard_normal(classes).astype(np.float32) * 0.1
    inits = [numpy_helper.from_array(w, PAYLOAD + "w"), numpy_helper.from_array(b, PAYLOAD + "b"),
             numpy_helper.from_array(fw, FC_NAME + ".weight"), numpy_helper.from_array(fb, FC_NAME + ".bias")]
    nodes = [
        helper.make_node("Conv", ["x" + PAYLOAD, PAYLOAD + "w", PAYLOAD + "b"], [PAYLOAD + "y"],
                         name=CONV_NAME, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", [PAYLOAD + "y"], ["relu_out"], name=RELU_NAME),
        helper.make_node("Flatten", ["relu_out"], [FLAT_OUTPUT], name=""),
        helper.make_node("Gemm", [FLAT_OUTPUT, FC_NAME + ".weight", FC_NAME + ".bias"], ["logits"],
                         name=FC_NAME, transB=1),
    ]
    x = helper.make_tensor_value_info("x" + PAYLOAD, TensorProto.FLOAT, ["N", 1, side, side])
    y = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", classes])
    graph = helper.make_graph(nodes, PAYLOAD, [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
