"""What a failed harness run means: its exit code in words and the tail of what it printed.

Why: `mcutrain run` used to end in "the model harness failed ... with exit code 4:" and nothing
after it, because the harness writes its reason to stderr and the message showed stdout only.
The codes are the harnesses' own (codegen/templates/harness_main.c, harness_train_main.c).
"""

from __future__ import annotations

HARNESS_EXIT = {
    2: "it could not open, read or write its files (usage or file error)",
    3: "the library does not match its inputs (model_init failed, or the data file is not for this "
       "model's batch and input size)",
    4: "the library returned an error status from a step (model_predict / model_train_step)",
}
"""The harnesses' exit codes; any other non-zero code is a crash (a fault, an abort, a signal)."""
TAIL_LINES = 12
"""Lines of the harness's output shown (the whole run is in --dump DIR)."""


def tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last `lines` non-empty lines of `text`."""
    kept = [ln for ln in text.strip().splitlines() if ln.strip()]
    return "\n".join(kept[-lines:])


def harness_failure(what: str, target: str, exit_code: int, stdout: str, stderr: str,
                    wrote_output: bool = True) -> str:
    """The message of a harness run that failed: what failed, why (the code in words), its output.

    Example:
        >>> harness_failure("model harness", "cortex-m4", 4, "", "model_predict failed with status 3")
        'the model harness failed on cortex-m4 with exit code 4: the library returned an error status \
from a step (model_predict / model_train_step); its output:\\n  model_predict failed with status 3'
    """
    if exit_code == 0 and not wrote_output:
        why = "it exited 0 but wrote no results file"
    else:
        why = HARNESS_EXIT.get(exit_code, "it crashed (a fault, an abort or a signal)")
    said = tail("\n".join(t for t in (stderr, stdout) if t.strip()))
    shown = ("its output:\n  " + said.replace("\n", "\n  ")) if said else "it printed nothing"
    return (f"the {what} failed on {target} with exit code {exit_code}: {why}; {shown}")
