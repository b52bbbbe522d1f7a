"""Size limits of a model: what a file (or an import) may declare before mcutrain refuses it.

Why limits at all: a model file is input from outside. A header may claim 10^12 elements, a
graph may take a 4096x4096 image; each would make `plan` or `export` allocate gigabytes
before anything useful happens. The limits are far above any model a microcontroller can
hold (the zoo's largest, MCUNet-5FPS at 128x128x3, has 0.47 M parameters, 131 k elements
in its largest activation and 22 M MACs per sample), so they only ever refuse files that
are broken or hostile, and they are checked from the graph's description,
before any array data is read.
"""

from __future__ import annotations

MAX_DIM = 1 << 16
"""Largest size of one dimension of a shape, and of kernel, stride, padding, channels, features."""
MAX_TENSOR_ELEMENTS = 1 << 22
"""Largest per-sample tensor (input or any activation): 4 Mi elements, 16 MiB as float32.
A 2048x2048x1 input passes, 4096x4096x1 is refused."""
MAX_PARAMS = 1 << 24
"""Largest number of parameters of a model (16 Mi, 64 MiB as float32), and of any one array."""
MAX_MACS = 1 << 32
"""Largest multiply-accumulate count of one forward pass of one sample (4.3 G)."""
MAX_NODES = 4096
"""Largest number of nodes of a graph."""
MAX_META_BYTES = 16 << 20
"""Largest JSON description of a model file (16 MiB)."""
MAX_JSON_DEPTH = 64
"""Deepest nesting of lists and objects in a model description."""
MAX_NAME_CHARS = 256
"""Longest node or array name."""
EXTRA_BYTES_SLACK = 1 << 20
"""Extra arrays (the int8 tensors of a quantized model) may hold at most the bytes of the
float32 parameters plus this."""


def load_bound_bytes(params: int) -> int:
    """Upper bound of the bytes `io.load` reads for a graph with `params` parameters.

    float64 parameters (8 bytes each) + extra arrays (at most 4 bytes per parameter plus
    `EXTRA_BYTES_SLACK`) + the description (`MAX_META_BYTES`).
    """
    return 8 * params + 4 * params + EXTRA_BYTES_SLACK + MAX_META_BYTES
MAX_DATASET_ELEMENTS = 1 << 28
"""Largest array of a dataset file (`--dataset data.npz`): 256 Mi elements, 1 GiB as the float32
the samples become (Fashion-MNIST's 60000 training images are 47 Mi)."""
MAX_CLASSES = MAX_DIM
"""Largest label + 1 a dataset file may hold: a model's last layer has at most `MAX_DIM` outputs."""
