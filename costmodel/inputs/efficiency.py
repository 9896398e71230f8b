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

from costmodel.inputs import fitted, hardware
from costmodel.records import frozen_dataclass


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

    @property
    def value(self) -> float:
        return self.stated if self.fitted is None else self.fitted

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
_FA2 = (
    "FlashAttention-2 (Dao, arXiv:2307.08691), abstract: 'reaching 50-73% of the theoretical "
    "maximum FLOPs/s on A100'; {}"
)
_FA3 = (
    "FlashAttention-3 (Shah et al., arXiv:2407.08608), abstract: 'FP16 reaching up to 740 "
    "TFLOPs/s (75% utilization)' on H100; {}"
)
_EAGER = (
    "FlashAttention-2 (arXiv:2307.08691) reports the flash kernel several times faster than "
    "standard PyTorch attention (a softmax written to memory between two batched GEMMs); "
    "{} of the flash forward, an assumption to be fitted"
)
_HBM = (
    "assumed: 0.8 of the datasheet bandwidth for streaming elementwise kernels (an H100 "
    "coalesced load measured at 2.8 of 3.35 TB/s, 84%, mikamirai.com 'GPU Memory Bandwidth'); "
    "to be fitted"
)

#: The stated values: generation -> parameter -> (value, source).
STATED: dict[str, dict[str, tuple[float, str]]] = {
    "ampere": {
        "gemm": (0.869, _MAMF.format("NVIDIA A100 SXM 271.2 of 312 TFLOPS, 86.9%")),
        "gemm_fp8": (0.869, "unused: Ampere has no FP8 tensor cores (the BF16 value)"),
        "attention_flash_forward": (
            0.70,
            _FA2.format("forward taken at 0.70, near the top of that range"),
        ),
        "attention_flash_backward": (
            0.55,
            _FA2.format("backward taken at 0.55 (the backward is the slower pass)"),
        ),
        "attention_eager": (0.15, _EAGER.format("about 1/5")),
        "hbm": (0.8, _HBM),
    },
    "hopper": {
        "gemm": (0.803, _MAMF.format("NVIDIA H100 SXM 794.5 of 989 TFLOPS, 80.3%")),
        "gemm_fp8": (0.709, _MAMF8.format("NVIDIA H100 SXM 1402.6 of 1979 TFLOPS, 70.9%")),
        "attention_flash_forward": (
            0.70,
            _FA3.format("forward taken at 0.70, below that peak shape's 75%"),
        ),
        "attention_flash_backward": (
            0.55,
            _FA3.format("backward taken at 0.55 (the paper's backward is slower)"),
        ),
        "attention_eager": (0.15, _EAGER.format("about 1/5")),
        "hbm": (0.8, _HBM),
    },
    "blackwell": {
        "gemm": (0.776, _MAMF.format("NVIDIA B200 SXM 1745.0 of 2250 TFLOPS, 77.6%")),
        "gemm_fp8": (0.763, _MAMF8.format("NVIDIA B200 SXM 3432.5 of 4500 TFLOPS, 76.3%")),
        "attention_flash_forward": (
            0.70,
            "assumed: Hopper's (FlashAttention-3); no Blackwell figure recorded yet",
        ),
        "attention_flash_backward": (
            0.55,
            "assumed: Hopper's (FlashAttention-3); no Blackwell figure recorded yet",
        ),
        "attention_eager": (0.15, _EAGER.format("about 1/5")),
        "hbm": (0.8, _HBM),
    },
    "ada": {
        "gemm": (0.803, "assumed: Hopper's (no L40S figure recorded)"),
        "gemm_fp8": (0.709, "assumed: Hopper's (no L40S figure recorded)"),
        "attention_flash_forward": (0.70, _FA2.format("assumed as on A100")),
        "attention_flash_backward": (0.55, _FA2.format("assumed as on A100")),
        "attention_eager": (0.15, _EAGER.format("about 1/5")),
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


#: The one table: per generation and parameter, the stated value and, where `make calibrate`
#: has fitted one (costmodel.inputs.fitted), the fitted value that replaces it.
EFFICIENCIES: dict[str, dict[str, Efficiency]] = {
    gen: {
        name: Efficiency(value, source, *fitted.FITTED.get(gen, {}).get(name, (None, "")))
        for name, (value, source) in stated.items()
    }
    for gen, stated in STATED.items()
}


#: The attention kernels' parameters (the scenario's `attention_efficiency` sets them all).
ATTENTION = ("attention_flash_forward", "attention_flash_backward", "attention_eager")
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
    each overridden by the scenario's key when that is not null."""
    out = dict(EFFICIENCIES[generation(values["gpu"])])
    for key, names in OVERRIDES.items():
        if values.get(key) is not None:
            for name in names:
                out[name] = Efficiency(float(values[key]), f"scenario ({key})")
    return out
