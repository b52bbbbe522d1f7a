"""`mcutrain datasets`: which datasets are available and where, the corruptions, and a picture of them.

Examples:
    mcutrain datasets                      table of datasets and corruptions
    mcutrain datasets --json               the same as JSON
    mcutrain datasets --show fashion-mnist -o grid.png
    mcutrain datasets --show fashion-mnist-c:fog:3 -o fog.png
    mcutrain datasets --download mnist     fetch the official files (checked by sha256)
    mcutrain datasets --info images:photos --info "csv:imu.csv?window=128"
                                           load your own data: its real sizes, shape, classes
"""

from __future__ import annotations

import argparse

from mcutrain.cli import print_json
from mcutrain.commands._outputs import check_output
from mcutrain.data import CORRUPTIONS, DATASETS, DatasetError, SpecError, dataset_status
from mcutrain.data.corruptions import REGISTRY, CorruptionError
from mcutrain.data.registry import missing_message
from mcutrain.data.sources import EXAMPLES, KINDS
from mcutrain.errors import UserError
from mcutrain.options import seed_int


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "datasets", help="list datasets (availability, source, sizes) and corruptions; draw a grid",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    p.add_argument("--show", metavar="SPEC",
                   help="draw samples per corruption and severity for a dataset spec (needs -o)")
    p.add_argument("-o", "--output", metavar="PNG", help="where --show writes its picture")
    p.add_argument("--seed", type=seed_int, default=0,
                   help="seed of the corruption draws for --show (default 0)")
    p.add_argument("--download", metavar="NAME",
                   help="download a dataset's official files into the cache, verified by pinned sha256")
    p.add_argument("--info", metavar="SPEC", action="append", default=[],
                   help="load a dataset (a spec, a data.npz or KIND:PATH?OPTIONS) and show its real sizes, "
                        "sample shape, classes and preprocessing (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.download:
        return _download(args)
    if args.show:
        return _show(args)
    if args.output:
        raise UserError("-o/--output goes with --show SPEC")
    if args.info:
        return _info(args)
    rows = [dataset_status(name) for name in DATASETS]
    formats = [{"kind": k, "what": KINDS[k], "spec": EXAMPLES[k]} for k in KINDS]
    if args.json:
        print_json({"datasets": rows, "corruptions": list(CORRUPTIONS), "formats": formats})
        return 0
    _print_table(rows)
    print("\nyour own data (--dataset, any command; mcutrain datasets --info SPEC shows what it holds):")
    print("  data.npz  arrays x, y [, x_test, y_test]")
    for f in formats:
        print(f"  {f['spec']}\n      {f['what']}")
    return 0


def info_row(spec: str, seed: int = 0) -> dict:
    """What a loaded dataset holds: the `--info` row (sizes, shape, classes, preprocessing)."""
    from mcutrain.api.data import dataset_of
    ds = dataset_of(spec, seed)
    return {"name": ds.name, "available": True, "source": ds.source, "n_train": ds.n_train,
            "n_test": ds.n_test, "shape": list(ds.shape),
            "classes": {str(i): name for i, name in enumerate(ds.class_names)} or ds.num_classes,
            "value_range": list(ds.value_range), "preprocessing": ds.preprocessing}


def _info(args: argparse.Namespace) -> int:
    rows = [info_row(spec, args.seed) for spec in args.info]
    if args.json:
        print_json({"datasets": rows})
        return 0
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        print(f"{r['name']}\n  {r['n_train']} train / {r['n_test']} test samples of shape {shape}, "
              f"values {r['value_range'][0]:.4g}..{r['value_range'][1]:.4g}; {r['source']}")
        classes = r["classes"]
        print("  classes: " + (", ".join(f"{i}={n}" for i, n in classes.items()) if isinstance(classes, dict)
                               else f"{classes} (labels 0..{classes - 1})"))
        for key, value in r["preprocessing"].items():
            print(f"  {key}: {value}")
    return 0


def _fmt(v) -> str:
    return "-" if v is None else str(v)


def _print_table(rows: list[dict]) -> None:
    print(f"{'dataset':<14} {'available':<9} {'train':>6} {'test':>6}  {'shape':<8} source")
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        print(f"{r['name']:<14} {'yes' if r['available'] else 'no':<9} {_fmt(r['n_train']):>6} "
              f"{_fmt(r['n_test']):>6}  {shape:<8} {_fmt(r['source'])}")
    print(f"\ncorruptions ({len(CORRUPTIONS)}, severities 1-5):")
    families: dict[str, list[str]] = {}
    for c in REGISTRY.values():
        families.setdefault(c.family, []).append(c.name)
    for family, names in families.items():
        print(f"  {family:<10} {' '.join(names)}")
    print("\nspecs: NAME, NAME-c:CORRUPTION:SEVERITY, NAME[0-4], NAME[0,2,5] "
          "(e.g. fashion-mnist-c:gaussian_noise:5, digits-c:contrast:3[0-4])")
    for r in rows:
        if not r["available"]:
            print("\n" + missing_message(r["name"]))


def _show(args: argparse.Namespace) -> int:
    if not args.output:
        raise UserError("--show needs -o PNG, the file to write (e.g. -o grid.png)")
    if not args.output.lower().endswith(".png"):
        raise UserError(f"--show writes PNG; give an output name ending in .png, not '{args.output}'")
    check_output(args.output, "-o/--output", ".png")
    if args.seed < 0:
        raise UserError(f"--seed must not be negative, got {args.seed}")
    from mcutrain.data.grid import save_grid
    try:
        path = save_grid(args.show, args.output, seed=args.seed)
    except (DatasetError, SpecError, CorruptionError) as e:
        raise UserError(str(e)) from None
    if args.json:
        print_json({"spec": args.show, "output": str(path), "seed": args.seed})
    else:
        print(f"wrote {path}")
    return 0


def _download(args: argparse.Namespace) -> int:
    from mcutrain.data.cache import cache_dir
    from mcutrain.data.download import PINNED, DownloadError, download
    if args.download not in DATASETS:
        raise UserError(f"unknown dataset '{args.download}'; known: {', '.join(DATASETS)}")
    if args.download not in PINNED:
        raise UserError(f"'{args.download}' is not downloaded (it is bundled or generated); "
                        f"downloadable: {', '.join(PINNED)}")
    log = (lambda msg: None) if args.json else print
    try:
        dest = download(args.download, cache_dir() / args.download, log=log)
    except (DownloadError, OSError) as e:
        raise UserError(f"download failed: {e}\n{missing_message(args.download)}") from None
    row = dataset_status(args.download)
    if args.json:
        print_json({"downloaded": args.download, "path": str(dest), "dataset": row})
    else:
        print(f"{args.download}: {row['n_train']} train / {row['n_test']} test images in {dest}")
    return 0
