"""Communication of runs that trained, worked out by hand: DeepSeek-V3's expert all-to-all
(arXiv:2412.19437), the context-parallel K/V ring of Llama 3 at 128K tokens (arXiv:2407.21783),
the packed micro batches of a Qwen3-Next run; the keys they rest on, and the exposed time the
report shows beside the upper bound."""

import json
import math
from pathlib import Path

import pytest
from commands import cli

from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate import run
from costmodel.inputs import scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
DEEPSEEK = SCENARIOS / "deepseek-v3-2048xH800.yaml"
LLAMA = SCENARIOS / "llama-3.1-70b-512xH100.yaml"
QWEN3_NEXT = SCENARIOS / "qwen3-next-80b-256xB200.yaml"
GB = 1e9


def rows(comm: dict, part: str) -> list[dict]:
    return [c for c in comm["collectives"] if part in c["name"]]


def only(comm: dict, part: str) -> dict:
    (row,) = rows(comm, part)
    return row


# ------------------------------------------------------------------ DeepSeek-V3's all-to-all
def test_deepseek_v3_all_to_all_per_gpu_per_step_by_hand():
    """DeepSeek-V3's expert all-to-all, per GPU and step, from the numbers its technical report
    (arXiv:2412.19437) prints:

    - "2048 NVIDIA H800 GPUs", "8 GPUs connected by NVLink and NVSwitch within nodes"
      (3.1); "16-way Pipeline Parallelism (PP), 64-way Expert Parallelism (EP) spanning 8
      nodes, and ZeRO-1 Data Parallelism (DP)" (3.2);
    - "NVLink offers a bandwidth of 160 GB/s, roughly 3.2 times that of IB (50 GB/s)";
      a token is "first transmitted via IB to the GPUs with the same in-node index on its
      target nodes", then "forwarded via NVLink to specific GPUs that host their target
      experts" (3.2.2): it crosses IB once per target node;
    - "61 layers", "hidden dimension to 7168", "all FFNs except for the first three layers"
      MoE, "256 routed experts", "8 experts will be activated for each token, and each token
      will be ensured to be sent to at most 4 nodes", "multi-token prediction depth D is set to
      1", "maximum sequence length to 4K", the batch "keeps 15360" (4.2);
    - "we quantize the activation before MoE up-projections into FP8 and then apply dispatch
      components ... A similar strategy is applied to the activation gradient before MoE
      down-projections. For both the forward and backward combine components, we retain them
      in BF16" (3.3.3), activations scaled "on a 1x128 tile basis (i.e., per token per 128
      channels)" (3.3.2): 1 + 4/128 = 1.03125 bytes an element with an fp32 scale.

    The report prints no micro batch size: the scenario's 1 sequence of 4,096 tokens, so each
    of the 128 DP ranks runs 15,360 / 128 = 120 micro batches a step (an assumption).

    Layers: 61 + 1 MTP = 62 on 16 stages; the most loaded holds ceil(62 / 16) = 4, all MoE
    (58 + 1 MoE layers). Per layer and micro batch a GPU sends its 4,096 tokens (no TP, no CP):
    - over IB: at most 4 nodes, 7 of 8 of them another node: 4 x 7/8 = 3.5 copies of a token;
    - over NVLink: each of the 8 expert copies to its GPU, unless it is the one it landed on
      (1 in 8): 8 x 7/8 = 7 copies.
    Transfers per step: 4 layers x 120 micro batches x 2 (forward and backward) = 960 in each
    direction: the dispatch's (FP8: the forward's dispatch, the backward's gradient before the
    down-projections) and the combine's (BF16).
      IB, dispatch: 960 x 4,096 x 3.5 x 7,168 x 1.03125 = 101,732,843,520 bytes -> 2.035 s
      IB, combine:  960 x 4,096 x 3.5 x 7,168 x 2       = 197,300,060,160 bytes -> 3.946 s
      IB in all: 299,032,903,680 bytes = 299.0 GB per GPU per step, 5.981 s at 50 GB/s;
      NVLink twice that, 598.1 GB, 3.738 s at 160 GB/s: IB sets the time, 30.1% of the
      19.9 s step, which DualPipe hides behind the other micro batch's compute. NCCL's latency
      adds 960 x 22.4 us = 21.5 ms to each direction (a call's base 8.4 us and one step
      between nodes, 14 us).
    Counting every token once per expert in BF16 over IB, as before, sends 8 x 7/8 x 2 = 14
    bytes per element per transfer instead of 3.5 x (1.03125 + 2) / 2 = 5.305: 2.64x."""
    comm = account(scenario.resolve(DEEPSEEK))["communication"]
    dispatch, combine = only(comm, "dispatch (FP8)"), only(comm, "combine")
    copy = 4096 * 7168  # one copy of a micro batch's tokens, elements
    for row, element in ((dispatch, 1.03125), (combine, 2)):
        assert row["calls_per_step"] == 960
        assert row["inter_node_bytes"] == pytest.approx(960 * copy * 3.5 * element)
        assert row["intra_node_bytes"] == pytest.approx(960 * copy * 7 * element)
        # NCCL's latency: one step between nodes a call (8.4 + 14 us), 960 calls: 21.5 ms
        assert row["latency_seconds"] == pytest.approx(960 * (8.4e-6 + 14e-6))
        assert row["seconds"] - row["latency_seconds"] == pytest.approx(
            960 * copy * 3.5 * element / 50e9
        )
        assert row["placement"] == "inter-node" and row["ranks_per_node"] == 8
    assert dispatch["inter_node_bytes"] == pytest.approx(101_732_843_520)
    assert combine["inter_node_bytes"] == pytest.approx(197_300_060_160)
    network = dispatch["inter_node_bytes"] + combine["inter_node_bytes"]
    assert network == pytest.approx(299_032_903_680)
    links = dispatch["seconds"] + combine["seconds"] - 2 * dispatch["latency_seconds"]
    assert links == pytest.approx(5.981, abs=5e-4)
    assert links / 19.9 == pytest.approx(0.301, abs=5e-4)
    # DualPipe: hidden behind the other micro batch's compute
    assert dispatch["exposed_seconds"] == combine["exposed_seconds"] == 0
    assert "DualPipe" in dispatch["hidden_behind"]
    assert 14 / (3.5 * (1.03125 + 2) / 2) == pytest.approx(2.64, abs=5e-3)


def test_deepseek_v3_keys_are_the_reports():
    sc = scenario.resolve(DEEPSEEK)
    assert (sc["moe_router_max_nodes"], sc["fp8_dispatch"], sc["ep_overlap"]) == (
        4,
        True,
        "dualpipe",
    )
    # without DualPipe the all-to-all is exposed, every second of it
    bare = account(scenario.resolve(DEEPSEEK, overrides={"ep_overlap": "none"}))["communication"]
    for row in rows(bare, "EP all-to-all"):
        assert row["exposed_seconds"] == row["seconds"] and row["hidden_behind"] is None


def test_the_mtp_layer_is_counted_when_it_is_trained():
    """With one pipeline stage the MoE layers are 58, and 59 with DeepSeek-V3's MTP layer."""
    calls = {}
    for count_mtp in (False, True):
        values = {"pipeline_parallel": 1, "count_mtp": count_mtp}
        comm = account(scenario.resolve(DEEPSEEK, overrides=values))["communication"]
        calls[count_mtp] = only(comm, "dispatch")["calls_per_step"]
    # 15,360 / 2,048 = 7.5 micro batches a rank: 8 on the slowest; forward and backward
    assert calls == {False: 58 * 8 * 2, True: 59 * 8 * 2}


# ------------------------------------------------------------------ Llama 3 at 128K, CP 16
def llama_128k(tp: int) -> dict:
    """The 70B scenario at Llama 3's long-context shape (arXiv:2407.21783, Table 4: 131,072
    tokens a sequence, CP 16, 16 sequences a DP rank): one DP rank of TP x PP 4 x CP 16."""
    overrides = {
        "seq_len": 131072,
        "mean_tokens_per_sample": 131072,
        "samples_per_step": 16,
        "micro_batch": 1,
        "context_parallel": 16,
        "pipeline_parallel": 4,
        "tensor_parallel": tp,
        "sequence_parallel": tp > 1,
        "num_gpus": tp * 4 * 16,
        "recompute": "none",
        "step_time": 600,
    }
    return account(scenario.resolve(LLAMA, overrides=overrides))["communication"]


def test_llama_128k_context_parallel_traffic_falls_as_one_over_tp():
    """Each TP rank passes only its own K/V heads around the ring. Llama 3.1 70B: 8 K/V heads
    of 128 (K) + 128 (V); 131,072 / 16 = 8,192 tokens a CP rank: a K/V block of
    8,192 x 8/TP x 256 x 2 bytes = 33,554,432 / TP. p2p: 15 passes forward, 30 backward
    (K/V and dK/dV) per layer and micro batch; 80 / 4 = 20 layers, 16 micro batches:
    20 x 16 x 45 x 33,554,432 / TP = 483.2 GB / TP (before, 483.2 GB whatever the TP)."""
    for tp in (1, 2, 4, 8):
        ring = only(llama_128k(tp), "CP ring")
        assert ring["bytes_per_gpu"] == pytest.approx(20 * 16 * 45 * 33_554_432 / tp)
    assert only(llama_128k(8), "CP ring")["bytes_per_gpu"] / GB == pytest.approx(60.4, abs=0.05)


# ------------------------------------------------------------------ Qwen3-Next, packed
def test_qwen3_next_packed_run_counts_rows_not_documents():
    """3,072 documents, 15,737,818 tokens once cut to the 65,536-token rows, on 64 DP ranks: a
    micro batch is a packed row, so 15,737,818 / (65,536 x 64) = 3.75 micro batches a
    pipeline (4 on the slowest), not 3,072 / 64 = 48 documents."""
    sc = scenario.resolve(QWEN3_NEXT)
    assert sc["batching"] == "packed" and sc["data_parallel"] == 64
    assert sc["tokens_per_step"] == 15_737_818
    m = 15_737_818 / (65536 * 64)
    assert sc["micro_batches_per_step"] == pytest.approx(m) == pytest.approx(3.752, abs=1e-3)
    assert run.micro_batches(sc) == pytest.approx(m)
    acc = account(sc)
    assert acc["parallel"]["micro_batches"] == pytest.approx(m)
    comm = acc["communication"]
    assert comm["compute"]["micro_batches"] == math.ceil(m) == 4
    # every per-micro-batch transfer counted 4 times: 48 MoE layers x 4 micro batches x 3
    # (forward, again under full recompute, backward). The EP group of 8 lies in one node of
    # 8: Megatron-Core places the expert layers' ranks ETP (= TP 1) fastest, then EP, CP
    # folded into the expert DP (communication.expert_tp); in the dense order (TP, CP 4, EP)
    # it would stride over CP and span 4 nodes. Each of the 16,384 tokens a CP rank holds of
    # the row goes as 10 routed copies (top-10 of 512 experts), 7/8 of them to another GPU of
    # its node, in BF16, none over the network
    dispatch = only(comm, "dispatch")
    assert dispatch["calls_per_step"] == 48 * 4 * 3
    assert dispatch["inter_node_bytes"] == 0
    assert dispatch["intra_node_bytes"] == pytest.approx(48 * 4 * 3 * 16384 * 10 * 7 / 8 * 2048 * 2)
    # the K/V ring of the 12 full-attention layers: 3 passes forward (twice) and 6 backward
    assert only(comm, "CP ring")["calls_per_step"] == 12 * 4 * 12
    assert dispatch["seconds"] / sc["step_time"] < 1


def test_the_qwen3_next_lengths_file_is_the_generators():
    import importlib.util

    data = Path(__file__).resolve().parents[1] / "data"
    spec = importlib.util.spec_from_file_location("make", data / "make_qwen3_next_lengths.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    shipped = [int(line) for line in (data / "qwen3-next-lengths.txt").read_text().split()]
    assert shipped == make.lengths() and len(shipped) == 3072


# ------------------------------------------------------------------ keys, report, JSON
NEW_KEYS = {
    "cp_comm_type": "p2p",
    "collective_latency": "nccl",
    "moe_router_max_nodes": None,
    "fp8_dispatch": False,
    "tp_comm_overlap": False,
    "overlap_grad_reduce": True,
    "overlap_param_gather": True,
    "ep_overlap": "none",
    "ep_overlap_fraction": 0.5,
    "moe_shared_expert_overlap": False,
}


def test_the_course_states_each_communication_key():
    course = scenario.resolve()
    assert {key: course[key] for key in NEW_KEYS} == NEW_KEYS
    comm = account(course)["communication"]
    assert comm["settings"] == NEW_KEYS


@pytest.mark.parametrize(
    "setting, message",
    [
        ("cp_comm_type=ring", "cp_comm_type: 'ring' is not allowed; expected one of p2p, "),
        (
            "ep_overlap=always",
            "ep_overlap: 'always' is not allowed; expected one of none, partial, dualpipe",
        ),
        ("moe_router_max_nodes=0", "moe_router_max_nodes: 0 is not allowed; expected a positive"),
        ("fp8_dispatch=2", "fp8_dispatch: 2 is not allowed; expected true or false"),
        (
            "collective_latency=ring",
            "collective_latency: 'ring' is not allowed; expected one of nccl, none",
        ),
    ],
)
def test_bad_communication_keys_are_one_line(setting, message, tmp_path):
    result = cli("report", "--set", setting, cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.startswith("costmodel: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr


def test_report_shows_the_upper_bound_and_the_exposed_time(tmp_path):
    text = cli("report", "--scenario", str(DEEPSEEK), cwd=tmp_path).stdout
    section = text[text.index("Communication per step") : text.index("Levers ranked")]
    assert "total (upper bound: nothing overlapped)" in section
    assert "exposed (overlap rules)" in section
    assert "hides behind the other micro batch's forward and backward (DualPipe" in section
    assert "moe_router_max_nodes 4, fp8_dispatch true" in section
    data = json.loads(cli("report", "--scenario", str(DEEPSEEK), "--format", "json").stdout)
    comm = data["communication"]
    assert comm["exposed_seconds"] <= comm["seconds"]
    assert comm["exposed_share"] == pytest.approx(comm["exposed_seconds"] / 19.9)
    assert comm["exposed_seconds"] == pytest.approx(
        sum(c["exposed_seconds"] for c in comm["collectives"])
    )
    for c in comm["collectives"]:
        assert 0 <= c["exposed_seconds"] <= c["seconds"] and "hidden_behind" in c
    assert set(comm["compute"]) >= {"forward_seconds", "backward_seconds", "attention_seconds"}
    assert comm["compute"]["forward_seconds"] > 0 and "step-time model" in comm["compute"]["basis"]
