"""`mcutrain state-to-model LIBRARY_DIR STATE.bin -o trained.npz`: a device's training back as a model.

A training library (`mcutrain export --method zo | bp-qas | fqt`) saves its state on the device
with `model_save_state`. Given the library folder (its `manifest.json` and `model.npz` say how it
was generated, so no option is repeated) and those bytes, this writes the trained int8 model: the
device's integer weights and biases with the library's qparams, as a model file (`.npz`, which
`eval`, `export`, `run`, `plan` and `train` take as it is) or, by the suffix of `-o`, as a
`.tflite` that TFLite Micro runs. A state of another library or configuration, a truncated or
oversize blob, or impossible values are refused with what is wrong.

Examples:
    mcutrain state-to-model zo-lib state.bin -o trained.npz
    mcutrain state-to-model zo-lib state.bin -o trained.tflite --json
"""

from __future__ import annotations

import argparse

from mcutrain.api.state_model import output_format, state_to_model
from mcutrain.cli import print_json
from mcutrain.commands._outputs import check_output


def register(subparsers) -> None:
    p = subparsers.add_parser("state-to-model", help="turn a device's saved training state into a model file",
                              description=__doc__.split("\n\n")[0],
                              epilog="examples:" + __doc__.split("Examples:")[1],
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("library", metavar="LIBRARY_DIR", help="the folder mcutrain export --method M wrote")
    p.add_argument("state", metavar="STATE", help="the bytes model_save_state wrote on the device")
    p.add_argument("-o", "--output", required=True, metavar="FILE",
                   help="the trained model: .npz (model file) or .tflite (TFLite Micro)")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_output(args.output, "-o/--output")
    output_format(args.output)
    r = state_to_model(args.library, args.state, args.output)
    if args.json:
        print_json(r)
    else:
        print(f"wrote {r['path']} ({r['format']}): the {r['method']} library's model after {r['steps']:,} "
              f"device steps, {r['changed']:,} weights and biases changed\n"
              f"library model: {r['library_model']}")
    return 0
