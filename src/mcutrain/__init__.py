"""mcutrain: train fully quantized neural networks on microcontrollers."""

__version__ = "0.1.0"
