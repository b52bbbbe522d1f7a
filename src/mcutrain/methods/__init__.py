"""Training methods (fqt, zo, bp-qas, float), their optimizers and the shared training loop."""
