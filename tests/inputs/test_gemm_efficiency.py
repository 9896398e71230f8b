"""A GEMM's efficiency by its shape (costmodel.inputs.gemm_efficiency): tile and wave
quantization over the GPU's SMs and the size ramp, by hand on an H100 SXM (132 SMs)."""

from __future__ import annotations

import numpy as np
import pytest

from costmodel.cli import main
from costmodel.evaluate.simulate import compute_time
from costmodel.inputs import gemm_efficiency, hardware, scenario
from costmodel.inputs.gemm_efficiency import FIXED_SECONDS, K_OVERHEAD, efficiency

PEAK = hardware.GPUS["H100-SXM"].bf16_flops
LARGE = 0.803  # the MAMF figure, passed as the large-GEMM efficiency
RATE = LARGE * PEAK  # FLOP/s of the whole GPU when every SM runs a full tile


def _wave(tile_area: int, k: float) -> float:
    """Seconds of one wave of tiles of `tile_area` output elements on the 132 SMs."""
    return 2 * tile_area * (k + K_OVERHEAD) * 132 / RATE


def test_the_sm_counts_and_their_sources():
    sms = {name: gpu.sm_count for name, gpu in hardware.GPUS.items()}
    assert sms["H100-SXM"] == sms["H800"] == sms["H200"] == 132
    assert sms["H100-PCIe"] == 114 and sms["H20"] == 78
    assert sms["A100-80GB"] == sms["A100-40GB"] == sms["A800"] == 108
    assert sms["B200"] == 148 and sms["L40S"] == 142 and sms["MI300X"] == 304
    assert all(gpu.sm_source for gpu in hardware.GPUS.values())
    assert gemm_efficiency.sms("not-a-gpu") == gemm_efficiency.FALLBACK_SMS


def test_tiles_that_fill_exactly_one_wave():
    # 3072 x 1408 in 256 x 128 tiles: 12 x 11 = 132 tiles, one per SM (a smaller tile does no
    # better: 128 x 128 gives 264 tiles, two waves of half the work)
    m, n, k = 3072, 1408, 4096
    seconds = FIXED_SECONDS + _wave(256 * 128, k)
    assert efficiency(m, n, k, "H100-SXM", large=LARGE) == pytest.approx(
        2 * m * n * k / (PEAK * seconds)
    )
    # by hand: 45.56 us of the wave + 6 us fixed, 3.543e10 FLOPs at 989.4 TFLOP/s
    assert efficiency(m, n, k, "H100-SXM", large=LARGE) == pytest.approx(0.6946, abs=5e-4)


def test_one_tile_more_than_a_wave():
    # 132 tiles of 256 x 128 in one column: one wave; one tile more (133) takes two waves of
    # that tile, so the kernel takes 64 x 64 tiles: 1064 of them, 9 waves of an eighth of the
    # work each (8 waves held the 132 big tiles)
    n, k = 128, 4096
    full = efficiency(256 * 132, n, k, "H100-SXM", large=LARGE)
    more = efficiency(256 * 133, n, k, "H100-SXM", large=LARGE)
    assert full == pytest.approx(
        2 * 256 * 132 * n * k / (PEAK * (FIXED_SECONDS + _wave(256 * 128, k)))
    )
    assert more == pytest.approx(
        2 * 256 * 133 * n * k / (PEAK * (FIXED_SECONDS + 9 * _wave(64 * 64, k)))
    )
    assert more < full


def test_a_skinny_expert_gemm_of_80_rows():
    # 32 experts of 80 tokens each (DeepSeek-V3's 256 experts over EP 8, on 132 SMs like an
    # H800's), gate + up 7168 -> 2 x 2048, one grouped kernel: every tile shape pads the 80
    # rows to 128 (1 x 128 or 2 x 64), 131,072 tile elements per SM in all (128 x 256: 512
    # tiles, 4 waves); 80 x 4096 x 32 of them are the GEMM's: 0.606 of the tile work is useful
    m, n, k, experts = 80, 4096, 7168, 32
    seconds = FIXED_SECONDS + 4 * _wave(128 * 256, k)
    got = efficiency(m, n, k, "H100-SXM", large=LARGE, groups=experts)
    assert got == pytest.approx(2 * m * n * k * experts / (PEAK * seconds))
    # and k's ramp (7168 of 7256) and the 6 us of a 322 us kernel: 0.969
    assert got == pytest.approx(LARGE * (80 * 4096 * 32 / (132 * 131_072)) * 0.969, rel=0.002)
    # the same FLOPs as one GEMM of 2560 rows: 0.747 (64 x 256 tiles: 640 of them, 5 waves)
    assert (
        got
        < 0.5
        < efficiency(m * experts, n, k, "H100-SXM", large=LARGE)
        == pytest.approx(2 * 2560 * n * k / (PEAK * (FIXED_SECONDS + 5 * _wave(64 * 256, k))))
    )


def test_the_size_ramp():
    # 256 x 256 x 256: 16 tiles of 64 x 64 in one wave, 0.47 us, and the 6 us every kernel takes
    small = efficiency(256, 256, 256, "H100-SXM", large=LARGE)
    assert small == pytest.approx(2 * 256**3 / (PEAK * (FIXED_SECONDS + _wave(64 * 64, 256))))
    assert small == pytest.approx(0.0052, abs=1e-4)  # XLA's table: 0.0057 (4 of them: 22.6 TFLOP/s)
    squares = [efficiency(s, s, s, "H100-SXM", large=LARGE) for s in (256, 1024, 4096, 16384)]
    assert squares == sorted(squares) and squares[-1] == pytest.approx(LARGE, rel=0.025)
    # the large-GEMM limit: full waves of tiles and a long k reach `large`
    huge = efficiency(256 * 132 * 8, 128 * 64, 10**7, "H100-SXM", large=LARGE)
    assert huge == pytest.approx(LARGE, rel=1e-4)


def test_defaults_are_the_generations_values_and_the_fp8_peak():
    e = scenario.resolve(overrides={"gpu": "H100-SXM"})
    table = compute_time.efficiency.efficiencies(e.values)
    shape = (8192, 8192, 8192)
    assert efficiency(*shape, "H100-SXM") == efficiency(
        *shape, "H100-SXM", large=table["gemm"].value
    )
    fp8 = efficiency(*shape, "H100-SXM", "fp8")
    assert fp8 == efficiency(
        *shape, "H100-SXM", "fp8", table["gemm_fp8"].value, peak=hardware.GPUS["H100-SXM"].fp8_flops
    )


def test_arrays_give_each_shapes_number():
    m = np.array([80.0, 4096.0, 12288.5])
    n, k = np.array([4096.0, 1408.0, 2048.0]), np.array([7168.0, 4096.0, 512.0])
    got = efficiency(m, n, k, "H20", large=0.6, groups=8, minimum=np.minimum)
    want = [efficiency(*x, "H20", large=0.6, groups=8) for x in zip(m, n, k)]
    assert got.tolist() == want


def test_a_scenarios_gemm_efficiency_is_every_shapes():
    course = scenario.resolve()
    shaped = compute_time.row_efficiencies(course)
    assert len(set(shaped.values())) > 1 and max(shaped.values()) < 0.7
    fixed = compute_time.row_efficiencies(scenario.resolve(overrides={"gemm_efficiency": 0.5}))
    assert set(fixed.values()) == {0.5}


def test_costmodel_gemms_shows_each_gemms_efficiency(capsys):
    assert main(["gemms"]) == 0
    text = capsys.readouterr().out
    header = next(line for line in text.splitlines() if line.startswith("GEMM "))
    assert header.split()[-1] == "efficiency"
    shaped = compute_time.row_efficiencies(scenario.resolve())
    expert = next(line for line in text.splitlines() if line.startswith("one routed expert, down"))
    assert expert.split()[-1] == f"{shaped['expert_down']:.3f}"
    core = next(line for line in text.splitlines() if line.startswith("attention core QK^T"))
    assert core.split()[-1] == "-"
    assert "efficiency: the fraction of the peak" in text


def test_the_breakdown_of_a_gemm_that_fills_its_tiles_and_wave():
    # 3072 x 1408 in 256 x 128 tiles: 132 tiles, one wave; only the ramp lowers it: k / (k + 88)
    # and 45.56 us of the wave in 51.56 us
    got = gemm_efficiency.breakdown(3072, 1408, 4096, "H100-SXM", LARGE)
    assert got["tile"] == (256, 128) and got["tiles"] == 132 and got["waves"] == 1
    assert got["tile_fill"] == 1 and got["wave_fill"] == 1
    assert got["k_share"] == pytest.approx(4096 / 4184)
    wave = _wave(256 * 128, 4096)
    assert got["busy_share"] == pytest.approx(wave / (FIXED_SECONDS + wave))
    assert got["efficiency"] == pytest.approx(0.6946, abs=5e-4)


def test_the_breakdown_of_a_skinny_gemm_and_of_its_grouped_experts():
    # 80 rows, 128 columns: one wave either way, so the smallest tile, 64 x 64: 2 x 2 tiles,
    # 80 x 128 of their 4 x 64 x 64 elements (62.5%), on 4 of the 132 SMs
    one = gemm_efficiency.breakdown(80, 128, 4096, "H100-SXM", LARGE)
    assert one["tile"] == (64, 64) and one["tiles"] == 4 and one["waves"] == 1
    assert one["tile_fill"] == pytest.approx(0.625) and one["wave_fill"] == pytest.approx(4 / 132)
    # 33 such experts in one grouped kernel: 132 tiles fill the wave; the tiles stay 62.5% full
    grouped = gemm_efficiency.breakdown(80, 128, 4096, "H100-SXM", LARGE, groups=33)
    assert grouped["tile"] == (64, 64) and grouped["tiles"] == 132 and grouped["wave_fill"] == 1
    assert grouped["tile_fill"] == pytest.approx(0.625)
    for got, groups in ((one, 1), (grouped, 33)):
        factors = got["tile_fill"] * got["wave_fill"] * got["k_share"] * got["busy_share"]
        assert LARGE * factors == pytest.approx(got["efficiency"])
        assert got["efficiency"] == pytest.approx(
            efficiency(80, 128, 4096, "H100-SXM", large=LARGE, groups=groups)
        )
