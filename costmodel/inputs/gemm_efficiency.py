"""A GEMM's efficiency as a function of its shape (m, n, k) on a GPU: the fraction of the peak
a cuBLAS-style kernel reaches, which a small or skinny GEMM falls far short of.

A GEMM kernel cuts the m x n output into tiles, one thread block each; the SMs run them in
waves; each tile steps through k (NVIDIA, "Matrix Multiplication Background User's Guide",
DU-09799-001_v001, chapter 3: tile quantization and wave quantization). Its time here:

    time = FIXED_SECONDS + waves x 2 Tm Tn (k + K_OVERHEAD) / (large x peak / SMs)
    waves = ceil(groups x ceil(m / Tm) x ceil(n / Tn) / SMs)

for the tile (Tm, Tn) of TILES that gives the shortest time (the kernel's heuristic choosing
among its tiles), and the efficiency is the GEMM's FLOPs over that time at the peak,
2 m n k x groups / (peak x time). `large` is the large-GEMM efficiency of the GPU's generation
(costmodel.inputs.efficiency's `gemm` or `gemm_fp8`: the stated MAMF value, or the fitted one):
the limit of a GEMM that fills every tile and wave and whose k is long. The three effects:

- tile quantization: an m of 80 rows (a routed expert's tokens) fills 80 of a 128-row tile;
- wave quantization: 133 tiles on 132 SMs take two waves;
- the size ramp: per tile, K_OVERHEAD elements of k more (filling and draining the tile's
  pipeline, writing the output tile), and per kernel FIXED_SECONDS (a kernel of a few tiles
  takes microseconds whatever its FLOPs).

`groups` is a grouped GEMM's count of equal problems in one kernel (a GPU's routed experts,
E / EP: their tiles share the waves and the fixed time). Plain arithmetic: the report calls
it on numbers (no NumPy is imported), the plan's search on NumPy arrays of shapes
(`minimum`: NumPy's for arrays, as derive.plain.gemm_seconds takes its `maximum`).
"""

from __future__ import annotations

from costmodel.derive import lanes
from costmodel.inputs import hardware

#: The thread-block tiles (Tm, Tn) a cuBLAS GEMM chooses among.
TILES = ((256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128), (64, 64))
TILES_SOURCE = (
    "NVIDIA Matrix Multiplication Background User's Guide (DU-09799-001_v001, February 2023), "
    "section 2.3 'Typical Tile Dimensions In cuBLAS And Performance': 256x128, 128x256, "
    "128x128, 256x64, 64x256, 128x64, 64x128, 64x64"
)
#: Elements of k a tile pays for besides its own (pipeline fill and drain, the epilogue), and
#: the seconds a GEMM kernel takes besides its waves.
K_OVERHEAD = 88
FIXED_SECONDS = 6.0e-6
RAMP_SOURCE = (
    "fitted to a published cuBLAS sweep on H100 (sm_90, BF16): the first 72 entries of XLA's "
    "matmul performance table (openxla xla/service/gpu/model/matmul_interpolator_data.h, as "
    "vendored in tensorflow/tensorflow at commit 372d578b; b x m x n x k from 1 x 256 x 256 x "
    "256 to 4 x 4096 x 4096 x 4096), least squares on ln(FLOP/s) with TILES, 132 SMs and "
    "`large` held at the MAMF 0.803: root-mean-square log error 0.078 (0.62 for one constant "
    "0.803); taken for every generation and for FP8, an assumption"
)
#: SMs assumed where the GPU table has no count.
FALLBACK_SMS = 132
FALLBACK_SOURCE = "assumed: an H100 SXM's 132 SMs (the GPU table gives no count)"


def _ceil(x):
    """The ceiling of a positive number or NumPy array, without importing NumPy."""
    return -(-x // 1)


def sms(gpu: str) -> int:
    """The GPU's SMs (AMD: compute units), FALLBACK_SMS where the table has none."""
    card = hardware.GPUS.get(gpu)
    return card.sm_count if card is not None and card.sm_count else FALLBACK_SMS


def gemm_time(m, n, k, sm_count: int, rate, groups=1, minimum=lanes.minimum):
    """Seconds of `groups` GEMMs of m x n x k in one kernel on `sm_count` SMs at `rate`
    FLOP/s for a full tile and wave (large x peak): the module's formula, the shortest tile."""
    best = None
    for tile in TILES:
        seconds = _tile_seconds(tile, m, n, k, sm_count, rate, groups)
        best = seconds if best is None else minimum(best, seconds)
    return best


def _tile_seconds(tile, m, n, k, sm_count, rate, groups):
    """Seconds of the GEMMs in tiles of `tile` (Tm, Tn): the module's formula."""
    tm, tn = tile
    waves = _ceil(groups * _ceil(m / tm) * _ceil(n / tn) / sm_count)
    return FIXED_SECONDS + waves * 2 * tm * tn * (k + K_OVERHEAD) * sm_count / rate


def efficiency(
    m, n, k, gpu: str, dtype: str = "bf16", large=None, groups=1, peak=None, minimum=lanes.minimum
):
    """The fraction of `peak` (default: the GPU's dense BF16 or FP8 peak, by `dtype`) that
    `groups` GEMMs of m x n x k in one kernel reach on `gpu`; `large`: the large-GEMM
    efficiency (default: the generation's `gemm` or `gemm_fp8`, costmodel.inputs.efficiency)."""
    card = hardware.GPUS[gpu]
    fp8 = dtype == "fp8"
    if peak is None:
        peak = card.fp8_flops if fp8 and card.fp8_flops else card.bf16_flops
    if large is None:
        from costmodel.inputs import efficiency as table

        large = table.EFFICIENCIES[card.generation]["gemm_fp8" if fp8 else "gemm"].value
    seconds = gemm_time(m, n, k, sms(gpu), large * peak, groups, minimum)
    return 2 * m * n * k * groups / (peak * seconds)


def breakdown(m: float, n: float, k: float, gpu: str, large: float, groups=1, peak=None) -> dict:
    """Why `groups` GEMMs of m x n x k (numbers) run at `efficiency`'s value on `gpu` at the
    large-GEMM efficiency `large` (`peak`: the GPU's dense BF16 peak by default): the tile the
    kernel takes, its tiles and waves, and the four factors whose product with `large` is the
    efficiency: `tile_fill` (the output's share of the tiles' area: tile quantization),
    `wave_fill` (the tiles' share of the waves' SM slots: wave quantization), `k_share`
    (k / (k + K_OVERHEAD)) and `busy_share` (the waves' share of the time, FIXED_SECONDS the
    rest): the size ramp."""
    peak = hardware.GPUS[gpu].bf16_flops if peak is None else peak
    sm_count, rate = sms(gpu), large * peak
    tile = min(TILES, key=lambda t: _tile_seconds(t, m, n, k, sm_count, rate, groups))
    tm, tn = tile
    tiles = groups * _ceil(m / tm) * _ceil(n / tn)
    waves = _ceil(tiles / sm_count)
    seconds = _tile_seconds(tile, m, n, k, sm_count, rate, groups)
    return {
        "tile": tile,
        "tiles": tiles,
        "waves": waves,
        "tile_fill": m * n * groups / (tiles * tm * tn),
        "wave_fill": tiles / (waves * sm_count),
        "k_share": k / (k + K_OVERHEAD),
        "busy_share": 1 - FIXED_SECONDS / seconds,
        "efficiency": 2 * m * n * k * groups / (peak * seconds),
    }
