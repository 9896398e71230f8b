"""The worked scenario files of docs/howto-team-run.md, one per framework (issue 37): each states
the run its comments cite (layout, batch, the published step), and each report line the page
quotes is a line the report prints today, so the page cannot drift from the program."""

import re
from pathlib import Path

import pytest

from costmodel import cli
from costmodel.evaluate.account.account import account
from costmodel.inputs import scenario

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "howto-team-run.md"


def test_torchtitan_file_is_the_published_h200_run():
    """torchtitan benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md, 8 nodes: FSDP2 over 64
    GPUs, local batch 2 at 8,192 tokens, 10,753 tokens/s per GPU."""
    sc = scenario.resolve(REPO / "scenarios" / "llama-3.1-8b-torchtitan-64xH200.yaml")
    assert (sc["num_gpus"], sc["gpu"], sc["zero_stage"], sc["data_parallel"]) == (64, "H200", 3, 64)
    assert (sc["tensor_parallel"], sc["pipeline_parallel"], sc["context_parallel"]) == (1, 1, 1)
    assert sc["micro_batch"] == 2 and sc["micro_batches_per_step"] == 1
    assert sc["tokens_per_step"] == 64 * 2 * 8192
    assert sc["step_time"] == pytest.approx(2 * 8192 / 10753, abs=5e-4)
    assert sc["measured_tokens_per_s"] == 10753 * 64
    assert (sc["fp8"], sc["recompute"], sc["attention_kernel"]) == ("hybrid", "selective", "flash2")


def test_hf_deepspeed_file_is_the_trainers_batch():
    """per_device_train_batch_size 4 x gradient_accumulation_steps 4 x 8 GPUs, ZeRO-3, gradient
    checkpointing, transformers' saved tensors; the padding is what its first lever removes."""
    sc = scenario.resolve(REPO / "scenarios" / "qwen3-8b-hf-deepspeed-8xH100.yaml")
    assert sc["samples_per_step"] == 4 * 4 * 8 and sc["micro_batch"] == 4
    assert sc["micro_batches_per_step"] == 4  # gradient_accumulation_steps
    assert (sc["zero_stage"], sc["recompute"], sc["framework"]) == (3, "full", "huggingface")
    acc = account(sc)
    assert acc["memory"]["fits"]
    assert acc["advice"][0]["lever"] == "packing"


def _quoted_reports() -> list[tuple[str, list[str]]]:
    """(scenario path, the report lines the page quotes) for each output block of the page."""
    blocks = re.findall(
        r"```\n\$ \.venv/bin/costmodel report --scenario (\S+)\n(.*?)```",
        PAGE.read_text(encoding="utf-8"),
        re.S,
    )
    return [(path, text.splitlines()) for path, text in blocks]


QUOTED = _quoted_reports()


def test_the_page_quotes_one_report_per_framework():
    paths = [path for path, _ in QUOTED]
    assert paths == [
        "scenarios/llama-3.1-70b-512xH100.yaml",
        "scenarios/llama-3.1-8b-torchtitan-64xH200.yaml",
        "scenarios/qwen3-8b-hf-deepspeed-8xH100.yaml",
    ]
    for path in paths:
        assert (REPO / path).is_file(), path


@pytest.mark.parametrize("path, lines", QUOTED, ids=[Path(path).stem for path, _ in QUOTED])
def test_each_quoted_line_is_printed_by_the_report(path, lines, capsys):
    assert cli.main(["report", "--scenario", str(REPO / path)]) == 0
    printed = set(capsys.readouterr().out.splitlines())
    assert lines
    for line in lines:
        assert line in printed, line


def test_the_torchtitan_prose_is_the_models():
    """The figures the page's prose quotes for the torchtitan run are the step-time model's:
    the attention core at FlashAttention-2's curve, the step with FlashAttention-3, and the
    memory model's peak set beside torchtitan's measured memory."""
    from costmodel.evaluate.simulate import run, step_time

    file = REPO / "scenarios" / "llama-3.1-8b-torchtitan-64xH200.yaml"
    sc = scenario.resolve(file)
    flash3 = step_time.predict(scenario.resolve(file, overrides={"attention_kernel": "flash"}))
    text = " ".join(PAGE.read_text(encoding="utf-8").split())
    attention = step_time.predict(sc)["parts"]["attention"]
    assert f"the attention core alone takes {attention:.1f} s" in text
    assert f"the model predicts {flash3['seconds']:.2f} s" in text
    assert f"within {abs(flash3['seconds'] / sc.step_time - 1):.0%} of the measurement" in text
    assert f"against the {run.memory(sc)['total'] / 1e9:.1f} GB lower bound" in text
