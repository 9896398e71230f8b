"""Each fact once (issue 21): the per-model-type switches live in ``inputs.family_flags`` and
every reader asks it; the assumptions live in ``inputs.assumptions``, each with a source."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from types import SimpleNamespace

import yaml

from costmodel import validate_memory
from costmodel.evaluate.plan import layouts
from costmodel.evaluate.simulate import run
from costmodel.inputs import assumptions, family_flags, scenario
from costmodel.inputs.models import shape_from_config

PACKAGE = Path(__file__).resolve().parents[2] / "costmodel"


def test_one_qk_norm_mapping_for_parameters_report_and_memory_check(monkeypatch):
    """Adding llama to the one QK-norm mapping must change all three readers: the parameter
    count, the report's memory model (run.layer_kwargs) and the check's prediction. A reader
    with its own mapping stays unchanged and fails here."""
    shape = validate_memory.model_shape("llama-gqa")
    config = SimpleNamespace(model_type="llama")
    predicted = sum(validate_memory.predicted_layer(shape, config, 0, 32, "eager").values())
    assert not shape.qk_norm
    assert not run.layer_kwargs(shape, _values(), 1)["qk_norm"]

    monkeypatch.setattr(family_flags, "QK_NORM_TYPES", (*family_flags.QK_NORM_TYPES, "llama"))
    normed = validate_memory.model_shape("llama-gqa")
    assert normed.qk_norm
    assert run.layer_kwargs(normed, _values(), 1)["qk_norm"]
    assert normed.total_params == shape.total_params + 2 * shape.head_dim * shape.num_layers
    assert sum(validate_memory.predicted_layer(normed, config, 0, 32, "eager").values()) > predicted


def _values() -> SimpleNamespace:
    """The scenario keys run.layer_kwargs reads (as a Scenario's attributes)."""
    return SimpleNamespace(
        seq_len=32,
        attention_kernel="flash",
        framework="megatron",
        dropout=False,
        fp8_activations=False,
        context_parallel=1,
    )


def test_no_second_qk_norm_or_dtype_switch_by_model_type():
    """No module but family_flags (and the family readers' own structural choices) compares a
    model type with a list: QK-norm, the fp32 router, fp32 routing weights and the RMSNorm offset
    are asked of family_flags."""
    for name in ("qk_norm", "router_fp32", "routing_weights_fp32", "rmsnorm_offset"):
        for path in PACKAGE.rglob("*.py"):
            if path.name == "family_flags.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.keyword) and node.arg == name:
                    assert not isinstance(node.value, ast.Compare | ast.Constant), (
                        f"{path}:{node.value.lineno}: {name}= set here, not from family_flags"
                    )


def _assignments(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    yield target.id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            yield node.target.id, node.value


REGISTRY_NAMES = {"ASSUMPTIONS", "ASSUMPTION_KEYS", "SCENARIO_ASSUMPTION_KEYS"}
REGISTRY_NAMES |= {"COMMUNICATION_ASSUMPTIONS"}
#: the EP rule: the largest d that divides both the experts and the ranks
EP_RULE = re.compile(r"% (\w+) == 0 and \w+ % \1 == 0")


def test_assumptions_are_defined_once():
    """No module but inputs/assumptions.py defines a registry of assumptions (a name such as
    ASSUMPTIONS bound to a literal), builds an Assumption, or spells the recompute policy names
    as a literal; the EP rule (largest divisor of experts and ranks) is written once."""
    for path in PACKAGE.rglob("*.py"):
        if path.name == "assumptions.py":
            continue
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        for name, value in _assignments(tree):
            literal = isinstance(value, ast.Tuple | ast.List | ast.Dict | ast.Set | ast.Constant)
            assert not (name in REGISTRY_NAMES and literal), f"{path}: a second {name}"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Assumption":
                raise AssertionError(f"{path}:{node.lineno}: an Assumption outside the registry")
            if isinstance(node, ast.Tuple | ast.List | ast.Set):
                items = [getattr(e, "value", None) for e in node.elts]
                assert sorted(map(str, items)) != ["full", "none", "selective"], (
                    f"{path}:{node.lineno}: the recompute policy names spelled again"
                )
        assert not EP_RULE.search(text), f"{path}: the EP rule written again"


def test_every_assumption_has_a_source_and_a_use():
    for name, entry in assumptions.ASSUMPTIONS.items():
        assert entry.source.strip() and entry.use.strip(), name
    fields = set(scenario.FIELDS)
    assert set(assumptions.SCENARIO_ASSUMPTION_KEYS) <= fields


def test_course_scenario_agrees_with_the_assumptions():
    """The course YAML gives some assumed values as keys (its assumption keys): where it sets
    one (not null), the value is the registry's."""
    course = yaml.safe_load((PACKAGE / "inputs/scenarios/course.yaml").read_text("utf-8"))
    keys = set(assumptions.SCENARIO_ASSUMPTION_KEYS)
    shared = [k for k in assumptions.ASSUMPTIONS if k in keys and course.get(k) is not None]
    assert "expert_parallel" in shared
    for key in shared:
        assert course[key] == assumptions.assumed(key), key


def test_one_ep_rule_for_the_scenario_and_the_layout_search(monkeypatch):
    """The scenario's EP (the course's, fitted) and the layout search's default follow the
    course's EP from the one registry: changing it there changes both."""
    monkeypatch.setitem(
        assumptions.ASSUMPTIONS, "expert_parallel", assumptions.Assumption(4, "test", "test")
    )
    assert layouts.default_ep_size(256, 40) == 4
    assert assumptions.fitted_expert_parallel(256, 40, 8) == 8
    assert assumptions.fitted_expert_parallel(256, 5 * 6) == 2
    assert assumptions.fitted_expert_parallel(0, 40) == 1


def test_gemm_rows_are_data_that_present_renders():
    """evaluate.simulate.gemms gives frozen GemmRow objects (no formatting); present.gemms writes them,
    the JSON row being the dataclass's fields in order."""
    import dataclasses
    import json

    import pytest

    from costmodel.evaluate.simulate import gemms
    from costmodel.present.gemms import render_gemms

    table = gemms.gemm_table(scenario.resolve())
    rows = table["gemms"]
    assert rows and all(isinstance(r, gemms.GemmRow) for r in rows)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows[0].m = 1.0
    assert rows[0]["key"] == rows[0].key and rows[0].get("missing", 7) == 7
    written = json.loads(render_gemms(table, "json"))["gemms"]
    assert [list(r) for r in written] == [list(gemms.ROW_FIELDS)] * len(rows)
    assert written[0]["name"] == rows[0].name


#: The modules of the advice: advice.py, the lever as data, each lever.
ADVICE_MODULES = (
    "evaluate/levers/advice.py",
    "evaluate/levers/lever.py",
    "evaluate/levers/levers.py",
)


def _advice_tree() -> ast.Module:
    """The advice's modules (ADVICE_MODULES), parsed as one."""
    bodies = [ast.parse((PACKAGE / p).read_text(encoding="utf-8")).body for p in ADVICE_MODULES]
    return ast.Module(body=[node for body in bodies for node in body], type_ignores=[])


def _advice_codes() -> set[str]:
    """The reason codes the advice's modules give: Reason("code", ...), nothing(..., "code") and
    a variable `code` set to one."""
    codes = set()
    for node in ast.walk(_advice_tree()):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", "")
        args = node.args[:1] if name == "Reason" else node.args[3:4] if name == "nothing" else []
        codes |= {a.value for a in args if isinstance(a, ast.Constant)}
    for node in ast.walk(_advice_tree()):  # code = "a" if ... else "b"
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "code":
            codes |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant)}
    return codes


def test_advice_is_data_and_present_writes_it():
    """The advice's modules write no sentence (no f-string at all) and every reason code they give
    has its sentence in present.advice.NOTES; the account's levers are Lever objects, which the
    report's JSON writes with the note in its place."""
    from costmodel.evaluate.account.account import account
    from costmodel.evaluate.levers import advice
    from costmodel.present import advice as words
    from costmodel.present.report import render

    assert not [n.lineno for n in ast.walk(_advice_tree()) if isinstance(n, ast.JoinedStr)]
    codes = _advice_codes()
    assert len(codes) > 25 and codes == set(words.NOTES)
    acc = account(scenario.resolve())
    levers = acc["advice"]
    assert levers and all(isinstance(x, advice.Lever) for x in levers)
    written = json.loads(render(acc, "json"))["advice"]
    assert [list(x) for x in written] == [list(advice.JSON_FIELDS)] * len(levers)
    assert [x["note"] for x in written] == [words.note(x) for x in levers]
    assert all(x["lever"] == y.lever and x["speedup"] == y.speedup for x, y in zip(written, levers))


def test_the_new_formats_write_what_the_format_specs_wrote():
    """The functions that replaced the report's, the levers' and notebooks 08/10's own format
    specs write the same text."""
    from costmodel import formats

    for x in (0.000123, 0.5678, 47.1449, 1234.5, 16.74, 2.0, 123456789.0):
        assert formats.sig4(x) == f"{x:,.4g}"
        assert formats.sig(x) == f"{x:.4g}" and formats.sig(x, 3) == f"{x:.3g}"
        assert formats.short(x) == f"{x:g}"
        assert formats.decimals(x, 3) == f"{x:.3f}"
        assert formats.ratio(x) == f"{x:.3f}x"
        assert formats.pct(x, 0, grouped=True) == f"{100 * x:,.0f}%"
        assert formats.gb(x * 1e9) == f"{x:,.1f} GB"
    assert formats.pct(16.74, 0, grouped=True) == "1,674%" and formats.pct(0.0585) == "5.85%"


def test_one_top_k_renormalisation_rule_for_the_report_and_the_check(monkeypatch):
    """Whether the top-k routing weights are renormalised comes from family_flags for the report
    (run.layer_kwargs) and the memory check alike: it used to be always true in the report and
    the config's norm_topk_prob in the check. A config that says false (DeepSeek-V2-Lite) or a
    qwen3_moe config without the field (transformers' default, false) now gets false in both."""
    shape = validate_memory.model_shape("qwen3-moe")  # no norm_topk_prob: Qwen3MoeConfig's False
    config = SimpleNamespace(model_type="qwen3_moe")
    assert not shape.norm_topk and not run.layer_kwargs(shape, _values(), 1)["norm_topk"]
    moe = next(i for i, flag in enumerate(shape.moe_layer_flags) if flag)
    before = sum(validate_memory.predicted_layer(shape, config, moe, 32, "eager").values())
    monkeypatch.setitem(family_flags.NORM_TOPK_DEFAULTS, "qwen3_moe", True)
    renormed = validate_memory.model_shape("qwen3-moe")
    assert renormed.norm_topk and run.layer_kwargs(renormed, _values(), 1)["norm_topk"]
    after = sum(validate_memory.predicted_layer(renormed, config, moe, 32, "eager").values())
    assert after > before
    lite = json.loads((PACKAGE.parent / "tests/configs/deepseek-v2-lite.json").read_text("utf-8"))
    assert not shape_from_config(lite).norm_topk
    assert shape_from_config({**lite, "norm_topk_prob": True}).norm_topk
    assert shape_from_config({**lite, "model_type": "mixtral", "num_local_experts": 64}).norm_topk
