"""The public Python API: everything the command line does, as functions (see docs/api.md).

Each function runs the same code as its command (`mcutrain train` calls `train_args`, ...),
with the options of `mcutrain.methods.factory`: the same names (`--partial-max` is
`partial_max`), defaults and checks. Bad input raises `UserError` with the message the
command would print.

Example:
    >>> import mcutrain
    >>> qm = mcutrain.load("model.npz")
    >>> r = mcutrain.train(qm, "digits-c:stripe:5", method="zo", queries=10, lr=0.05, epochs=1)
    >>> mcutrain.evaluate(r.model, "digits-c:stripe:5")
    >>> mcutrain.plan(r.model, method="zo", target="nrf52840", queries=10).fits
    >>> mcutrain.export(r.model, "zo-lib", method="zo", target="nrf52840", batch=4)
    >>> mcutrain.run(r.model, "digits-c:stripe:5", method="zo", target="nrf52840", steps=3, batch=4)
"""

from mcutrain.api.data import Model, load
from mcutrain.api.device import export, plan
from mcutrain.api.mcu_run import run
from mcutrain.api.models import evaluate, import_model, predict
from mcutrain.api.state_model import state_to_model
from mcutrain.api.training import TrainResult, train
from mcutrain.errors import UserError

__all__ = ["Model", "TrainResult", "UserError", "evaluate", "export", "import_model", "load", "plan",
           "predict", "run", "state_to_model", "train"]
