"""Accelerator figures: dense BF16 peak (no sparsity), HBM bandwidth and memory.

Collected in the project's reference notes (shared/reference/gpus.md) from the vendors'
documents named in `source`. Dense figures only: the 2x "with sparsity" numbers that some
tables show are a common error. Decimal units: 1 TB/s = 1e12 byte/s, 1 GB = 1e9 byte.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPU:
    name: str
    bf16_flops: float  # dense, FLOP/s
    fp8_flops: float | None
    memory_bytes: float
    hbm_bandwidth: float  # byte/s
    source: str

    @property
    def balance(self) -> float:
        """Machine balance: FLOP per byte of HBM traffic at the BF16 peak."""
        return self.bf16_flops / self.hbm_bandwidth


_T = 1e12
_G = 1e9

GPUS: dict[str, GPU] = {
    g.name: g
    for g in [
        GPU("H20", 148 * _T, 296 * _T, 96 * _G, 4.0 * _T, "NVIDIA H20 product brief"),
        GPU("H100-SXM", 989.4 * _T, 1979 * _T, 80 * _G, 3.35 * _T, "NVIDIA H100 datasheet"),
        GPU("H100-PCIe", 756 * _T, 1513 * _T, 80 * _G, 2.0 * _T, "NVIDIA H100 datasheet"),
        GPU(
            "H800",
            989 * _T,
            1979 * _T,
            80 * _G,
            3.35 * _T,
            "NVIDIA H800 (secondary sources; same die as H100 SXM)",
        ),
        GPU("H200", 989 * _T, 1979 * _T, 141 * _G, 4.8 * _T, "NVIDIA H200 datasheet"),
        GPU("A100-40GB", 312 * _T, None, 40 * _G, 1.555 * _T, "NVIDIA A100 datasheet"),
        GPU("A100-80GB", 312 * _T, None, 80 * _G, 2.039 * _T, "NVIDIA A100 datasheet"),
        GPU(
            "A800",
            312 * _T,
            None,
            80 * _G,
            2.039 * _T,
            "NVIDIA A800 (secondary sources; same die as A100 80GB)",
        ),
        GPU("B200", 2250 * _T, 4500 * _T, 180 * _G, 8.0 * _T, "NVIDIA HGX B200 datasheet"),
        GPU("L40S", 362 * _T, 733 * _T, 48 * _G, 0.864 * _T, "NVIDIA L40S datasheet"),
        GPU("MI300X", 1307 * _T, 2615 * _T, 192 * _G, 5.3 * _T, "AMD Instinct MI300X data sheet"),
    ]
}


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


_ALIASES = {_norm(name): name for name in GPUS}
_ALIASES.update({"h100": "H100-SXM", "a100": "A100-80GB"})


def lookup(name: str) -> GPU | None:
    """The GPU for a name, forgiving case, spaces, '-' and '_'; None if unknown."""
    key = _ALIASES.get(_norm(str(name)))
    return GPUS[key] if key else None
