"""The docs block of benchmark `mcu`: the measured table, the partial-update table and profile, the
pending cases, and the two targets checked on the rows.

Apart from the measurement (`mcu`) because it only reads rows: a table can be redrawn from a
stored mcu.json (as `mcu-partial` does after merging) without building or running anything.
"""

from __future__ import annotations

from typing import Any

from mcutrain.bench import files
from mcutrain.bench.mcu_cases import (
    RISCV_CORES,
    RISCV_VS_M4,
    SEED_MCUNET,
    TARGET_INSTR_PER_MAC,
    TARGET_RAM_PCT,
    TRAINED,
    WARMUP,
)


def riscv_checks(done: list[dict[str, Any]]) -> dict[str, Any]:
    """Each RISC-V core's instructions per step over the M4's portable C, per (model, setting) measured
    on both (`<core>_vs_m4_ref`); its target (issue #23: the FQT int8 step, inference being
    `mcu-inference`'s) is met when every FQT int8 ratio is within `RISCV_VS_M4`. The other
    settings' ratios are shown beside it: without an FPU (rv32imc) the float32 parts of uint8,
    float32 and BP-QAS run in soft float."""
    m4 = {(r["model"], r["setting"]): r["instructions_per_step"] for r in done
          if r["core"] == "cortex-m4" and r["kernels"] == "ref"}
    out: dict[str, Any] = {}
    for core in RISCV_CORES:
        ratios = {f"{r['model']}: {r['setting']}": r["instructions_per_step"] / m4[(r["model"], r["setting"])]
                  for r in done if r["core"] == core and (r["model"], r["setting"]) in m4}
        out[f"{core}_vs_m4_ref"] = ratios
        int8 = [v for k, v in ratios.items() if k.split(": ", 1)[1].startswith("fqt int8")]
        out[f"{core}_target_met"] = all(v <= RISCV_VS_M4 for v in int8) if int8 else None
    return out


def checks(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The issue's two targets, evaluated on the measured rows (None where no row applies yet).

    The instruction target is per whole step, so it is given per batch size: the update runs once
    per step (its float32 passes over every weight are 1.5 instructions/MAC alone at batch 1 on the
    M4) and its share falls as 1 / batch. `target_met` is that of the largest measured batch, the
    batch the simulator's FQT benchmarks train with (32); the batch-1 figure is kept beside it.
    """
    done = [r for r in rows if "bit_exact" in r]
    fqt_m4 = [r for r in done if r["model"] == "small-cnn" and r["core"] == "cortex-m4"
              and r["kernels"] == "dsp" and r["options"].startswith("--method fqt --precision int8")
              and "--partial" not in r["options"]
              and not r["setting"].endswith(TRAINED)]
    m4 = {int(r["batch"]): r["instructions_per_mac"] for r in fqt_m4}
    first = {str(r["batch"]): r["first_step_instructions"] / r["macs_per_step"] for r in sorted(
        fqt_m4, key=lambda r: r["batch"]) if "first_step_instructions" in r}
    worst = max((abs(r["ram_diff_pct"]) for r in done), default=None)
    largest = max(m4, default=None)
    one = [r for r in done if r["model"] == "small-cnn" and r["core"] == "cortex-m4" and r["kernels"] == "dsp"
           and r["setting"] == "fqt int8, all 4 layers" and r["batch"] == 1]
    upd = one[0].get("top_functions", {}).get("mt_fqt_upd_s8") if one else None
    return {"m4_dsp_fqt_int8_instr_per_mac": m4.get(1),
            "m4_dsp_fqt_int8_instr_per_mac_by_batch": {str(b): v for b, v in sorted(m4.items())},
            "m4_dsp_fqt_int8_first_step_instr_per_mac_by_batch": first,
            "m4_dsp_fqt_int8_target_met": (m4[largest] <= TARGET_INSTR_PER_MAC) if m4 else None,
            "m4_dsp_fqt_int8_update_per_mac": upd / one[0]["macs_per_step"] if upd is not None else None,
            "m4_dsp_fqt_int8_target_met_at_batch": [b for b, v in sorted(m4.items())
                                                    if v <= TARGET_INSTR_PER_MAC],
            "worst_ram_diff_pct": worst,
            "ram_target_met": (worst <= TARGET_RAM_PCT) if worst is not None else None,
            **riscv_checks(done)}


def markdown(rows: list[dict[str, Any]]) -> str:
    """The docs block: one table of measured rows, the pending cases, the checks."""
    ref = {(r["model"], r["setting"], r["core"]): r["instructions_per_step"] for r in rows
           if "bit_exact" in r and r["kernels"] == "ref"}
    table = []
    for r in rows:
        if "bit_exact" not in r:
            continue
        base = ref.get((r["model"], r["setting"], r["core"]))
        table.append({
            "model": r["model"] + ("" if r["model"] == "small-cnn" else f" {r['input_shape'][0]}x"
                                   f"{r['input_shape'][1]}"),
            "setting": r["setting"], "core": f"{r['core'].removeprefix('cortex-')} {r['kernels']}",
            "batch": r["batch"], "MACs/step": f"{r['macs_per_step']:,}",
            "instr/sample": f"{r['instructions_per_sample'] / 1e6:,.2f} M",
            "instr/MAC": r["instructions_per_mac"],
            "first step instr/MAC": (r["first_step_instructions"] / r["macs_per_step"]
                                     if "first_step_instructions" in r else None),
            "ref/dsp": (base / r["instructions_per_step"]) if (base and r["kernels"] == "dsp") else None,
            "est. ms/sample": f"{r['est_ms_per_sample']:,.1f} @{r['clock_mhz']:.0f} MHz",
            "seed ms": r["seed_ms"] if r["seed_ms"] is not None else (SEED_MCUNET if r["model"] != "small-cnn"
                                                                      else None),
            "RAM plan/linked KB": f"{r['planned_ram'] / 1024:.1f} / {r['linked_ram'] / 1024:.1f}",
            "RAM diff": f"{r['ram_diff_pct']:+.1f}%",
            "Flash plan/linked KB": f"{r['planned_flash'] / 1024:.1f} / {r['linked_flash'] / 1024:.1f}",
            "Flash diff": f"{r['flash_diff_pct']:+.1f}%", "fits board": "yes" if r["fits_board"] else "no",
            "bit-exact": "yes" if r["bit_exact"] else "NO"})
    cols = list(table[0]) if table else ["model"]
    text = [
        "Training steps in C under QEMU (`mcutrain bench mcu`); untrained He-initialized models (PTQ on "
        "random inputs); one step of batch 2 per row, FQT four steps of one sample (per-sample figures "
        "average them), FQT int8 batch 8 and 32 and float32 batch 8 two steps each, counted without the "
        "first (which seeds the error ranges over the whole batch, once per training run): per sample "
        "and per MAC, the update (once per step, after the batch's gradients are summed) is divided over "
        "the step's samples. "
        "Instructions: exact counts inside "
        "`model_train_step`; ms are **estimates** from the instruction-mix model at the board's clock "
        "(M0+ rp2040 133 MHz, M4 nrf52840 64 MHz, M7 imxrt1062 600 MHz, M33 nrf5340 128 MHz, M55 alif-e3 "
        "400 MHz, RV32IMC esp32c3 and RV32IMAFC 160 MHz; the generic targets of M0+, M4 and M7 carry the "
        "same clocks). MACs per step are the planner's, ZO queries included. ref/dsp: instructions of the "
        "reference kernels over the DSP kernels. Seed ms: Deutel et al. (seed A) measured per sample for "
        "uint8 FQT (small CNN) — like for like only in FQT rows; MCUNet-5FPS: 192.6 ms (seed A, its "
        "MBedNet) to 377.6 ms (Lin et al.'s int8 SGD+M+QAS). RAM: planned (arena + trainable tensors + "
        "state + 8 KB stack allowance, on the board) vs linked (the library's data + bss in the ELF + the "
        "measured stack); Flash: planned (code estimated) vs the library's linked code, constants and "
        "initial data. Bit-exact: losses, logits and every state entry equal the simulator's after "
        "every step" + ("" if all(r["bit_exact"] for r in rows if "bit_exact" in r) else
                        " (rows marked NO do not; see `mismatch` in the JSON)") + ". Small-cnn rows train on "
        "Fashion-MNIST samples (when installed); FQT starts from ranges calibrated on uniform inputs.", "",
        "Batch > 1: instr/MAC is the steady step (every step after the first); the first step, beside it, "
        "also seeds each error tensor's range from the whole batch: one round per error tensor (four in "
        "small-cnn), each the backward pass of every sample down to that tensor, in sequence (a tensor's "
        "range needs the one above quantized with its own). The first round runs every sample's forward "
        "pass and keeps its small forward tensors (small-cnn: logits and fc1's output, 74 bytes per "
        "sample); rounds that read only those restore them, so small-cnn's first step runs three forward "
        "passes per sample (first round, the conv2 round, the step), not five. Batch-1 rows average their "
        "four steps.", "",
        files.markdown_table(table, cols, {"instr/MAC": ".2f", "first step instr/MAC": ".2f",
                                           "ref/dsp": ".2f"})]
    part = partial_table(rows)
    if part:
        text += ["", PARTIAL_TEXT, "", files.markdown_table(part, list(part[0]), {"step speedup": ".2f",
                                                                               "backward speedup": ".2f",
                                                                               "MACs ratio": ".2f"})]
        prof = profile_table(rows)
        if prof:
            what = f"{PROFILE_OF[0]} on {PROFILE_OF[1]} {PROFILE_OF[2]}"
            text += ["", f"Per-function profile of one step, {what} ({TRAINED}; instructions per step, "
                     "the largest in either):", "",
                     files.markdown_table(prof, list(prof[0]))]
    pend = {f"{r['model']} {r['setting']}": r["pending"] for r in rows if "pending" in r}
    if pend:
        by_why: dict[str, list[str]] = {}
        for what, why in pend.items():
            by_why.setdefault(why, []).append(what)
        text += ["", "Pending (not measurable in C yet):"] + [f"- {why}: {'; '.join(whats)}."
                                                            for why, whats in by_why.items()]
    failed = [f"{r['model']} {r['setting']} on {r['core']} {r['kernels']}: {r['error'].splitlines()[0]}"
              for r in rows if "error" in r]
    if failed:
        text += ["", "Failed (see `benchmarks/results/mcu.json`): " + "; ".join(failed) + "."]
    c = checks(rows)
    by_batch = c["m4_dsp_fqt_int8_instr_per_mac_by_batch"]
    c_first = c["m4_dsp_fqt_int8_first_step_instr_per_mac_by_batch"]
    steps = {b: f"{v:.2f} at batch {b}" + (f" (first step {c_first[b]:.2f})" if b in c_first else "")
             for b, v in by_batch.items()}
    text += ["", "Targets: M4 DSP FQT int8 step <= 1.5 instructions/MAC: "
             + (", ".join(steps.values())
                + f" ({'met' if c['m4_dsp_fqt_int8_target_met'] else 'NOT met'} at the training batch"
                + (f"; met at batch {', '.join(map(str, c['m4_dsp_fqt_int8_target_met_at_batch']))}"
                   if c["m4_dsp_fqt_int8_target_met_at_batch"] else "")
                + (f"; at batch 1 the float32 update alone is {c['m4_dsp_fqt_int8_update_per_mac']:.2f}/MAC"
                   if c["m4_dsp_fqt_int8_update_per_mac"] is not None else "") + ")" if by_batch
                else "pending (FQT in C)")
             + "; planner RAM within 5% of linked: worst "
             + (f"{c['worst_ram_diff_pct']:.1f}% ({'met' if c['ram_target_met'] else 'NOT met'})"
                if c["worst_ram_diff_pct"] is not None else "—") + "."]
    return "\n".join(text)


PARTIAL_TEXT = (
    f"Dynamic partial updates on the device (lambda_min 0.1): small-cnn from the state {WARMUP} simulated "
    "steps of partial training reach (Fashion-MNIST samples 0-199, one per step, lr 0.05; the largest "
    "loss seen is an earlier sample's, as in training), then the same four samples (200-203) with full "
    "and with partial updates, each bit-exact with the simulator. Per step: instructions of the whole "
    "step, of the backward kernels (error propagation, weight gradients, ReLU and pool masks, prescale, "
    "top-k) and of the rest (forward kernels excluded: loss, update, ranges, bias rescale, helpers); "
    "MACs ratio: the simulator's executed backward MACs (error + weight gradient), full / partial. The "
    "output layer always trains fully (seed A).")
PROFILE_OF = ("fqt int8, all 4 layers", "cortex-m4", "dsp")


def _precision(options: str) -> str:
    words = options.split()
    return words[words.index("--precision") + 1] if "--precision" in words else ""


def partial_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Full vs partial rows of the same trained state, per precision and core."""
    warm = {(r["options"], r["core"], r["kernels"]): r for r in rows
            if r.get("warmup_steps") and "bit_exact" in r}
    out = []
    for (opts, core, kern), p in warm.items():
        f = warm.get((opts.replace(" --partial 0.1", ""), core, kern))
        if "--partial" not in opts or f is None:
            continue
        fb, pb = f["instructions_by_phase"], p["instructions_by_phase"]
        fm, pm = f["sim_macs_per_step"], p["sim_macs_per_step"]
        out.append({"precision": _precision(opts), "core": f"{core.removeprefix('cortex-')} {kern}",
                    "instr/step full": f"{f['instructions_per_step'] / 1e6:,.2f} M",
                    "instr/step partial": f"{p['instructions_per_step'] / 1e6:,.2f} M",
                    "step speedup": f["instructions_per_step"] / p["instructions_per_step"],
                    "backward full / partial": f"{fb['backward'] / 1e6:,.2f} / {pb['backward'] / 1e6:,.2f} M",
                    "backward speedup": fb["backward"] / pb["backward"],
                    "rest full / partial": f"{fb['other'] / 1e6:,.2f} / {pb['other'] / 1e6:,.2f} M",
                    "forward": f"{fb['forward'] / 1e6:,.2f} M",
                    "MACs ratio": (fm["error"] + fm["weight_grad"]) / (pm["error"] + pm["weight_grad"]),
                    "bit-exact": "yes" if f["bit_exact"] and p["bit_exact"] else "NO"})
    return out


def profile_table(rows: list[dict[str, Any]], top: int = 14) -> list[dict[str, Any]]:
    """The per-function instructions of PROFILE_OF's full and partial rows side by side."""
    setting, core, kern = PROFILE_OF
    pick = {("--partial" in r["options"]): r for r in rows if r.get("per_function") and r["core"] == core
            and r["kernels"] == kern and r["setting"].startswith(setting)}
    if len(pick) < 2:
        return []
    full, part = pick[False]["per_function"], pick[True]["per_function"]
    names = sorted(set(full) | set(part), key=lambda k: -max(full.get(k, 0), part.get(k, 0)))[:top]
    return [{"function": f"`{k}`", "full": f"{full.get(k, 0):,.0f}", "partial": f"{part.get(k, 0):,.0f}"}
            for k in names]
