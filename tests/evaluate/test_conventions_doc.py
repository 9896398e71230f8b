"""docs/conventions.md (issue 23, 9): it names every scenario key, and the course figures it
quotes for linear attention, the "with attention" readings and the logits are the account's."""

from __future__ import annotations

import re
from pathlib import Path

from costmodel.evaluate.account.account import account
from costmodel.inputs import scenario
from costmodel.inputs.fields import FIELDS

DOC = Path(__file__).resolve().parents[2] / "docs" / "conventions.md"


def test_the_conventions_name_every_scenario_key():
    text = DOC.read_text(encoding="utf-8")
    unnamed = [key for key in FIELDS if not re.search(rf"`{key}(`|:)", text)]
    assert not unnamed, f"docs/conventions.md does not name: {unnamed}"


def test_the_conventions_quote_the_course_figures(course_account):
    """The figures the new paragraphs quote, from the course report (full and causal)."""
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    acc = course_account
    causal = account(scenario.resolve(overrides={"attention_flops": "causal"}))
    linear = acc["linear_attention"]
    quoted = [
        f"{linear['layers']} layers, C = {linear['chunk_size']}",
        f"{linear['flops_per_step']:.4e} model FLOPs a step",
        f"{100 * linear['share']:.2f}% of the FLOPs with attention",
        f"MFU with attention {100 * acc['attention']['actual']['mfu_with_attention']:.2f}% (full)",
        f"or {100 * causal['attention']['actual']['mfu_with_attention']:.2f}% (causal)",
        f"HFU with attention {100 * acc['attention']['actual']['hfu_with_attention']:.2f}% (full)",
        f"or {100 * causal['attention']['actual']['hfu_with_attention']:.2f}% (causal)",
        f"{int(acc['logits_bytes']):,} bytes for the course's",
    ]
    missing = [q for q in quoted if q not in text]
    assert not missing, missing
