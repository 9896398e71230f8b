"""Every value the course assumes and the scenario does not decide, once, with its source and
what it is for; and the two lists that name the other assumptions: the scenario keys whose course
value is one (`SCENARIO_ASSUMPTION_KEYS`) and the communication model's statements
(`COMMUNICATION_ASSUMPTIONS`).

A notebook or the report that rests on one of these names it (`assumed(name)`), so that a team
can see which conclusions are the course's and not its own.
"""

from __future__ import annotations

from costmodel.records import frozen_dataclass

#: The course's model, as shipped with the package (a preset): its shape stands in for widths
#: a scenario without a model config does not give.
COURSE_MODEL = "qwen3.6-35b-a3b"


@frozen_dataclass
class Assumption:
    """One value the course assumes: the value, where it comes from, what it is for."""

    value: object
    source: str
    use: str


ASSUMPTIONS: dict[str, Assumption] = {
    "expert_parallel": Assumption(
        8,
        "course section 06: the project's EP = 8",
        "the EP size a scenario or layout search starts from; brought down by "
        "`fitted_expert_parallel` where it does not divide the experts and the ranks",
    ),
    "micro_batch_speedup": Assumption(
        (1.1, 1.3),
        "course section 06: micro batch 1 -> 2, '1.1~1.3x', not derived",
        "the GEMM-rate gain of a larger micro batch in the optimisation path (notebook 08)",
    ),
    "communication_share": Assumption(
        0.03,
        "course section 06: communication is under 3% of the step",
        "the course's bound on the communication share, set against the layout's estimate",
    ),
    "head_dim": Assumption(
        128,
        "course section 06.6: head_dim is 'usually 128' (used only when the scenario gives "
        "neither head_dim nor num_heads; Qwen3.6 itself uses 256)",
        "the head width of a shape given by numbers without head_dim or num_heads",
    ),
    "ce_chunks": Assumption(
        8,
        "chunked cross-entropy pieces; the course's 15 GB -> 2 GB is about 1/8",
        "the pieces the chunked cross-entropy lever splits the logits into",
    ),
    "linear_attention_chunk": Assumption(
        64,
        "chunk size of the chunked gated-delta rule: chunk_size=64 in transformers' "
        "torch_chunk_gated_delta_rule and the flash-linear-attention kernels",
        "the chunk C of the gated-DeltaNet FLOP count and of the memory model and its checks",
    ),
    "attention_kernel_speedup": Assumption(
        1.5,
        "a newer attention kernel (e.g. FlashAttention "
        "3 on Hopper) over the current one; to be measured",
        "the attention-kernel lever of the optimisation path (Amdahl over the attention share)",
    ),
}


def assumed(name: str):
    return ASSUMPTIONS[name].value


def fitted_expert_parallel(num_experts: int, ranks: int, preferred: int | None = None) -> int:
    """The rule for an EP size nobody chose: the largest size <= preferred (default: the
    course's EP, `assumed("expert_parallel")`) that divides both the experts and the ranks the
    experts are spread over (1 for a dense model)."""
    preferred = assumed("expert_parallel") if preferred is None else preferred
    if num_experts <= 0:
        return 1
    return max(d for d in range(1, preferred + 1) if num_experts % d == 0 and ranks % d == 0)


#: Scenario keys whose course value (inputs/scenarios/course.yaml, with its comment as the
#: source) is an assumption a team should replace with its own: the account lists each with
#: where its value came from (costmodel.evaluate.account.account.assumption_sources).
SCENARIO_ASSUMPTION_KEYS: tuple[str, ...] = (
    "expert_parallel",
    "communication_share",
    "training_hours",
    "ce_chunks",
    "attention_kernel_speedup",
    "selective_recompute_fraction",
    "gpus_per_node",
    "zero_stage",
    "grad_bytes",
    "intra_node_bandwidth",
    "inter_node_bandwidth",
    "memory_reserve",
    "attention_on_padding",
)

#: The communication account's model (costmodel.evaluate.communication.communication): statements, each
#: naming where it comes from; the report prints them with the traffic.
COMMUNICATION_ASSUMPTIONS: tuple[str, ...] = (
    "one network card per GPU; its bandwidth and NVLink's are one-direction peaks",
    "ring collectives across nodes: each GPU's NIC carries 1/g_n of what the GPU sends "
    "(NCCL's rings leave each node through different NICs)",
    "DP: ZeRO 0 and 1 reduce the gradients once per step (accumulated over the micro batches, "
    "as Megatron-LM's distributed optimizer does); ZeRO 2 reduce-scatters each micro batch's; "
    "ZeRO 3 also gathers the weights for each micro batch's forward and backward",
    "dense weights reduced over DP x CP ranks, routed experts over DP x CP / EP ranks; "
    "experts split by TP as well (expert TP = TP); embedding and lm_head spread evenly over PP",
    "EP: each rank dispatches its b S / (CP TP) tokens, every one to k experts, routed evenly; "
    "a token crosses the network once per destination node (per-node de-duplication, as "
    "DeepSeek-V3's kernels and DeepEP), to at most moe_router_max_nodes nodes (else at most "
    "min(k, the group's nodes)), then NVLink to its experts' GPUs; dispatch in FP8 (1 byte + "
    "an fp32 scale per 128) with fp8_dispatch, combine in BF16",
    "each parallelism's traffic on the pipeline stage with the most of its layers: ceil(L / PP) "
    "layers, MoE or full-attention layers first (an upper bound); MTP layers counted when they "
    "are trained",
    "PP: a middle stage's point-to-point traffic, split over TP only with sequence parallelism "
    "(Megatron-Core's tensor shapes)",
    "full recompute repeats the forward's TP, CP and EP collectives in the backward",
    "linear-attention layers under CP pass their recurrent state (per sequence, not per "
    "token): not counted",
)
