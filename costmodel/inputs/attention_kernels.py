"""Published attention-kernel speeds: achieved TFLOP/s against sequence length, per GPU
generation, kernel family, head dim, causal mask and direction, each curve with its source.

The step-time model's attention efficiency is `efficiency(...)`: the curve's TFLOP/s at the
sequence length one CP rank's kernel sees, over the dense BF16 peak of the card the curve was
measured on (costmodel.inputs.hardware). Between two published lengths it is interpolated
linearly in log(seq_len); beyond the shortest and the longest published length it stays at the
end value (flat: no figure goes past 16K, and the curves have flattened by 8K-16K). The head dim
is taken linearly between the two published head dims around the model's (the end one beyond
them; an assumption: no figure publishes a head dim between); the mask is the one the model
times the kernel under (a flash family skips the masked half, eager computes the whole square:
`CAUSAL`), the other mask's curve where only that one is published. The figures count FLOPs as
the papers' benchmark does (4 s^2 d per head forward, halved under a causal mask; backward 2.5x
the forward), which is how costmodel.evaluate.simulate.compute_time counts the kernel's work.

`attention_kernel` names the family (`FAMILIES`); the older value `flash` means the
generation's flash family (`FLASH_DEFAULT`: FlashAttention-2 on Ampere and Ada,
FlashAttention-3 on Hopper and Blackwell); `eager` is unfused attention (PyTorch's "standard
attention"). A generation without a curve of its own borrows another's fractions of peak
(`BORROWED`, an assumption said in the source); a family with no curve anywhere (CDNA3) keeps
the flat stated value of costmodel.inputs.efficiency.

Plain Python (costmodel report|params|gemms import no NumPy); `interpolate` also takes a NumPy
array of lengths (the plan's layouts), through NumPy's own functions, imported only then.
"""

from __future__ import annotations

import math

from costmodel.inputs import hardware

#: The families `attention_kernel` names, with what each is.
FAMILIES = {
    "flash2": "FlashAttention-2 (Dao, arXiv:2307.08691)",
    "flash3": "FlashAttention-3 (Shah et al., arXiv:2407.08608)",
    "cudnn": "cuDNN fused attention (Transformer Engine's fused attention backend)",
    "eager": "unfused attention: two batched GEMMs around a softmax written to memory",
}
#: What each `attention_kernel` value computes: a flash kernel (tiles, scores recomputed in
#: the backward) or eager attention (scores kept). The older value `flash` is a flash kernel.
KIND = {"eager": "eager", "flash": "flash", "flash2": "flash", "flash3": "flash", "cudnn": "flash"}
#: The family the older value `flash` means on each generation.
FLASH_DEFAULT = {
    "ampere": "flash2",
    "ada": "flash2",
    "hopper": "flash3",
    "blackwell": "flash3",
    "cdna3": "flash2",
}
#: Whether the model times a kernel kind under a causal mask (the masked half skipped).
CAUSAL = {"flash": True, "eager": False}
#: A generation with no published curve borrows another's fractions of peak (assumed).
BORROWED = {"ada": "ampere", "blackwell": "hopper"}
#: The card each generation's curves were measured on (its dense BF16 peak is the 100%).
MEASURED_ON = {"ampere": "A100-80GB", "hopper": "H100-SXM"}

_FA2_FIG = (
    "FlashAttention-2 (Dao, arXiv:2307.08691), Figure 4 'Attention forward + backward speed "
    "(A100 80GB SXM4)', ({}); the same figure is Dao-AILab/flash-attention "
    "assets/flash2_a100_fwd_bwd_benchmark.png (commit 4f285b35); bar labels read off the image"
)
_FA2_H100 = (
    "Dao-AILab/flash-attention assets/flash2_h100_fwd_bwd_benchmark.png (commit 4f285b35), "
    "'Attention forward + backward speed (H100 80GB SXM5)', ({}); bar labels read off the image"
)
_FA3_FWD = (
    "FlashAttention-3 (Shah et al., arXiv:2407.08608), Figure 5 'Attention forward speed "
    "(FP16/BF16) on H100 80GB SXM5', panel {}; the same figure is Dao-AILab/flash-attention "
    "assets/flash3_fp16_fwd.png (commit 7ef24848); bar labels read off the image"
)
_FA3_BWD = (
    "FlashAttention-3 (Shah et al., arXiv:2407.08608), Figure 6 'Attention backward speed "
    "(FP16/BF16) on H100 80GB SXM5', head dim 128, without causal mask; bar labels as "
    "transcribed from the figure's image (subtext.edge.nugit.net), not re-read here"
)
_BOTH = (
    "; the forward + backward figure: forward and backward each at it (their sum of times is "
    "the figure's)"
)

_LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)


def _points(tflops: tuple, lengths: tuple = _LENGTHS) -> tuple[tuple[int, float], ...]:
    """(seq_len, TFLOP/s) pairs; a None value (a bar the figure hides) is left out."""
    return tuple((s, float(v)) for s, v in zip(lengths, tflops) if v is not None)


#: generation -> family -> (head_dim, causal, direction) -> ((seq_len, TFLOP/s), ...), source.
#: direction: "forward", "backward", or "both" (a forward + backward figure: both passes).
CURVES: dict[str, dict[str, dict[tuple[int, bool, str], tuple[tuple, str]]]] = {
    "ampere": {
        "flash2": {
            (64, False, "both"): (
                _points((132, 153, 162, 171, 175, 176)),
                _FA2_FIG.format(
                    "a) without causal mask, head dimension 64; the 1k label is "
                    "partly hidden by the legend, read as 153"
                )
                + _BOTH,
            ),  # fmt: skip
            (128, False, "both"): (
                _points((None, 173, 187, 196, 201, 203)),
                _FA2_FIG.format(
                    "b) without causal mask, head dimension 128; the 512 bar is "
                    "hidden by the legend and left out, the 1k label read through "
                    "it as 173"
                )
                + _BOTH,
            ),  # fmt: skip
            (64, True, "both"): (
                _points((88, 119, 140, 156, 165, 171)),
                _FA2_FIG.format("c) with causal mask, head dimension 64") + _BOTH,
            ),
            (128, True, "both"): (
                _points((99, 133, 155, 173, 182, 189)),
                _FA2_FIG.format("d) with causal mask, head dimension 128") + _BOTH,
            ),
        },
        "eager": {
            (64, False, "both"): (
                _points((36, 40, 43, 45, 46)),
                _FA2_FIG.format("a) 'Pytorch', head dimension 64; out of memory at 16k") + _BOTH,
            ),
            (128, False, "both"): (
                _points((53, 67, 76, 79, 86)),
                _FA2_FIG.format("b) 'Pytorch', head dimension 128; out of memory at 16k") + _BOTH,
            ),
        },
    },
    "hopper": {
        "flash3": {
            (64, False, "forward"): (
                _points((333, 392, 460, 476, 496, 497)),
                _FA3_FWD.format("(a) forward, without causal mask, head dim 64"),
            ),
            (64, True, "forward"): (
                _points((197, 265, 371, 420, 460, 473)),
                _FA3_FWD.format("(b) forward, with causal mask, head dim 64"),
            ),
            (128, False, "forward"): (
                _points((467, 565, 625, 638, 646, 648)),
                _FA3_FWD.format("(c) forward, without causal mask, head dim 128"),
            ),
            (128, True, "forward"): (
                _points((292, 423, 521, 579, 602, 616)),
                _FA3_FWD.format("(d) forward, with causal mask, head dim 128"),
            ),
            (256, False, "forward"): (
                _points((482, 639, 707, 736, 746, 756)),
                _FA3_FWD.format(
                    "(e) forward, without causal mask, head dim 256; the 1k label "
                    "is hidden by the legend, 639 as transcribed elsewhere"
                ),
            ),  # fmt: skip
            (256, True, "forward"): (
                _points((286, 427, 537, 612, 628, 642)),
                _FA3_FWD.format("(f) forward, with causal mask, head dim 256"),
            ),
            (128, False, "backward"): (_points((316, 424, 501, 542, 559, 561)), _FA3_BWD),
        },
        "cudnn": {
            (64, False, "forward"): (
                _points((335, 373, 395, 408, 412, 413)),
                _FA3_FWD.format("(a) 'cuDNN', forward, without causal mask, head dim 64"),
            ),
            (64, True, "forward"): (
                _points((225, 288, 334, 363, 379, 388)),
                _FA3_FWD.format("(b) 'cuDNN', forward, with causal mask, head dim 64"),
            ),
            (128, False, "forward"): (
                _points((497, 574, 617, 609, 600, 595)),
                _FA3_FWD.format("(c) 'cuDNN', forward, without causal mask, head dim 128"),
            ),
            (128, True, "forward"): (
                _points((315, 410, 484, 518, 529, 539)),
                _FA3_FWD.format("(d) 'cuDNN', forward, with causal mask, head dim 128"),
            ),
            (128, False, "backward"): (
                _points((305, 408, 465, 499, 518, 516)),
                _FA3_BWD.replace("; bar labels", ", 'cuDNN'; bar labels"),
            ),
        },
        "flash2": {
            (64, False, "both"): (
                _points((215, 254, 274, 288, 294, 296)),
                _FA2_H100.format("a) without causal mask, head dimension 64") + _BOTH,
            ),
            (128, False, "both"): (
                _points((248, 294, 320, 326, 335, 338)),
                _FA2_H100.format("b) without causal mask, head dimension 128") + _BOTH,
            ),
            (64, True, "both"): (
                _points((141, 192, 232, 257, 273, 284)),
                _FA2_H100.format("c) with causal mask, head dimension 64") + _BOTH,
            ),
            (128, True, "both"): (
                _points((163, 221, 265, 294, 308, 328)),
                _FA2_H100.format("d) with causal mask, head dimension 128") + _BOTH,
            ),
        },
        "eager": {
            (64, False, "forward"): (
                _points((52, 63, 67, 72, 73)),
                _FA3_FWD.format("(a) 'Standard attention', head dim 64; out of memory at 16k"),
            ),
            (128, False, "forward"): (
                _points((74, 100, 119, 133, 139)),
                _FA3_FWD.format("(c) 'Standard attention', head dim 128; out of memory at 16k"),
            ),
        },
    },
}


def family(kernel: str, generation: str) -> str:
    """The family an `attention_kernel` value names on a generation (`flash`: FLASH_DEFAULT)."""
    return FLASH_DEFAULT.get(generation, "flash2") if kernel == "flash" else kernel


def interpolate(points, seq_len):
    """The value at `seq_len` of a curve of (seq_len, value) points in increasing length:
    linear in log(seq_len) between two points, the end value beyond either end. `seq_len` may
    be a NumPy array (elementwise, with NumPy's log and clip)."""
    if hasattr(seq_len, "shape"):  # an array (the plan's layouts): NumPy is loaded already
        import numpy as np

        log, clip = np.log, lambda t: np.clip(t, 0.0, 1.0)
    else:
        log, clip = math.log, lambda t: min(1.0, max(0.0, t))
    x = log(seq_len)
    out = points[0][1]
    for (s0, v0), (s1, v1) in zip(points, points[1:]):
        out = out + (v1 - v0) * clip((x - math.log(s0)) / math.log(s1 / s0))
    return out


def curve(generation: str, kernel: str, head_dim: float, direction: str):
    """((seq_len, fraction of the dense peak), ...) and its source for a kernel on a
    generation, or None where no curve is recorded: the family's curves of the generation (or
    of the one it borrows from), the mask the kernel kind is timed under (`CAUSAL`), the
    direction (a forward + backward figure serves both), at the model's head dim (`_at_head_dim`:
    linear between the two published head dims around it, the end one beyond them)."""
    fam = family(kernel, generation)
    owner = generation if generation in CURVES else BORROWED.get(generation)
    curves = CURVES.get(owner, {}).get(fam)
    if not curves:
        return None
    causal = CAUSAL[KIND[kernel]]
    usable = [key for key in curves if key[2] in (direction, "both")]
    if not usable:
        return None
    mask = causal if any(key[1] == causal for key in usable) else not causal
    by_dim = {}  # head dim -> (points, source): the direction's own over a "both" figure
    for key in sorted(usable, key=lambda k: k[2] == direction):
        if key[1] == mask:
            by_dim[key[0]] = curves[key]
    points, dims, sources = _at_head_dim(by_dim, head_dim)
    peak = hardware.GPUS[MEASURED_ON[owner]].bf16_flops / 1e12
    scaled = tuple((s, v / peak) for s, v in points)
    where = f"{FAMILIES[fam]}, {dims}, {'causal' if mask else 'no mask'}"
    if mask != causal:
        where += f" (no {'causal' if causal else 'unmasked'} curve published: the other mask's)"
    note = f"; {owner}'s curve, assumed for {generation}" if owner != generation else ""
    return scaled, f"{where}, over the {MEASURED_ON[owner]}'s dense BF16 peak: {sources}{note}"


def _at_head_dim(by_dim: dict, head_dim: float) -> tuple[tuple, str, str]:
    """The curve at `head_dim` from the published ones (head dim -> (points, source)): a
    published head dim's own; between two published head dims, each length's value linear in
    the head dim between the two curves' (interpolated in log length on the union of their
    lengths: an assumption, the figures publish no head dim between); beyond the smallest or
    the largest, that end's curve. Returns the points, the head dims said, the sources."""
    dims = sorted(by_dim)
    below = max((d for d in dims if d <= head_dim), default=dims[0])
    above = min((d for d in dims if d >= head_dim), default=dims[-1])
    if below == above:
        points, source = by_dim[below]
        return points, f"head dim {below}", source
    (low, low_source), (high, high_source) = by_dim[below], by_dim[above]
    w = (head_dim - below) / (above - below)
    lengths = sorted({s for s, _ in low} | {s for s, _ in high})
    points = tuple((s, (1 - w) * interpolate(low, s) + w * interpolate(high, s)) for s in lengths)
    said = (
        f"head dim {head_dim:g} (linear between head dim {below} and {above}, {w:.2f} of the way)"
    )
    return points, said, f"{low_source}; {high_source}"
