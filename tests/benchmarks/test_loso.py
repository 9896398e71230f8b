"""Leave-one-source-out cross-validation (benchmarks/loso.py): the source rule on the real rows,
no source's rows among the rows its own parameters are fitted on (a fake fit and predictor
injected: no real fit runs here), the statistics on hand-computed numbers, the fallbacks where
a generation has too few rows, and docs/benchmarks.md's LOSO section against benchmarks/loso.md
(drift). The figures themselves are `make benchmark`'s, not tests."""

import pytest
from benchmarks_loader import load

cal = load("calibrate", "calibrate")
loso = load("loso", "loso")
pub = cal._published()

ROWS = pub.rows()


def _source(row_id: str) -> str:
    return loso.source_key(next(row for row in ROWS if row["id"] == row_id)["source"])


def test_korthikanti_table_5_is_one_source():
    groups = loso.sources(ROWS)
    ids = [row["id"] for row in groups[_source("korthikanti-22b-selective")]]
    assert ids == [row["id"] for row in ROWS if row["id"].startswith("korthikanti-")]
    assert len(ids) == 8


def test_two_torchtitan_files_are_two_sources():
    december = _source("torchtitan-2412-8b-8gpu-fsdp")
    june = _source("torchtitan-2506-70b-256gpu-bf16-vanilla-tp")
    assert december == "pytorch/torchtitan benchmarks/llama3_h100_202412_torchtitan.md"
    assert june == "pytorch/torchtitan benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md"
    assert _source("torchtitan-2412-405b-512gpu-cp8-256k") == december


def test_a_release_is_a_source_and_a_paper_ends_at_its_arxiv_id():
    assert _source("dgxc-2502-llama31-8b-bf16-8gpu") == "NVIDIA/dgxc-benchmarking release v25.02"
    assert _source("dgxc-2502-gpt3-175b-fp8-2048gpu") == "NVIDIA/dgxc-benchmarking release v25.02"
    assert _source("dgxc-2505-llama31-405b-bf16-512gpu") == (
        "NVIDIA/dgxc-benchmarking release v25.05.01"
    )
    assert _source("deepseek-v3-2048xh800") == (
        "DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv:2412.19437"
    )
    assert _source("llama3-405b-131k-16384gpu") == "Llama Team"
    assert sum(len(rows) for rows in loso.sources(ROWS).values()) == len(ROWS)


def test_no_source_is_predicted_by_parameters_fitted_on_its_own_rows():
    """A fake fit records the rows it was given and hands back a token; the fake predictor
    checks that the row it predicts is not among that token's fitted rows."""
    fitted_on: dict[int, set[str]] = {}

    def fit(train, generations):
        token = len(fitted_on)
        fitted_on[token] = {row["id"] for row in train}
        return {gen: {"token": token} for gen in generations}, []

    def predict(row, params):
        assert row["id"] not in fitted_on[params["token"]]
        return 2.0

    methods = [loso.Method("model", fit, predict), loso.Method("baseline", fit, predict)]
    result = loso.cross_validate(ROWS, methods, lambda row: 1.0)
    assert len(result.predictions) == len(ROWS)
    assert len(fitted_on) == 2 * len(loso.sources(ROWS))
    for prediction in result.predictions:
        assert prediction.error("model") == pytest.approx(1.0)
    # every fit saw every row but its source's
    sizes = sorted(len(ids) for ids in fitted_on.values())
    expected = sorted(2 * [len(ROWS) - len(rows) for rows in loso.sources(ROWS).values()])
    assert sizes == expected


def test_median_and_p90_of_the_magnitudes():
    """|errors| 0.05, 0.1, 0.2, 0.3, 0.4: median 0.2; p90 at rank 0.9 x 4 = 3.6 between 0.3
    and 0.4 (linear interpolation): 0.36."""
    median, p90 = loso.error_stats([0.1, -0.2, 0.3, -0.4, 0.05])
    assert median == pytest.approx(0.2)
    assert p90 == pytest.approx(0.36)
    assert loso.error_stats([]) is None


def _prediction(row_id, published, model, baseline):
    row = next(row for row in ROWS if row["id"] == row_id)
    return loso.Prediction(row, _source(row_id), cal.generation(row["gpu"]), published,
                           {"model": model, "baseline": baseline})  # fmt: skip


def test_headline_compares_both_methods_on_the_same_rows():
    """A row the baseline cannot evaluate is left out of the model's figures too; the
    Korthikanti line is the mean |error| of its Table 5 rows."""
    predictions = [
        _prediction("korthikanti-22b-selective", 10.0, 11.0, 8.0),  # +10%, -20%
        _prediction("korthikanti-175b-full", 10.0, 7.0, 13.0),  # -30%, +30%
        _prediction("narayanan-1.7b", 10.0, 20.0, None),  # not compared
    ]
    result = loso.Result(predictions, sources=loso.sources(p.row for p in predictions))
    text = loso.headline(result)
    # |model| 0.1, 0.3: median 0.2, p90 0.1 + 0.9 x 0.2 = 0.28; |baseline| 0.2, 0.3: 0.25, 0.29
    assert "| all | 2 | 20.0% / 28.0% | 25.0% / 29.0% |" in text
    assert "| ampere | 2 | 20.0% / 28.0% | 25.0% / 29.0% |" in text
    assert "| FP8 |" not in text  # no rows: no line
    assert "mean |error| costmodel 20.00%, constant efficiency 25.00%; Calculon 3.65%" in text
    assert "Isaev et al." in text and "SC '23" in text


def test_model_keeps_stated_values_and_says_so_under_min_rows(monkeypatch):
    """Too few rows of a generation without the source: calibrate's library_fit fits nothing
    (MIN_ROWS), the fold's values are empty (library_model's stated values) and a note names
    them."""
    blackwell = [row for row in ROWS if cal.generation(row["gpu"]) == "blackwell"]
    blackwell = blackwell[: cal.MIN_ROWS - 1]
    assert 0 < len(blackwell) < cal.MIN_ROWS
    monkeypatch.setattr(cal, "library_model", lambda: None)
    values, notes = loso.model_method().fit(blackwell, ["blackwell"])
    assert values == {"blackwell": {}}
    assert notes == [f"model, blackwell: gemm_scale, attention at the stated value (under "
                     f"{cal.MIN_ROWS} of the {len(blackwell)} blackwell rows without it use it)"]  # fmt: skip


def test_baseline_pools_the_generations_under_min_rows(monkeypatch):
    seen = []

    def fake_fit(predict, rows, parameters, measured=None, group=None):
        keys = {(group or (lambda row: cal.generation(row["gpu"])))(row) for row in rows}
        seen.append((len(rows), keys))
        return {key: cal.Fit(key, {"hardware_flop_efficiency": 0.5}, [], 0.0) for key in keys}

    monkeypatch.setattr(cal, "fit", fake_fit)
    monkeypatch.setattr(cal, "baseline", lambda: None)
    train = [row for row in ROWS if cal.generation(row["gpu"]) != "blackwell"]
    values, notes = loso.baseline_method().fit(train, ["blackwell", "ampere"])
    assert values == {gen: {"hardware_flop_efficiency": 0.5} for gen in ("blackwell", "ampere")}
    assert seen[0] == (len(train), {"pooled"})
    assert seen[1][1] == {"ampere"}
    assert len(notes) == 1 and notes[0].startswith("baseline, blackwell: 0 blackwell rows")


def test_the_benchmarks_page_shows_the_headline_of_loso_md():
    """docs/benchmarks.md's LOSO section ends with the headline of benchmarks/loso.md, as
    `python benchmarks/loso.py` writes both: a hand edit of either fails here."""
    page = load("docs_page", "docs_page")
    generated = loso.OUTPUT.read_text(encoding="utf-8")
    assert generated.startswith(loso.GENERATED)
    headline = loso.headline_of(generated)
    assert headline and headline.startswith("| group | rows |")
    section = page.section(page.PAGE.read_text(encoding="utf-8"), page.LOSO_HEADING)
    assert section.endswith("\n\n" + headline)


def test_headline_figures_and_their_targets():
    """loso.figures reads the headline's table: issue 34's targets on the model's all-rows
    median and p90 and its MoE and long-context medians; the Korthikanti mean."""
    predictions = [
        _prediction("korthikanti-22b-selective", 10.0, 11.0, 8.0),
        _prediction("korthikanti-175b-full", 10.0, 7.0, 13.0),
    ]
    result = loso.Result(predictions, sources=loso.sources(p.row for p in predictions))
    got = {f["name"]: (f["value"], f["target"]) for f in loso.figures(loso.headline(result))}
    assert got == {
        "costmodel, all rows: median |error|": (20.0, {"at_most": 7.0}),
        "costmodel, all rows: p90 |error|": (28.0, {"at_most": 20.0}),
        "one constant efficiency, all rows: median |error|": (25.0, None),
        "costmodel, Korthikanti et al. Table 5: mean |error|": (20.0, None),
    }
    assert loso.headline_of("no headline here\n") is None


def test_a_generated_file_keeps_its_mode(tmp_path):
    """costmodel.generate.write_generated, which loso.md, the benchmarks' results files and page
    and calibrate's fitted module are written with: the file's permissions kept, a new one 0644, no temporary left."""
    from costmodel.generate import write_generated

    path = tmp_path / "out.md"
    path.write_text("GEN old")
    path.chmod(0o640)
    assert write_generated(path, "GEN new", "GEN", "test file")
    assert path.read_text() == "GEN new" and path.stat().st_mode & 0o777 == 0o640
    fresh = tmp_path / "fresh.md"
    write_generated(fresh, "GEN x", "GEN", "test file")
    assert fresh.stat().st_mode & 0o777 == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.md", "out.md"]


def test_a_parameter_the_fit_leaves_at_a_bound_keeps_its_stated_value():
    """calibrate.library_fit: a parameter the rows do not constrain (the fit runs it to a bound
    of [LOWER, UPPER]) is dropped and the others fitted again without it. Fake predictor on real
    Hopper rows: every row's step is published x 0.5 / gemm_scale, an FP8 row's also x 1.2 /
    attention, which only attention = 1.2 > UPPER would fit: the fit runs attention to 1.0, and
    without it (its stated value, here 1.2) gemm_scale = 0.5 fits every row exactly."""
    hopper = [row for row in ROWS if cal.generation(row["gpu"]) == "hopper"]
    bf16 = [row for row in hopper if row["fp8"] == "none"][:6]
    fp8 = [row for row in hopper if row["fp8"] != "none"][:6]
    assert len(bf16) == len(fp8) == 6
    measured = {row["id"]: pub.step_time(row)[0] for row in bf16 + fp8}

    def predict(row, params):
        seconds = measured[row["id"]] * 0.5 / params["gemm_scale"]
        return seconds * (1.2 / params.get("attention", 1.2) if row["fp8"] != "none" else 1.0)

    fits = cal.library_fit(bf16 + fp8, predict)
    assert cal.UNCONSTRAINED == {"hopper": {"attention"}}
    assert "attention" not in fits["hopper"].values
    assert fits["hopper"].values["gemm_scale"] == pytest.approx(0.5, rel=1e-3)
    assert cal.at_bound(cal.UPPER) and cal.at_bound(cal.LOWER) and not cal.at_bound(0.5)
