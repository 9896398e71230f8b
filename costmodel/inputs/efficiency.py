"""How close a kernel runs to the hardware's peak: the efficiencies of the step-time model, a few
named parameters per GPU generation (costmodel.evaluate.simulate.step_time uses them).

- `gemm`: a large BF16 GEMM's achieved FLOP/s over the GPU's dense BF16 peak (the compute roof
  of every weight GEMM; a small GEMM falls under the memory roof instead, at `hbm`);
  `gemm_fp8` the same for an FP8 GEMM over the dense FP8 peak (`fp8: hybrid`). Both are the
  large-GEMM limit: each GEMM runs at its shape's share of it (costmodel.inputs.gemm_efficiency).
- `attention_flash_forward`, `attention_flash_backward`: a flash-attention kernel's achieved
  FLOP/s over the peak, forward and backward (the backward counted as the kernel counts it,
  2.5 x the forward's FLOPs: the QK^T it recomputes included).
- `attention_eager`: unfused attention (two batched GEMMs around a softmax written to memory),
  forward and backward alike.
- `hbm`: achieved HBM bandwidth over the datasheet's, for memory-bound work (norms,
  activations, the optimizer step, MoE permutes, the loss).

The attention parameters are curves where a kernel benchmark is published
(costmodel.inputs.attention_kernels: the FlashAttention-2/-3 papers' TFLOP/s against sequence
length): `efficiencies` evaluates the scenario's kernel family's curve at its sequence length per
CP rank and head dim, and `Efficiency.at` at any length (the plan's layouts). The table's entry
is the curve at REFERENCE (4K tokens, head dim 128, the generation's flash family); its fitted
value is the fitted scale (costmodel.inputs.fitted's `attention`) times it, and the same scale
multiplies the curve at every length. A generation without a curve (CDNA3) keeps the flat
stated value.

One table, `EFFICIENCIES`, holds for each generation and parameter both values: the stated one,
a published measurement printed as its source prints it (the value is the source's figure over
the peak it names) or an assumption said to be one, and the fitted one, where the published-runs
benchmark has fitted it. The fitted values are written by `make calibrate`
(benchmarks/calibrate.py --library --write) into the generated module costmodel.inputs.fitted,
as the numbers the model uses: where a fit exists it replaces the stated value (`value`), which
stays as the starting point and the source. Nothing is derived from the stated values at import:
a stated value changed by hand moves nothing that was fitted (before, the fitted backward and
eager kernels were worked out at import as the fitted forward times the stated backward/forward
ratio, so raising the stated Hopper flash forward from 0.70 to 0.90 lowered the fitted backward
from 0.19 to 0.15 and the course's predicted step went from 47.14 s to 50.79 s; that ratio is the
fit's rule, applied by calibrate when it writes the fitted module). A scenario overrides any of
them with `gemm_efficiency`, `attention_efficiency` (the scenario's kernel, forward and backward)
and `hbm_efficiency`: its own value always wins.
"""

from __future__ import annotations

from costmodel.derive import plain
from costmodel.inputs import attention_kernels, fitted, hardware
from costmodel.records import frozen_dataclass

#: Where a table's attention entry is read off its curve (no scenario): tokens per CP rank,
#: head dim, kernel.
REFERENCE = {"seq_len": 4096, "head_dim": 128, "attention_kernel": "flash"}


@frozen_dataclass
class Efficiency:
    """One efficiency of the step-time model (a fraction of the peak, in (0, 1]): the stated
    value and its source, and the fitted one and its source where a fit exists (or a scenario's
    value, stated by the scenario). `value` is the one the model uses: the fitted where there is
    one, else the stated."""

    stated: float
    stated_source: str
    fitted: float | None = None
    fitted_source: str = ""
    #: An attention kernel's published curve: ((tokens per CP rank, fraction of peak), ...), of
    #: which `stated` is one point; () for a flat value.
    curve: tuple = ()
    #: The fitted scale on the curve (`fitted` is it times `stated`); None: not fitted.
    scale: float | None = None

    @property
    def value(self) -> float:
        return self.stated if self.fitted is None else self.fitted

    def at(self, seq_len):
        """The value at `seq_len` tokens per CP rank (a number or a NumPy array of them): the
        curve times the fitted scale, or the flat value."""
        if not self.curve:
            return self.value
        return (self.scale or 1.0) * attention_kernels.interpolate(self.curve, seq_len)

    @property
    def best(self) -> float:
        """The highest value at any length (the plan's lower bounds of a step)."""
        if not self.curve:
            return self.value
        return (self.scale or 1.0) * max(v for _, v in self.curve)

    @property
    def source(self) -> str:
        return self.stated_source if self.fitted is None else self.fitted_source


#: The parameters, in the order the report shows them.
NAMES = (
    "gemm",
    "gemm_fp8",
    "attention_flash_forward",
    "attention_flash_backward",
    "attention_eager",
    "hbm",
)

_MAMF = (
    "Maximum Achievable Matmul FLOPS, BF16, stas00/ml-engineering "
    "compute/accelerator/README.md ('Maximum Achievable Matmul FLOPS comparison table'): {}"
)
_MAMF8 = (
    "Maximum Achievable Matmul FLOPS, FP8 (float8_e4m3fn), stas00/ml-engineering "
    "compute/accelerator/README.md: {}"
)
_HBM = (
    "assumed: 0.8 of the datasheet bandwidth for streaming elementwise kernels (an H100 "
    "coalesced load measured at 2.8 of 3.35 TB/s, 84%, mikamirai.com 'GPU Memory Bandwidth'); "
    "to be fitted"
)

#: The stated values: generation -> parameter -> (value, source); the attention parameters only
#: where no kernel curve is published (costmodel.inputs.attention_kernels: the others').
STATED: dict[str, dict[str, tuple[float, str]]] = {
    "ampere": {
        "gemm": (0.869, _MAMF.format("NVIDIA A100 SXM 271.2 of 312 TFLOPS, 86.9%")),
        "gemm_fp8": (0.869, "unused: Ampere has no FP8 tensor cores (the BF16 value)"),
        "hbm": (0.8, _HBM),
    },
    "hopper": {
        "gemm": (0.803, _MAMF.format("NVIDIA H100 SXM 794.5 of 989 TFLOPS, 80.3%")),
        "gemm_fp8": (0.709, _MAMF8.format("NVIDIA H100 SXM 1402.6 of 1979 TFLOPS, 70.9%")),
        "hbm": (0.8, _HBM),
    },
    "blackwell": {
        "gemm": (0.776, _MAMF.format("NVIDIA B200 SXM 1745.0 of 2250 TFLOPS, 77.6%")),
        "gemm_fp8": (0.763, _MAMF8.format("NVIDIA B200 SXM 3432.5 of 4500 TFLOPS, 76.3%")),
        "hbm": (0.8, _HBM),
    },
    "ada": {
        "gemm": (0.803, "assumed: Hopper's (no L40S figure recorded)"),
        "gemm_fp8": (0.709, "assumed: Hopper's (no L40S figure recorded)"),
        "hbm": (0.8, _HBM),
    },
    "cdna3": {
        "gemm": (0.514, _MAMF.format("AMD MI300X 668.4 of 1300 TFLOPS, 51.4%")),
        "gemm_fp8": (0.514, "assumed: the BF16 value (the FP8 table has no MI300X figure)"),
        "attention_flash_forward": (0.50, "assumed: no MI300X figure recorded"),
        "attention_flash_backward": (0.40, "assumed: no MI300X figure recorded"),
        "attention_eager": (0.10, "assumed: no MI300X figure recorded"),
        "hbm": (0.8, _HBM),
    },
}


#: The attention kernels' parameters (the scenario's `attention_efficiency` sets them all).
ATTENTION = ("attention_flash_forward", "attention_flash_backward", "attention_eager")


def attention_entry(gen: str, name: str, values: dict, scale=(None, "")) -> Efficiency | None:
    """An attention parameter off its published curve (attention_kernels.curve) for `values`'
    kernel, head dim and tokens per CP rank (REFERENCE where absent), times a fitted `scale`
    ((scale, source); None: unfitted); None where the generation has no curve for it."""
    kernel = values.get("attention_kernel") or REFERENCE["attention_kernel"]
    kernel = "eager" if name == "attention_eager" else kernel
    if attention_kernels.KIND[kernel] == "eager" and name != "attention_eager":
        kernel = REFERENCE["attention_kernel"]  # the flash entries of an eager scenario
    heads, width = values.get("num_heads"), values.get("attention_dim")
    head_dim = values.get("head_dim") or (
        plain.head_width(width, heads) if heads and width else None
    )
    direction = "backward" if name.endswith("backward") else "forward"
    got = attention_kernels.curve(gen, kernel, head_dim or REFERENCE["head_dim"], direction)
    if got is None:
        return None
    points, source = got
    seq = (values.get("seq_len") or REFERENCE["seq_len"]) / (values.get("context_parallel") or 1)
    stated = attention_kernels.interpolate(points, seq)
    where = f"{source}; at {seq:g} tokens per CP rank"
    if scale[0] is None:
        return Efficiency(stated, where, curve=points)
    return Efficiency(stated, where, scale[0] * stated, scale[1], points, scale[0])


def _entry(gen: str, name: str) -> Efficiency:
    """A table entry: the stated value (an attention kernel's off its curve at REFERENCE where
    one is published, else STATED's) with the fitted one of costmodel.inputs.fitted."""
    got = fitted.FITTED.get(gen, {})
    if name in ATTENTION:
        curved = attention_entry(gen, name, REFERENCE, got.get("attention", (None, "")))
        if curved is not None:
            return curved
    return Efficiency(*STATED[gen][name], *got.get(name, (None, "")))


#: The one table: per generation and parameter, the stated value and, where `make calibrate`
#: has fitted one (costmodel.inputs.fitted), the fitted value that replaces it.
EFFICIENCIES: dict[str, dict[str, Efficiency]] = {
    gen: {name: _entry(gen, name) for name in NAMES} for gen in STATED
}


#: Scenario keys that override a parameter (null: the generation's value).
OVERRIDES = {
    "gemm_efficiency": ("gemm", "gemm_fp8"),
    "attention_efficiency": ATTENTION,
    "hbm_efficiency": ("hbm",),
}


def generation(gpu: str) -> str:
    """The generation of a GPU of the table (hardware.GPUS)."""
    return hardware.GPUS[gpu].generation


def efficiencies(values: dict) -> dict[str, Efficiency]:
    """The parameters for a scenario's values: its GPU generation's (fitted where recorded),
    the attention kernels' off their curves at the scenario's kernel, head dim and tokens per
    CP rank (the table's fitted scale kept), each overridden by the scenario's key when that is
    not null."""
    gen = generation(values["gpu"])
    out = dict(EFFICIENCIES[gen])
    for name in ATTENTION:
        entry = out[name]
        if entry.curve:
            scale = (entry.scale, entry.fitted_source)
            out[name] = attention_entry(gen, name, values, scale) or entry
    for key, names in OVERRIDES.items():
        if values.get(key) is not None:
            for name in names:
                out[name] = Efficiency(float(values[key]), f"scenario ({key})")
    return out
