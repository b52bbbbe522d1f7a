"""Models in and out of PyTorch, ONNX and TensorFlow Lite.

- `from_tflite(path)`: an int8 `.tflite` -> `QuantModel` with the file's integers, plus
  `{IR name: tensor name}`; `to_tflite(qm)` / `save_tflite(qm, path)`: back to `.tflite`.

- `from_torch(module, input_shape)`: an `nn.Module` -> float IR graph (torch.fx).
- `from_onnx(model, input_shape=None)`: a float ONNX model -> float IR graph.
- `from_onnx_mapped` / `from_torch_mapped`: the same, plus `{IR name: original name}` of the
  nodes renamed into the IR's naming rule.
- `to_onnx(model)` / `save_onnx(model, path)`: a float graph as float ONNX, or an
  int8 `QuantModel` as ONNX QDQ (QuantizeLinear/DequantizeLinear around float ops).

torch, onnx and onnxruntime are optional: each function imports what it needs
when called and says which package to install when it is missing.
"""

from mcutrain.interop.builder import InteropError
from mcutrain.interop.onnx_export import save_onnx, to_onnx
from mcutrain.interop.onnx_import import from_onnx, from_onnx_mapped
from mcutrain.interop.tflite_export import save_tflite, to_tflite
from mcutrain.interop.tflite_import import from_tflite
from mcutrain.interop.torch_import import from_torch, from_torch_mapped

__all__ = ["InteropError", "from_onnx", "from_onnx_mapped", "from_tflite", "from_torch", "from_torch_mapped",
           "save_onnx", "save_tflite", "to_onnx", "to_tflite"]
