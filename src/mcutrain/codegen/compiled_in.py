"""What a library has compiled in, said once for its `model.h` and its README.

A firmware engineer holding an exported folder should not need the command line that made it:
the method, the precision and number formats, the batch, which layers train (weights, biases),
which run partial updates with which lambdas, the method's own settings (ZO's perturbation and
queries, BP-QAS's momentum), the rounding mode, the kernels and the mcutrain version. Every
training answer is read from the method's `StepDecisions` (the schedule carries them), never
re-derived, so the text says what the step does. Layer names are model text: they reach the
header only through `cformat.c_comment`.

Example:
    >>> facts = compiled_in(None, batch=1, rounding="single", kernels="ref")
    >>> facts[0]
    ('method', 'none (inference only)')
    >>> header_lines(facts).splitlines()[0]
    ' *     method: none (inference only)'
"""

from __future__ import annotations

from mcutrain.codegen.cformat import c_comment
from mcutrain.methods.decisions import StepDecisions
from mcutrain.version import __version__


def _layers(names: tuple[str, ...]) -> str:
    return ", ".join(names) or "(none)"


def _formats(d: StepDecisions) -> str:
    f = d.formats
    text = f"weights {f.weight}, biases {f.bias}, activations {f.act}"
    if d.method == "zo":        # no backward pass: no errors, no gradients
        return text
    return f"{text}, errors {f.error}, per-sample gradients {f.grad}"


def _partial(d: StepDecisions) -> str:
    return "; ".join(f"{n} (lambda_min {p.lambda_min:g}, lambda_max {p.lambda_max:g})"
                     for n, p in d.partial) or "none (every trained layer in full)"


def compiled_in(decisions: StepDecisions | None, batch: int, rounding: str,
                kernels: str) -> list[tuple[str, str]]:
    """(what, value) pairs describing a library; `decisions` None for an inference library."""
    facts: list[tuple[str, str]] = []
    if decisions is None:
        facts.append(("method", "none (inference only)"))
    else:
        d = decisions
        facts += [("method", d.method),
                  ("precision", f"{d.precision or 'int8'} ({_formats(d)})"),
                  ("batch", f"{batch} sample(s) per model_train_step"),
                  ("trained weights", _layers(d.weight_layers)),
                  # bias_layers is set by bp-qas alone; zo and fqt train the biases of their weight layers
                  ("trained biases", _layers(d.bias_layers or d.weight_layers)),
                  ("partial updates", _partial(d))]
        facts += [(k, v) for k, v in d.settings]
    facts += [("rounding", rounding), ("kernels", kernels), ("mcutrain", __version__)]
    return facts


def header_lines(facts: list[tuple[str, str]]) -> str:
    """The facts as lines of model.h's opening comment (each through `c_comment`)."""
    return "\n".join(f" *     {c_comment(k)}: {c_comment(v)}" for k, v in facts)


def readme_rows(facts: list[tuple[str, str]]) -> str:
    """The facts as rows of a two-column Markdown table: printable one-line text (`c_comment`), and
    no `|`, which would end a cell."""
    return "\n".join(f"| {c_comment(k)} | {c_comment(v).replace('|', '/')} |" for k, v in facts)
