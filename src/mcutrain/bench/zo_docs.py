"""The docs of the ZO benchmarks: zo-adapt's protocol paragraph and tables, zo-ablation's table,
and each one's figure, written into its block of docs/benchmarks.md.

Apart from the runs (`zo`) because it only reads their result documents: a table can be
redrawn from a stored zo-adapt.json without training anything.
"""

from __future__ import annotations

import io as _io
from pathlib import Path
from typing import Any

import numpy as np

from mcutrain.bench.zo_protocol import ADAPT_METHODS, CORRUPTIONS
from mcutrain.io import atomic_write_bytes


def adapt_table(doc: dict[str, Any]) -> str:
    """Markdown table: test accuracy (%) after adaptation per corruption and method, mean last."""
    rows = doc["rows"]
    methods = [m for m in ADAPT_METHODS if any(r["method"] == m for r in rows)]
    corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
    acc = {(r["corruption"], r["method"]): r["accuracy_after"] for r in rows}
    lines = ["| corruption | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for c in corrs:
        lines.append(f"| {c} | " + " | ".join(f"{100 * acc[(c, m)]:.1f}" if (c, m) in acc else "-"
                                              for m in methods) + " |")
    means = [np.mean([acc[(c, m)] for c in corrs if (c, m) in acc]) for m in methods]
    lines.append("| **mean** | " + " | ".join(f"**{100 * v:.1f}**" for v in means) + " |")
    fpp = {r["method"]: r["forward_passes_per_step"] for r in rows}
    lines.append("| forward passes / step | " + " | ".join(f"{fpp[m]:.0f}" for m in methods) + " |")
    return "\n".join(lines)


def adapt_head(doc: dict[str, Any]) -> str:
    """The paragraph above the zo-adapt table: protocol, learning rates and the two targets."""
    b, rows = doc["budget"], doc["rows"]
    seeds = sorted({s for r in rows for s in r["seeds"]})
    corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
    mean = {m: 100 * float(np.mean([r["accuracy_after"] for r in rows if r["method"] == m]))
            for m in {r["method"] for r in rows}}
    counts: dict[str, dict[float, int]] = {}
    for r in rows:
        if r["method"] in b.get("tuned", ()):
            counts.setdefault(r["method"], {}).setdefault(r["lr"], 0)
            counts[r["method"]][r["lr"]] += 1
    lr = "; ".join(f"{m} " + ", ".join(f"{v:g} x{n}" for v, n in sorted(c.items()))
                   for m, c in counts.items())
    tuned = ", ".join(b.get("tuned", ()))
    text = (f"Test accuracy (%) at the best validation epoch, mean of {len(seeds)} seed(s) over "
            f"{len(corrs)} corruption(s) (`mcutrain bench zo-adapt`; "
            f"{doc.get('seconds', 0) / 60:.0f} minutes here, machine shared). small-cnn pretrained in float "
            "on 15,000 clean Fashion-MNIST images "
            "(2 epochs), int8 by PTQ; each corruption at severity 5 on the Fashion-MNIST test set split per "
            f"class into {b['n_train']} train / {b['n_val']} validation / {b['n_test']} test images (the ZO "
            f"seed's protocol); batch 100, {b['epochs']} epochs, cosine learning rate, trainable `conv2` and "
            f"`fc1` (classifier frozen) for every method; ZO with {b['queries']} queries "
            "(the seed used 50). ")
    if tuned:
        text += (f"Learning rates of {tuned}, per corruption: on split seed {b['tune_seed']} each runs "
                 f"{' / '.join(f'{f:g}' for f in b['lr_factors'])} x its grid centre and keeps the run of "
                 "best validation accuracy (never test); the other seeds use that rate; the same grid "
                 f"size and procedure for every method (the grid runs took "
                 f"{doc.get('tuning_seconds', 0) / 60:.0f} minutes). Centres: "
                 + ", ".join(f"{m} {v:g}" for m, v in b["lr"].items() if m in b.get("tuned", ()))
                 + " (set by short probes on validation accuracy). ")
    if lr:
        text += f"Rates chosen (rate x corruptions): {lr}. "
    if "zo-mix" in mean and "bp-qas" in mean and "none" in mean:
        gap, gain = mean["zo-mix"] - mean["bp-qas"], mean["zo-mix"] - mean["none"]
        text += (f"Targets: zo-mix within 1 point of bp-qas ({'met' if gap >= -1 else 'not met'}: "
                 f"{mean['zo-mix']:.1f} vs {mean['bp-qas']:.1f}) and clearly above none "
                 f"({'met' if gain > 5 else 'not met'}: {gain:+.1f} points).")
        acc = {(r["corruption"], r["method"]): 100 * r["accuracy_after"] for r in rows}
        diff = [f"{c} {acc[(c, 'zo-mix')] - acc[(c, 'bp-qas')]:+.1f}" for c in corrs
                if (c, "zo-mix") in acc and (c, "bp-qas") in acc]
        text += f" zo-mix minus bp-qas per corruption (points): {', '.join(diff)}."
        low = {m: sum(1 for r in rows if r["method"] == m and r.get("lr") is not None
                      and np.isclose(r["lr"], min(b["lr_factors"]) * b["lr"][m]))
               for m in ("zo-mix", "bp-qas") if m in b.get("tuned", ())}
        if low:
            text += (" Chosen at the low end of the grid (a lower rate might do better there): "
                     + ", ".join(f"{m} on {n} of {len(corrs)}" for m, n in low.items()) + " corruptions.")
        spread = max((r for r in rows if r["method"] == "zo-mix"), key=lambda r: r["accuracy_after_std"])
        if len(spread["seeds"]) > 1:
            text += (f" Largest seed spread of zo-mix: {spread['corruption']} (std "
                     f"{100 * spread['accuracy_after_std']:.1f} points).")
    return text


def lr_table(doc: dict[str, Any]) -> str:
    """Markdown table of the learning rate each method chose per corruption (split seed 0)."""
    rows = [r for r in doc["rows"] if r["method"] != "none"]
    methods = [m for m in ADAPT_METHODS if any(r["method"] == m for r in rows)]
    corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
    lr = {(r["corruption"], r["method"]): r.get("lr") for r in rows}
    lines = ["| learning rate chosen | " + " | ".join(methods) + " |", "|---" * (len(methods) + 1) + "|"]
    for c in corrs:
        lines.append(f"| {c} | " + " | ".join("-" if lr.get((c, m)) is None else f"{lr[(c, m)]:g}"
                                              for m in methods) + " |")
    return "\n".join(lines)


def ablation_table(doc: dict[str, Any]) -> str:
    """Markdown table of the ablation: final training loss and test accuracy per variant."""
    lines = ["| variant | final training loss | test accuracy (%) |", "|---|---|---|"]
    for r in doc["rows"]:
        loss = "diverged" if r["diverged"] else f"{r['final_loss']:.3f}"
        acc = "-" if r["accuracy_after"] is None else f"{100 * r['accuracy_after']:.1f}"
        lines.append(f"| {r['variant']} | {loss} | {acc} |")
    return "\n".join(lines)


def write_docs(doc: dict[str, Any], docs: Path) -> None:
    """The table between `<!-- bench:NAME -->` markers in docs/benchmarks.md, and the figure."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    name = doc["benchmark"]
    fig, ax = plt.subplots(figsize=(10, 4))
    if name == "zo-adapt":
        table = adapt_head(doc) + "\n\n" + adapt_table(doc) + "\n\n" + lr_table(doc)
        rows = doc["rows"]
        methods = [m for m in ADAPT_METHODS if any(r["method"] == m for r in rows)]
        corrs = [c for c in CORRUPTIONS if any(r["corruption"] == c for r in rows)]
        acc = {(r["corruption"], r["method"]): r["accuracy_after"] for r in rows}
        width = 0.8 / len(methods)
        for i, m in enumerate(methods):
            ax.bar(np.arange(len(corrs)) + i * width, [100 * acc.get((c, m), np.nan) for c in corrs],
                   width, label=m)
        ax.set_xticks(np.arange(len(corrs)) + 0.4 - width / 2, corrs, rotation=30, ha="right")
        ax.set_ylabel("test accuracy (%)")
        ax.set_ylim(0, 105)                    # room above the bars for the legend
        ax.legend(ncol=8, fontsize=8, loc="upper center")
        ax.set_title("small-cnn int8, Fashion-MNIST-C severity 5: accuracy after adaptation")
    else:
        for r in doc["rows"]:
            if r["loss_curve"]:
                ax.plot(range(1, len(r["loss_curve"]) + 1), r["loss_curve"], marker="o", label=r["variant"])
        ax.set_xlabel("epoch")
        ax.set_ylabel("training loss")
        ax.set_title(f"ZO ablation on {doc['corruption']} (severity 5)")
        ax.legend(fontsize=8)
        table = ablation_table(doc)
    fig.tight_layout()
    png = docs / f"{name}.png"
    buf = _io.BytesIO()
    fig.savefig(buf, dpi=100)
    plt.close(fig)
    atomic_write_bytes(png, lambda f: f.write(buf.getvalue()))
    md = docs / "benchmarks.md"
    text = md.read_text() if md.exists() else "# Benchmarks\n"
    start, end = f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"
    block = f"{start}\n{table}\n\n![{name}]({name}.png)\n{end}"
    if start in text and end in text:
        text = text[:text.index(start)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip() + f"\n\n## {name}\n\n{block}\n"
    atomic_write_bytes(md, lambda f: f.write(text.encode()))
