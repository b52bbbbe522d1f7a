"""The error every entry point reports the same way: a problem with the user's input.

It lives below the CLI and the API so both raise one class: `mcutrain.cli.main` prints it as
one line (exit status 1), a notebook sees its message. Layers below the interface keep their
own error types (ModelFileError, ExportError, ...), which the interface turns into this one.
"""


class UserError(Exception):
    """A problem with the user's input: printed as one clear message, exit status 1."""
