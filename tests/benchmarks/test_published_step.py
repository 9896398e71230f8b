"""Step times on the published runs (issue 20): every row of benchmarks/published_runs.csv has a
published step time and a finite positive predicted one, the split into fitted and held-out rows
is deterministic, the fitter finds known parameters, and the error statistics are what they say.
The error targets themselves are benchmark figures (make benchmark), not tests."""

import json
import math
from pathlib import Path

import pytest
from benchmarks_loader import load

from costmodel.errors import CostModelError

bench = load("published_runs", "published_runs_bench")
cal = load("calibrate", "calibrate")
pub = bench._published()

ROWS = pub.rows()


@pytest.fixture(scope="module", autouse=True)
def hardware_flops_once():
    """calibrate.hardware_flops (costmodel's whole account of a row: 70 ms) worked out once per
    row for this module's tests: the found steps, the fits and the benchmark's main each asked
    for it again. A pure function of the row; what it raises is raised again."""
    known: dict[str, tuple | CostModelError] = {}
    worked_out = cal.hardware_flops

    def once(row):
        key = json.dumps(row, sort_keys=True, default=repr)
        if key not in known:
            try:
                known[key] = worked_out(row)
            except CostModelError as error:
                known[key] = error
        if isinstance(known[key], CostModelError):
            raise known[key]
        return known[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cal, "hardware_flops", once)
        yield


@pytest.fixture(scope="module")
def found():
    steps, fits = bench.steps()
    return {s.id: s for s in steps}, fits


def test_every_row_has_a_published_step_time():
    for row in ROWS:
        seconds, how = pub.step_time(row)
        assert seconds is not None and math.isfinite(seconds) and seconds > 0, (row["id"], how)


def test_every_row_predicts_a_finite_positive_step_or_is_explained(found):
    """Every predictor (the baseline; the step-time model where it exists) gives each row a
    finite positive step; the only rows without one are those costmodel cannot place, which the
    memory verdicts explain (EXPLAINED with no changes)."""
    steps, _ = found
    unplaceable = {row_id for row_id, (changes, _) in bench.EXPLAINED.items() if changes is None}
    names = {"baseline", "model"} if cal.model_available() else {"baseline"}
    for s in steps.values():
        assert set(s.predicted) == names
        for name, seconds in s.predicted.items():
            if s.id in unplaceable:
                assert seconds is None and s.error, (s.id, name)
            else:
                assert seconds is not None and math.isfinite(seconds) and seconds > 0, (s.id, name)
    assert unplaceable <= set(steps)


@pytest.mark.skipif(
    not cal.model_available(), reason="costmodel.evaluate.simulate.step_time not there yet"
)
def test_the_model_predicts_every_placeable_row(found):
    steps, _ = found
    assert all(s.predicted["model"] for s in steps.values() if s.error is None)


def test_error_statistics_on_a_hand_example():
    # |errors| sorted: 0.05 0.1 0.2 0.3 0.4 -> median 0.2; p90 at rank 0.9 x 4 = 3.6: 0.3 +
    # 0.6 x (0.4 - 0.3) = 0.36
    median, p90 = bench.error_stats([0.1, -0.2, 0.05, 0.3, -0.4])
    assert median == pytest.approx(0.2) and p90 == pytest.approx(0.36)
    assert bench.error_stats([]) is None


def test_relative_error_is_predicted_over_published_minus_one():
    row = ROWS[0]
    s = bench.Step(row, True, "hopper", 10.0, "printed", {"baseline": 12.0, "x": None}, None)
    assert s.relative_error("baseline") == pytest.approx(0.2)
    assert s.relative_error("x") is None


def test_the_split_is_deterministic_and_independent_of_other_rows():
    fitted, held_out = cal.split(ROWS)
    again_fitted, _ = cal.split(list(reversed(ROWS)))
    assert {r["id"] for r in fitted} == {r["id"] for r in again_fitted}
    # a row's side depends on its id alone: adding rows moves none of the others
    extra = [{**ROWS[0], "id": f"added-row-{i}"} for i in range(20)]
    with_extra, _ = cal.split(ROWS + extra)
    assert {r["id"] for r in fitted} == {r["id"] for r in with_extra} - {r["id"] for r in extra}
    # fixed by the salt: these two ids fall where they fell when the split was defined
    assert cal.is_fitted("korthikanti-175b-selective") and not cal.is_fitted("bloom-176b-384xa100")
    assert 0.35 < len(fitted) / len(ROWS) < 0.65
    generations = {cal.generation(r["gpu"]) for r in ROWS}
    assert generations == {"ampere", "hopper", "blackwell"}
    assert generations == {cal.generation(r["gpu"]) for r in fitted}
    assert held_out and not {r["id"] for r in fitted} & {r["id"] for r in held_out}


def test_generation_from_the_card():
    assert [cal.generation(g) for g in ("A100-80GB", "H100-SXM", "H800", "H200", "B200")] == [
        "ampere", "hopper", "hopper", "hopper", "blackwell"
    ]  # fmt: skip


def test_the_fitter_recovers_known_parameters_per_generation():
    """A predictor with two named parameters and rows whose 'published' times it produced at
    known values: the fit returns those values for each generation."""
    truth = {"ampere": {"a": 0.45, "b": 0.8}, "hopper": {"a": 0.6, "b": 0.3}}
    rows = [
        {"id": f"{gen}-{i}", "gpu": "A100-80GB" if gen == "ampere" else "H100-SXM", "w": w, "m": m}
        for gen in truth
        for i, (w, m) in enumerate([(3.0, 1.0), (1.0, 2.0), (5.0, 0.5), (2.0, 2.0)])
    ]

    def predict(row, params):
        return row["w"] / params["a"] + row["m"] / params["b"]

    def measured(row):
        return predict(row, truth[cal.generation(row["gpu"])])

    fits = cal.fit(predict, rows, ("a", "b"), measured=measured)
    assert set(fits) == set(truth)
    for gen, values in truth.items():
        assert fits[gen].values == pytest.approx(values, rel=1e-3)
        assert fits[gen].rms_log_error < 1e-3
        assert len(fits[gen].rows) == 4


def test_the_baseline_fit_is_the_geometric_mean_of_hfu(found):
    """With one efficiency e, ln(predicted) = ln(H / peak) - ln e, so the least-squares e is the
    geometric mean of H / (peak x published) over the generation's fitted rows."""
    steps, fits = found
    for gen, fitted in fits["baseline"].items():
        ratios = []
        for row_id in fitted.rows:
            s = steps[row_id]
            flops, peak = cal.hardware_flops(s.row)
            ratios.append(math.log(flops / (peak * s.published)))
        expected = math.exp(sum(ratios) / len(ratios))
        assert fitted.values["hardware_flop_efficiency"] == pytest.approx(expected, rel=1e-3), gen
        assert set(fitted.rows) <= {r["id"] for r in ROWS if cal.is_fitted(r["id"])}


def test_utilization_under_the_rows_convention(found):
    """At the published step the utilization is the printed one (MFU, else HFU), or the source's
    formula; it scales as published / predicted."""
    steps, _ = found
    s = steps["korthikanti-175b-selective"]
    assert bench.utilization(s.row, s.published, s.published) == ("MFU", 0.514)
    kind, half = bench.utilization(s.row, s.published, 2 * s.published)
    assert kind == "MFU" and half == pytest.approx(0.257)
    kind, value = bench.utilization(steps["narayanan-1t"].row, 1.0, 1.0)
    assert kind == "HFU"
    full = steps["korthikanti-175b-full"]
    kind, value = bench.utilization(full.row, full.published, full.published)
    # the selective row's printed MFU x t_selective / t_full (published_runs.md)
    assert kind == "MFU" and value == pytest.approx(0.514 * 13.75 / 18.13, rel=0.01)
    assert bench.utilization(steps["deepseek-v3-2048xh800"].row, 1.0, 1.0) is None


def test_calculon_figures_name_the_korthikanti_rows_and_their_published_times(found):
    """CALCULON holds Calculon's printed 'Calc' seconds and Delta for Table 5: its rows are the
    eight Korthikanti rows, each Delta = 1 - calc / published of our table (to its rounding), and the printed mean
    is the mean of the printed |Delta|."""
    steps, _ = found
    assert set(bench.CALCULON) == {row["id"] for row in ROWS if row["id"].startswith("korthik")}
    for row_id, (seconds, delta) in bench.CALCULON.items():
        published = steps[row_id].published
        # Calculon prints its seconds to 0.01 and its Delta to 0.01% from the unrounded time
        rounding = 0.005 / published + 5e-5
        assert delta == pytest.approx(1 - seconds / published, abs=rounding), row_id
    mean = sum(abs(d) for _, d in bench.CALCULON.values()) / len(bench.CALCULON)
    assert mean == pytest.approx(bench.CALCULON_MEAN, abs=1e-4)
    lines = bench.calculon_lines(list(steps.values()))
    assert lines[-1].startswith("  mean |error|: Calculon 3.65% (as printed); baseline ")


def test_summary_gives_both_splits_for_every_predictor(found):
    steps, fits = found
    lines = bench.step_summary(list(steps.values()), fits)
    text = "\n".join(lines)
    for name in steps[ROWS[0]["id"]].predicted:
        assert f"{name}:\n  fitted rows (" in text
        assert "\n  held-out rows (" in text
    assert ("not there yet" in text) != cal.model_available()
    table = bench.step_table(list(steps.values()), {})
    assert len(table) == len(ROWS) + 1


def _fake_step_time(monkeypatch):
    """A stand-in for costmodel.evaluate.simulate.step_time (the real one is issue 20's other half):
    tokens x 1e-6 s over gemm_efficiency (0.5 where the values leave it null)."""
    import sys
    import types

    fake = types.ModuleType("costmodel.evaluate.simulate.step_time")

    def predict(sc):
        efficiency = sc.gemm_efficiency or 0.5
        return {"seconds": sc.samples_per_step * sc.seq_len * 1e-6 / efficiency}

    fake.predict = predict
    monkeypatch.setitem(sys.modules, "costmodel.evaluate.simulate.step_time", fake)
    monkeypatch.setattr(cal, "model_available", lambda: True)


def test_the_model_is_wired_where_it_exists(monkeypatch, capsys):
    """With a step-time model present, the benchmark prints its column and statistics beside
    the baseline's, with the library's efficiencies, and the fitter fits its named parameters
    passed as scenario keys."""
    _fake_step_time(monkeypatch)
    predict, _ = bench.predictors()
    row = next(r for r in ROWS if r["id"] == "korthikanti-175b-selective")
    assert predict["model"](row) == pytest.approx(64 * 2048 * 1e-6 / 0.5)
    model = cal.model()
    rows = [r for r in ROWS if r["id"].startswith(("korthikanti", "megatron-h100"))]
    truth = {"ampere": 0.3, "hopper": 0.7}

    def measured(r):
        return pub.tokens_per_step(r) * 1e-6 / truth[cal.generation(r["gpu"])]

    fits = cal.fit(model, rows, ("gemm_efficiency",), measured=measured)
    assert {g: f.values["gemm_efficiency"] for g, f in fits.items()} == pytest.approx(
        truth, rel=1e-3
    )
    assert bench.main([]) == 0
    out = capsys.readouterr().out
    assert "model:\n  fitted rows (" in out and "not there yet" not in out
    assert "| model s | model error | model util" in out


def test_schedule_keys_where_the_scenario_has_them():
    rows = {row["id"]: row for row in ROWS}
    fields = {"pipeline_schedule", "virtual_pipeline"}
    assert pub.schedule_keys(rows["narayanan-530b"], fields) == {
        "pipeline_schedule": "interleaved", "virtual_pipeline": 3
    }  # fmt: skip
    assert pub.schedule_keys(rows["deepseek-v3-2048xh800"], fields) == {
        "pipeline_schedule": "dualpipe"
    }
    # Llama 3: V 8 read from the paper's split (one layer a chunk, the embedding and the loss
    # counted as layers: the pipeline_split column, which overrides() passes on)
    assert pub.schedule_keys(rows["llama3-405b-8k-8192gpu"], fields) == {
        "pipeline_schedule": "interleaved", "virtual_pipeline": 8
    }  # fmt: skip
    keys = pub.overrides(rows["llama3-405b-8k-8192gpu"])
    assert keys["embedding_in_pipeline_split"] and keys["loss_in_pipeline_split"]
    # interleaved with V not printed: 1f1b, the larger bubble and the fewer micro batches in
    # flight
    assert pub.schedule_keys(rows["korthikanti-1t-selective"], fields) == {
        "pipeline_schedule": "1f1b"
    }
    assert pub.schedule_keys(rows["mosaic-a100-mpt7b-1024-8gpu"], fields) == {
        "pipeline_schedule": "1f1b"
    }
    assert pub.schedule_keys(rows["narayanan-530b"], fields=()) == {}


def test_the_fitted_efficiencies_cite_the_rows_they_were_fitted_on():
    """costmodel.inputs.fitted names, per generation, how many fitted rows of the split it was
    fitted on; the count is the split's, and the library predictor the fit used reads the values
    it is given (a generation with fewer than MIN_ROWS rows is not fitted). The module is what
    `make calibrate` writes from its parameters and the stated values (not stale)."""
    from costmodel.inputs import efficiency
    from costmodel.inputs import fitted as generated

    fitted, _ = cal.split(ROWS)
    predict = cal.library_model()
    counts: dict[str, int] = {}
    for row in fitted:
        if cal._evaluable(predict, row, {}):  # the fit leaves out what costmodel refuses
            counts[cal.generation(row["gpu"])] = counts.get(cal.generation(row["gpu"]), 0) + 1
    assert generated.ROWS == {g: n for g, n in counts.items() if g in generated.FITTED}
    assert all(n < cal.MIN_ROWS for g, n in counts.items() if g not in generated.FITTED)
    for gen, values in generated.FITTED.items():
        for name, (value, source) in values.items():
            assert f"the {counts[gen]} {gen} rows" in source and 0 < value <= 1, name
    params = {g: (generated.PARAMETERS[g], generated.ROWS[g]) for g in generated.ROWS}
    assert cal.render_fitted(params) == Path(generated.__file__).read_text(encoding="utf-8")
    row = next(r for r in fitted if cal.generation(r["gpu"]) == "hopper")
    slow, fast = predict(row, {"gemm_scale": 0.3}), predict(row, {"gemm_scale": 0.9})
    assert slow > fast > 0
    # one scale on the stated large-GEMM values (BF16 and FP8), restored after the calls
    hopper = efficiency.EFFICIENCIES["hopper"]
    scale = generated.PARAMETERS["hopper"]["gemm_scale"]
    assert hopper["gemm"].value == scale * hopper["gemm"].stated == scale * 0.803
    assert hopper["gemm_fp8"].value == scale * hopper["gemm_fp8"].stated == scale * 0.709
