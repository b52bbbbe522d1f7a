"""The stages of `mcutrain demo`: pretrain, adapt on the device (simulated), MCU run, report."""
