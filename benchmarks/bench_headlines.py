"""The recorded figures (``recorded.py``: benchmarks/results/<script>.json, docs/benchmarks.md)
of the benchmarks whose modules are the formulas they check: megatron_flops.py, megatron_memory.py
and published_runs.py. Kept apart so that those modules stay what their docstrings describe; each
one's ``__main__`` records through here after printing (a test that calls its ``main`` records
nothing)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import recorded as rec  # noqa: E402  (benchmarks/ is not a package)


def megatron_flops() -> list[dict[str, Any]]:
    """Per model: the MFU a Megatron-LM log would print (padded and packed, the MTP layer not
    counted) beside costmodel's 6ND MFU of the same run, and the attention core's count against
    costmodel's causal count (packed)."""
    import megatron_flops as mf

    from costmodel.derive.attention import attention_training_flops
    from costmodel.evaluate.account.account import account
    from costmodel.inputs import models
    from costmodel.inputs.scenario import resolve

    out, run = [], f"{mf.SAMPLES} samples of {mf.MEAN_LEN:,} mean tokens on {mf.NUM_GPUS} GPUs"
    for preset in ("qwen3.6-35b-a3b", "llama-3.1-8b"):
        shape = models.load_shape(preset)
        for mode, kw in mf._modes().items():
            mfu = mf._mfu(mf.megatron_flops(shape, count_mtp=False, **kw))
            out.append(rec.figure(f"{preset}: Megatron's MFU, {mode}", mfu * 100, "%", 2,
                                  f"num_floating_point_operations re-implemented, {run}, "
                                  f"{mf.STEP_TIME:g} s a step"))  # fmt: skip
        mfu = account(resolve(overrides={"model": preset}))["mfu"]
        out.append(rec.figure(f"{preset}: costmodel's MFU (6ND)", mfu * 100, "%", 2,
                              f"the same run by costmodel's account: real tokens, {run}"))  # fmt: skip
        terms = mf.megatron_terms(mf.megatron_args(shape), **mf._modes()["packed"])
        causal = attention_training_flops(mf.MEAN_LEN, shape.attention_dim,
                                          shape.num_full_attention_layers, mf.SAMPLES, "causal")  # fmt: skip
        out.append(rec.figure(f"{preset}: attention core, Megatron / costmodel (causal)",
                              terms["attention_core"] / causal, "x", 4,
                              "the packed run's attention-core FLOPs, both counts"))  # fmt: skip
    return out


def megatron_memory() -> list[dict[str, Any]]:
    """Per published layout: the total GiB per GPU of Megatron-LM's theoretical-memory formula
    and of costmodel's memory model."""
    import megatron_memory as mm

    out = []
    for layout in mm.LAYOUTS:
        mega = (mm.megatron_weight_and_optimizer_bytes(layout.megatron)
                + mm.megatron_activation_bytes(layout.megatron)["total"])  # fmt: skip
        ours = mm.costmodel_memory(layout)["total"]
        note = f"per GPU, {layout.source}"
        out.append(rec.figure(f"{layout.name}: Megatron formula, total", mega / mm.GIB, "GiB", 2,
                              note))  # fmt: skip
        out.append(rec.figure(f"{layout.name}: costmodel, total", ours / mm.GIB, "GiB", 2, note))
    return out


def published_runs(found: list, found_steps: list) -> list[dict[str, Any]]:
    """The memory verdicts' counts and ratio, and per predictor the held-out rows' |error| of
    the step time and the Korthikanti rows' mean |error| (published_runs' own statistics)."""
    import statistics

    import published_runs as pr

    fit = sum(v.fits for v in found)
    unexplained = sum(not v.fits and not v.explained for v in found)
    ratios = [v.peak / v.measured for v in found if v.measured and v.peak]
    out = [rec.figure("memory: runs that fit as stated", fit, "", 0,
                      f"of {len(found)} published runs, each of which trained"),
           rec.figure("memory: runs that neither fit nor are explained", unexplained, "", 0,
                      "every run trained: one that does not fit as stated needs a named "
                      "convention (EXPLAINED) under which it fits",
                      at_most=0),
           rec.figure("memory: predicted / measured peak, median", statistics.median(ratios),
                      "x", 2, f"the {len(ratios)} rows whose source prints its memory (max "
                      "reserved: the allocator's cache included)")]  # fmt: skip
    held = [s for s in found_steps if not s.fitted]
    for name in found_steps[0].predicted if found_steps else ():
        errors = [e for s in held if (e := s.relative_error(name)) is not None]
        stats = pr.error_stats(errors)
        for label, value in zip(("median", "p90"), stats or ()):
            out.append(rec.figure(f"step time, {name}: held-out {label} |error|", value * 100,
                                  "%", 1, f"{len(errors)} rows the hash split holds out "
                                  "(calibrate.split; the secondary figure to loso's)"))  # fmt: skip
        kort = [s for s in found_steps if s.id in pr.CALCULON]
        kort_errors = [abs(e) for s in kort if (e := s.relative_error(name)) is not None]
        if kort_errors and len(kort_errors) == len(kort):
            out.append(rec.figure(f"step time, {name}: Korthikanti Table 5 mean |error|",
                                  sum(kort_errors) / len(kort) * 100, "%", 2,
                                  f"its {len(kort)} rows (split as any row)"))  # fmt: skip
    return out


#: script -> the function that gives its figures without arguments.
STANDALONE = {"megatron_flops": megatron_flops, "megatron_memory": megatron_memory}


def record(script: str, *args) -> None:
    figures = STANDALONE[script]() if script in STANDALONE else published_runs(*args)
    rec.record(script, figures)
