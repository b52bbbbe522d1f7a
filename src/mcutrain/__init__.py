"""mcutrain: train fully quantized neural networks for microcontrollers.

The Python API (`mcutrain.api`, documented in docs/api.md) is re-exported here:

    >>> import mcutrain
    >>> model = mcutrain.load("model.npz")
    >>> result = mcutrain.train(model, "digits-c:stripe:5", method="fqt", partial=0.5, epochs=5)
    >>> mcutrain.plan(result.model, method="fqt", target="nrf52840").fits
"""

from mcutrain.api import (
    Model,
    TrainResult,
    UserError,
    evaluate,
    export,
    import_model,
    load,
    plan,
    predict,
    run,
    state_to_model,
    train,
)
from mcutrain.version import __version__

__all__ = ["Model", "TrainResult", "UserError", "__version__", "evaluate", "export", "import_model", "load",
           "plan", "predict", "run", "state_to_model", "train"]
