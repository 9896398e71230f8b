"""How close a kernel runs to the hardware's peak: the efficiencies of the step-time model, a few
named parameters per GPU generation (costmodel.evaluate.step_time uses them).

- `gemm`: a large BF16 GEMM's achieved FLOP/s over the GPU's dense BF16 peak (the compute roof
  of every weight GEMM; a small GEMM falls under the memory roof instead, at `hbm`);
  `gemm_fp8` the same for an FP8 GEMM over the dense FP8 peak (`fp8: hybrid`).
- `attention_flash_forward`, `attention_flash_backward`: a flash-attention kernel's achieved
  FLOP/s over the peak, forward and backward (the backward counted as the kernel counts it,
  2.5 x the forward's FLOPs: the QK^T it recomputes included).
- `attention_eager`: unfused attention (two batched GEMMs around a softmax written to memory),
  forward and backward alike.
- `hbm`: achieved HBM bandwidth over the datasheet's, for memory-bound work (norms,
  activations, the optimizer step, MoE permutes, the loss).

Each value says where it comes from: a published measurement, printed as its source prints it
(the value is the source's figure over the peak it names), or "fitted on rows ..." once the
published-runs benchmark (benchmarks/calibrate.py) has fitted it; `FITTED` is the place for the
fitted values, which then replace the published ones. A scenario overrides them with
`gemm_efficiency`, `attention_efficiency` (the scenario's kernel, forward and backward) and
`hbm_efficiency`.
"""

from __future__ import annotations

from costmodel.inputs import hardware
from costmodel.records import frozen_dataclass


@frozen_dataclass
class Efficiency:
    """One efficiency of the step-time model: a fraction of the peak, and its source."""

    value: float  # a fraction of the peak, in (0, 1]
    source: str


#: The parameters, in the order the report shows them.
NAMES = (
    "gemm",
    "gemm_fp8",
    "attention_flash_forward",
    "attention_flash_backward",
    "attention_eager",
    "hbm",
)
#: The generations the project has values for (GPU.generation); the first three are fitted.
GENERATIONS = ("ampere", "hopper", "blackwell", "ada", "cdna3")

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

EFFICIENCIES: dict[str, dict[str, Efficiency]] = {
    "ampere": {
        "gemm": Efficiency(0.869, _MAMF.format("NVIDIA A100 SXM 271.2 of 312 TFLOPS, 86.9%")),
        "gemm_fp8": Efficiency(0.869, "unused: Ampere has no FP8 tensor cores (the BF16 value)"),
        "attention_flash_forward": Efficiency(
            0.70, _FA2.format("forward taken at 0.70, near the top of that range")
        ),
        "attention_flash_backward": Efficiency(
            0.55, _FA2.format("backward taken at 0.55 (the backward is the slower pass)")
        ),
        "attention_eager": Efficiency(0.15, _EAGER.format("about 1/5")),
        "hbm": Efficiency(0.8, _HBM),
    },
    "hopper": {
        "gemm": Efficiency(0.803, _MAMF.format("NVIDIA H100 SXM 794.5 of 989 TFLOPS, 80.3%")),
        "gemm_fp8": Efficiency(
            0.709, _MAMF8.format("NVIDIA H100 SXM 1402.6 of 1979 TFLOPS, 70.9%")
        ),
        "attention_flash_forward": Efficiency(
            0.70, _FA3.format("forward taken at 0.70, below that peak shape's 75%")
        ),
        "attention_flash_backward": Efficiency(
            0.55, _FA3.format("backward taken at 0.55 (the paper's backward is slower)")
        ),
        "attention_eager": Efficiency(0.15, _EAGER.format("about 1/5")),
        "hbm": Efficiency(0.8, _HBM),
    },
    "blackwell": {
        "gemm": Efficiency(0.776, _MAMF.format("NVIDIA B200 SXM 1745.0 of 2250 TFLOPS, 77.6%")),
        "gemm_fp8": Efficiency(
            0.763, _MAMF8.format("NVIDIA B200 SXM 3432.5 of 4500 TFLOPS, 76.3%")
        ),
        "attention_flash_forward": Efficiency(
            0.70, "assumed: Hopper's (FlashAttention-3); no Blackwell figure recorded yet"
        ),
        "attention_flash_backward": Efficiency(
            0.55, "assumed: Hopper's (FlashAttention-3); no Blackwell figure recorded yet"
        ),
        "attention_eager": Efficiency(0.15, _EAGER.format("about 1/5")),
        "hbm": Efficiency(0.8, _HBM),
    },
    "ada": {
        "gemm": Efficiency(0.803, "assumed: Hopper's (no L40S figure recorded)"),
        "gemm_fp8": Efficiency(0.709, "assumed: Hopper's (no L40S figure recorded)"),
        "attention_flash_forward": Efficiency(0.70, _FA2.format("assumed as on A100")),
        "attention_flash_backward": Efficiency(0.55, _FA2.format("assumed as on A100")),
        "attention_eager": Efficiency(0.15, _EAGER.format("about 1/5")),
        "hbm": Efficiency(0.8, _HBM),
    },
    "cdna3": {
        "gemm": Efficiency(0.514, _MAMF.format("AMD MI300X 668.4 of 1300 TFLOPS, 51.4%")),
        "gemm_fp8": Efficiency(
            0.514, "assumed: the BF16 value (the FP8 table has no MI300X figure)"
        ),
        "attention_flash_forward": Efficiency(0.50, "assumed: no MI300X figure recorded"),
        "attention_flash_backward": Efficiency(0.40, "assumed: no MI300X figure recorded"),
        "attention_eager": Efficiency(0.10, "assumed: no MI300X figure recorded"),
        "hbm": Efficiency(0.8, _HBM),
    },
}


def fitted_values(gen: str, params: dict[str, float], source: str) -> dict[str, Efficiency]:
    """FITTED's entries for a generation from the fitted parameters (benchmarks/calibrate.py
    LIBRARY_PARAMETERS): `gemm`, `gemm_fp8`, and `attention`, the flash forward, with the
    backward and the eager kernel kept at their stated ratios to it for that generation."""
    stated = EFFICIENCIES[gen]
    out = {
        name: Efficiency(params[name], source) for name in ("gemm", "gemm_fp8") if name in params
    }
    if "attention" in params:
        forward, backward = (stated[f"attention_flash_{p}"].value for p in ("forward", "backward"))
        out["attention_flash_forward"] = Efficiency(params["attention"], source)
        out["attention_flash_backward"] = Efficiency(
            params["attention"] * backward / forward,
            f"{source}; the backward at the stated backward/forward ratio {backward}/{forward}",
        )
        eager = stated["attention_eager"].value
        out["attention_eager"] = Efficiency(
            eager * params["attention"] / forward,
            f"{source}; eager attention at its stated share of the flash forward ({eager}/{forward})",
        )
    return out


def _fitted(gen: str, rows: int, what: str) -> str:
    return (
        f"fitted on the {rows} {gen} rows of benchmarks/published_runs.csv that "
        f"benchmarks/calibrate.py keeps for fitting and costmodel evaluates ({what}; least squares on ln(step), "
        "the held-out rows untouched; `python benchmarks/calibrate.py --library` lists the rows "
        "and fits again)"
    )


#: The fitted rows per generation (benchmarks/calibrate.py's split; a test counts them).
FITTED_ROWS = {"ampere": 26, "hopper": 69}

#: Values fitted on published runs (benchmarks/calibrate.py --library), by generation; they take
#: the place of the published figures above, which stay as the starting point and the sources.
#: A parameter is fitted only where at least 5 fitted rows use it: Blackwell (2 rows) keeps the
#: stated values, Ampere (no FP8 rows) its FP8 one. The fitted values sit below the published
#: kernel figures: they also absorb what the model leaves out (launch gaps, framework overheads;
#: Hopper's attention also the frameworks' FlashAttention-2-class kernels rather than FA3's).
FITTED: dict[str, dict[str, Efficiency]] = {
    gen: fitted_values(gen, params, _fitted(gen, FITTED_ROWS[gen], "; ".join(
        f"{name} {value}" for name, value in params.items())))
    for gen, params in {
        "ampere": {"gemm": 0.7095, "attention": 0.5150},
        "hopper": {"gemm": 0.6281, "gemm_fp8": 0.5372, "attention": 0.2416},
    }.items()
}  # fmt: skip

#: Scenario keys that override a parameter (null: the generation's value).
OVERRIDES = {
    "gemm_efficiency": ("gemm", "gemm_fp8"),
    "attention_efficiency": (
        "attention_flash_forward",
        "attention_flash_backward",
        "attention_eager",
    ),
    "hbm_efficiency": ("hbm",),
}


def generation(gpu: str) -> str:
    """The generation of a GPU of the table (hardware.GPUS)."""
    return hardware.GPUS[gpu].generation


def efficiencies(values: dict) -> dict[str, Efficiency]:
    """The parameters for a scenario's values: its GPU generation's (fitted where recorded),
    each overridden by the scenario's key when that is not null."""
    gen = generation(values["gpu"])
    out = {**EFFICIENCIES[gen], **FITTED.get(gen, {})}
    for key, names in OVERRIDES.items():
        if values.get(key) is not None:
            for name in names:
                out[name] = Efficiency(float(values[key]), f"scenario ({key})")
    return out
