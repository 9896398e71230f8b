"""Device-limited routing with de-duplication per device (`moe_router_max_devices`,
DeepSeek-V2): a token travels once per destination GPU, at most M of them, instead of once per
expert; the bytes computed by hand, the course's run and the refusals."""

import json

import pytest

from costmodel.cli import main
from costmodel.evaluate.communication.communication import communication

GB = 1e9
#: One MoE layer of 1000 tokens of width 100 in BF16 (200,000 bytes a copy), one micro batch,
#: nodes of 8 GPUs (tests/evaluate/test_communication.py's layout).
BASE = dict(
    intra_node_bandwidth=160 * GB,
    inter_node_bandwidth=50 * GB,
    gpus_per_node=8,
    micro_batch=1,
    num_layers=1,
    num_full_attention_layers=0,
    head_dim=8,
    dense_params=1,
    micro_batches=1,
    step_time=1.0,
    zero_stage=0,
    grad_bytes=2,
)
#: EP 64 over 8 nodes, k 8.
EP_64 = dict(
    BASE,
    dp=64,
    ep=64,
    num_moe_layers=1,
    experts_per_token=8,
    expert_params=64,
    seq_len=1000,
    hidden_size=100,
)
#: EP 8 in one node, k 6.
EP_8 = dict(
    BASE,
    dp=8,
    ep=8,
    num_moe_layers=1,
    experts_per_token=6,
    expert_params=8,
    seq_len=1000,
    hidden_size=100,
)


def dispatch(**changes):
    (row,) = [c for c in communication(**changes).collectives if "dispatch" in c.name]
    return row


def test_six_experts_on_three_devices_send_three_copies():
    """A token routed to 6 experts on at most 3 of the node's 8 GPUs is sent 3 times, one of
    8 of them to its own GPU: 3 x 7/8 copies per transfer instead of 6 x 7/8; forward and
    backward, one MoE layer: 2 x 3 x 7/8 x 200,000 = 1,050,000 bytes."""
    free, limited = dispatch(**EP_8), dispatch(**EP_8, moe_router_max_devices=3)
    assert free.bytes_per_gpu == pytest.approx(2 * 6 * 7 / 8 * 200_000)
    assert limited.bytes_per_gpu == pytest.approx(2 * 3 * 7 / 8 * 200_000)
    assert (limited.inter_node_bytes, limited.buffer_bytes) == (0.0, free.buffer_bytes)
    # more devices allowed than the token's experts: one copy per expert's GPU, as before
    assert dispatch(**EP_8, moe_router_max_devices=6).bytes_per_gpu == free.bytes_per_gpu


def test_de_duplication_per_device_caps_the_copies_at_the_group():
    """k 6 over EP 4: once per GPU, at most the group's 4 GPUs, 4 x 3/4 copies (once per
    expert, 6 x 3/4)."""
    four = dict(EP_8, dp=4, ep=4, expert_params=4)
    assert dispatch(**four).bytes_per_gpu == pytest.approx(2 * 6 * 3 / 4 * 200_000)
    deduped = dispatch(**four, moe_router_max_devices=8)
    assert deduped.bytes_per_gpu == pytest.approx(2 * 4 * 3 / 4 * 200_000)


def test_across_nodes_the_devices_bound_the_nodes_too():
    """EP 64 on 8 nodes, k 8, at most 3 GPUs: the network carries min(8, 8 nodes, 3) x 7/8 =
    2.625 copies (7 without the limit), NVLink 3 x 7/8 (7)."""
    row = dispatch(**EP_64, moe_router_max_devices=3)
    assert row.inter_node_bytes == pytest.approx(2 * 3 * 7 / 8 * 200_000)
    assert row.intra_node_bytes == pytest.approx(2 * 3 * 7 / 8 * 200_000)
    both = dispatch(**EP_64, moe_router_max_devices=3, moe_router_max_nodes=2)
    assert both.inter_node_bytes == pytest.approx(2 * 2 * 7 / 8 * 200_000)


def test_the_course_with_three_devices(capsys):
    """The course's k 8 over EP 8 in one node: 3 of 8 of the EP bytes."""
    rows = {}
    for setting in ([], ["--set", "moe_router_max_devices=3"]):
        assert main(["report", "--format", "json", *setting]) == 0
        got = json.loads(capsys.readouterr().out)["communication"]["collectives"]
        rows[bool(setting)] = [c["bytes_per_gpu"] for c in got if c["name"].startswith("EP")]
    assert rows[True] == pytest.approx([x * 3 / 8 for x in rows[False]])


@pytest.mark.parametrize("value", ["0", "2.5", "-3"])
def test_bad_values_are_one_line_exit_2(capsys, value):
    assert main(["report", "--set", f"moe_router_max_devices={value}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("costmodel: error: moe_router_max_devices: ") and err.count("\n") == 1
    assert "expected a positive integer up to 1,000,000 or null" in err
