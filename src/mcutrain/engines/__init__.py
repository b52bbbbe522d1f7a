"""Engines: the float32 engine (forward/backward) and the integer golden engine."""
