"""The parallel layout and the memory settings of a resolved scenario: the checks that it
divides (one line naming the keys when it does not), data_parallel, the effective
expert_parallel and the micro batches per step; the recompute fractions. The rules beyond a
divisor (a micro batch per pipeline, Ulysses CP and the heads, the virtual stages, DualPipe's
pipeline, the cross-entropy's pieces) are functions that `costmodel plan`'s search calls too."""

from __future__ import annotations

import math
from typing import Any

from costmodel.derive import activations as act
from costmodel.derive import plain
from costmodel.errors import CostModelError
from costmodel.formats import shown
from costmodel.inputs import hardware
from costmodel.inputs.assumptions import fitted_expert_parallel
from costmodel.inputs.model_shape import scenario_shape, tensor_parallel_widths
from costmodel.inputs.shape import ModelShape
from costmodel.inputs.stages import UNEVEN_KEYS, interleaving_refusal, stage_split_refusal
from costmodel.records import frozen_dataclass


class ShapeOf:
    """What the layout's rules ask for the model shape, called with no argument:
    `model_shape.scenario_shape(values)`, built at the first call and kept (the rules ask it up
    to three times: TP's widths, Ulysses' heads, selective recompute's modules), or the shape
    given (`known`: the what-if path's, where no key of the shape changed, so none is built
    again)."""

    def __init__(self, values: dict[str, Any], known: tuple[ModelShape, str] | None = None):
        self.values = values
        self.built = known

    def __call__(self) -> tuple[ModelShape, str]:
        if self.built is None:
            self.built = scenario_shape(self.values)
        return self.built


def shape_of(values: dict[str, Any]) -> ShapeOf:
    """The values' model shape, built when a rule first asks (`ShapeOf`)."""
    return ShapeOf(values)


@frozen_dataclass
class Layout:
    """The parallel layout of a resolved scenario (Scenario.layout): the sizes, the pipeline
    schedule and the micro batches, ZeRO and the node size."""

    tensor_parallel: int
    pipeline_parallel: int
    virtual_pipeline: int | None
    pipeline_schedule: str
    context_parallel: int
    expert_parallel: int
    expert_tensor_parallel: int | None
    data_parallel: int
    micro_batch: int
    micro_batches_per_step: int | float
    sequence_parallel: bool
    zero_stage: int
    gpus_per_node: int


#: The scenario keys of Layout (each its attribute of the same name).
LAYOUT_KEYS = tuple(Layout.__dataclass_fields__)
#: The splits of the model whose product divides the GPUs (data parallelism takes the rest).
SPLIT_KEYS = ("tensor_parallel", "pipeline_parallel", "context_parallel")


def layout_error(key: str, value: Any, allowed: str) -> CostModelError:
    return CostModelError(f"{key}: {shown(value)} is not allowed; expected {allowed}")


# ---------------------------------------------------------------- rules `costmodel plan` shares
# Each rule is one function that resolution (below) and the plan's search
# (costmodel.evaluate.plan.plan_space) both call, so a layout the search proposes resolves, and one
# the report accepts is one the search can rank.


def enough_micro_batches(micro_batches, batching: str = "padded", samples=None, dp=None):
    """Whether each pipeline has at least one micro batch of the step: padded, at least one
    (`plain.micro_batches`, samples over DP pipelines of micro_batch samples: Megatron-LM's
    global batch is micro batches x micro_batch x DP); packed, at least one document (`samples`
    at least `dp`), its rows of seq_len slots possibly part-filled (fewer micro batches than
    one, the real tokens counted). With fewer, some pipelines have nothing to run while the
    others run a whole micro batch, and the step's figures, which take the micro batches per
    pipeline as a number, would count the fraction as if the step were shorter. Elementwise on
    NumPy arrays (costmodel sweep's points)."""
    if batching == "padded":
        return micro_batches >= 1
    return samples >= dp


def cp_divides(seq_len, cp: int):
    """Whether context parallelism of `cp` ranks splits the sequence: Megatron-LM's
    load-balanced CP (get_batch_on_this_cp_rank) cuts each sequence into 2 x CP chunks of equal
    length, each rank taking one from either end (the causal mask's work balanced), so 2 x CP
    divides seq_len; without CP (1) nothing is cut. The one CP rule of resolution, the plan's
    search, the sweep and the layouts table (evaluate.plan.layouts). Elementwise on NumPy arrays of
    seq_len."""
    return True if cp == 1 else seq_len % (2 * cp) == 0


def ulysses_heads(shape, tp: int) -> tuple[int, int]:
    """(query heads, K/V heads) of one TP rank, which Ulysses context parallelism
    (cp_comm_type a2a) splits over the CP ranks: K/V heads fewer than TP are replicated, one a
    rank (as the GEMM list and the communication model count them)."""
    return shape.num_heads // tp, max(shape.num_kv_heads // tp, 1)


def ulysses_divides(shape, tp: int, cp: int) -> bool:
    """Ulysses CP (cp_comm_type a2a) turns each rank's share of the sequence into a share of
    its heads with an all-to-all: TransformerEngine's AttnFuncWithCPAndQKVOA2A asserts that CP
    divides both the query and the K/V heads of the rank (`ulysses_heads`)."""
    return all(heads % cp == 0 for heads in ulysses_heads(shape, tp))


def virtual_splits_stage(num_layers: int, pp: int, virtual: int) -> bool:
    """Interleaved 1F1B's `virtual` model chunks split the most loaded stage's layers
    (ceil(num_layers / pp), the stage every figure counts) into chunks of equal size. Where PP
    divides the layers this is Megatron-LM's num_layers % (PP x V) = 0; where it does not, an
    uneven first or last stage (Megatron-LM's --decoder-first/last-pipeline-num-layers, or its
    embedding and loss counted as layers) leaves the other stages even. With first_stage_layers
    or last_stage_layers stated, every stage's layers are checked instead
    (inputs.stages.stage_split_refusal)."""
    return -(-num_layers // pp) % virtual == 0


def dualpipe_allows(pp: int) -> bool:
    """DualPipe (DeepSeek-V3; deepseek-ai/DualPipe's DualPipe.step asserts num_ranks % 2 == 0)
    feeds micro batches from both ends of the pipeline, each rank holding a stage of either
    half: an even number of ranks, as its bubble (PP/2 - 1)(F&B + B - 3W), which
    derive.step_time counts, supposes; without a pipeline (PP 1) the schedule is moot, as any
    schedule is. (DualPipe.step also asserts an even number of micro batches, at least 2 x PP;
    the step-time model takes the micro batches as a number, as it does 1F1B's, which are at
    least PP, and does not require them.)"""
    return pp == 1 or pp % 2 == 0


def check_ep_overlap(ep_overlap: str, shared_overlap: bool) -> None:
    """moe_shared_expert_overlap only with ep_overlap none: Megatron-Bridge's communication-
    overlap guide turns it off under the dispatch overlap; under partial or dualpipe the
    all-to-all already hides behind that compute."""
    if shared_overlap and ep_overlap != "none":
        why = f"false with ep_overlap {ep_overlap} (the shared expert's overlap needs none)"
        raise layout_error("moe_shared_expert_overlap", True, why)


def ce_chunks_most(micro_batch: int, seq_len: int, cp: int) -> int:
    """The most pieces a chunked cross-entropy can split a micro batch's logits into on one
    GPU: one token's logits a piece (micro_batch x seq_len / CP tokens; TP splits the
    vocabulary, not the tokens)."""
    return micro_batch * seq_len // cp


def _check_tensor_parallel(values: dict[str, Any], tp: int, shape: ShapeOf) -> None:
    """TP divides every width of the model that the GEMM list splits (the heads, the MLP and
    expert widths, the vocabulary, ...), of the shape the list uses: the model config, or the
    shape built from the keys (whose heads, with num_heads unset, are attention_dim / head_dim).
    So no GEMM of `costmodel gemms` has a fraction of a column or a head."""
    model, source = shape()
    for what, width in tensor_parallel_widths(model, values["num_mtp_layers"]):
        if width % tp:
            raise layout_error(
                "tensor_parallel", tp, f"a divisor of {what} ({width:,}; shape from {source})"
            )


def _check_node_links(values: dict[str, Any]) -> None:
    """A node larger than the GPU's NVLink domain needs a bandwidth between its GPUs: the GPU
    table's PCIe figure where it has one, else the scenario's intra_node_bandwidth."""
    gpu, per_node = hardware.GPUS[values["gpu"]], values["gpus_per_node"]
    if values.get("intra_node_bandwidth") is None and gpu.intra_node_bandwidth(per_node) is None:
        raise layout_error(
            "gpus_per_node",
            per_node,
            f"at most {gpu.nvlink_gpus} for {gpu.name} (its NVLink domain; the GPU table has no "
            "bandwidth for more GPUs in a node), or intra_node_bandwidth set",
        )


def check_layout(
    values: dict[str, Any], sources: dict[str, str], shape: ShapeOf | None = None
) -> None:
    """Check the parallel layout and derive data_parallel, the effective expert_parallel and
    the micro batches per step: one line naming the keys when it does not divide.

    expert_parallel the team did not set is the course's 8, brought down to the largest size
    that divides the experts and DP (source `derived`); one the team set must divide them.
    A dense model has EP = 1. `shape`: the model shape of the values (`shape_of`)."""
    shape = shape or shape_of(values)
    tp, pp, cp = (values[k] for k in SPLIT_KEYS)
    gpus = values["num_gpus"]
    if gpus % (tp * pp * cp):
        raise layout_error(
            "num_gpus",
            gpus,
            f"a multiple of tensor_parallel x pipeline_parallel x context_parallel "
            f"({tp} x {pp} x {cp} = {tp * pp * cp})",
        )
    dp = gpus // (tp * pp * cp)
    values["data_parallel"] = dp
    sources["data_parallel"] = "derived"
    _check_node_links(values)
    heads = values.get("num_heads")
    if heads is not None and heads % tp:
        raise layout_error("tensor_parallel", tp, f"a divisor of num_heads ({heads})")
    if tp > 1:
        _check_tensor_parallel(values, tp, shape)
    if pp > values["num_layers"]:  # an uneven split is allowed (as Megatron-LM's layouts)
        raise layout_error("pipeline_parallel", pp, f"at most num_layers ({values['num_layers']})")
    if not cp_divides(values["seq_len"], cp):
        raise layout_error(
            "context_parallel",
            cp,
            f"1, or a size whose 2 x context_parallel divides seq_len ({values['seq_len']:,}): "
            "load-balanced CP cuts each sequence into 2 x CP chunks",
        )
    if values["cp_comm_type"] == "a2a":
        _check_ulysses(values, tp, cp, shape)
    if values["sequence_parallel"] and tp == 1 and sources.get("sequence_parallel") != "course":
        raise layout_error("sequence_parallel", True, "false when tensor_parallel is 1")
    if values["sequence_parallel"] and (values["seq_len"] // cp) % tp:
        raise layout_error(
            "tensor_parallel",
            tp,
            f"a divisor of seq_len / context_parallel ({values['seq_len'] // cp:,}) with "
            "sequence_parallel (each TP rank holds its share of the tokens)",
        )
    check_expert_layout(values, sources, dp, shape)
    check_ep_overlap(values["ep_overlap"], values["moe_shared_expert_overlap"])
    # rows of seq_len slots per pipeline: padded, one sample a row; packed, documents fill rows
    values["micro_batches_per_step"] = plain.micro_batches(
        values["batching"],
        samples=values["samples_per_step"],
        tokens=values["tokens_per_step"],
        seq_len=values["seq_len"],
        dp=dp,
        micro_batch=values["micro_batch"],
    )
    sources["micro_batches_per_step"] = "derived"
    _check_micro_batches(values)


def expert_split(tp: int, cp: int, dp: int, ep: int, etp: int | None) -> tuple[int, int]:
    """(ETP, EDP) of a layout: the routed experts' TP size (expert_tensor_parallel; null: TP)
    and their data-parallel size, the ranks holding the same expert shard. Megatron-Core's MoE
    parallel folding (parallel_state.initialize_model_parallel; Liu et al., arXiv:2504.14960)
    lays a stage's TP x CP x DP ranks out again for the expert layers as ETP x EP x EDP, so
    EDP = TP x CP x DP / (ETP x EP); with ETP = TP this is the DP x CP / EP of EP inside DP."""
    etp = tp if etp is None else etp
    return etp, tp * cp * dp // (etp * ep)


def check_expert_layout(
    values: dict[str, Any], sources: dict[str, str], dp: int, shape: ShapeOf
) -> None:
    """expert_parallel and expert_tensor_parallel. Without ETP (null) the EP ranks are
    data-parallel ranks: EP divides the experts and DP. With ETP (folding) the expert layers'
    ranks are ETP x EP x EDP per stage: ETP x EP divides TP x CP x DP, ETP the routed expert
    width. expert_parallel the team did not set is the course's 8, brought down to the largest
    size that divides the experts and the ranks (DP; with ETP, TP x CP x DP / ETP; source
    `derived`). A dense model has EP = 1 and no ETP."""
    experts, ep = values["num_experts"], values["expert_parallel"]
    etp = values.get("expert_tensor_parallel")
    team_ep = sources.get("expert_parallel") != "course"
    if experts == 0:
        if team_ep and ep != 1:
            raise layout_error("expert_parallel", ep, "1 for a dense model (num_experts = 0)")
        if etp is not None:
            raise layout_error("expert_tensor_parallel", etp, "null for a dense model")
        values["expert_parallel"], sources["expert_parallel"] = 1, "derived"
        return
    ranks, what = dp, f"data_parallel ({dp})"
    if etp is not None:
        tp, cp = values["tensor_parallel"], values["context_parallel"]
        ranks, what = tp * cp * dp, f"TP x CP x DP ({tp} x {cp} x {dp} = {tp * cp * dp:,})"
        width = shape()[0].moe_intermediate_size
        if ranks % etp or width % etp:
            raise layout_error(
                "expert_tensor_parallel",
                etp,
                f"a divisor of {what} and of the routed expert width ({width:,})",
            )
        ranks, what = ranks // etp, f"{what} / expert_tensor_parallel {etp}"
    if team_ep:
        if experts % ep or ranks % ep:  # EP ranks: DP ranks, or folded over the stage's ranks
            raise layout_error(
                "expert_parallel", ep, f"a divisor of num_experts ({experts}) and of {what}"
            )
        return
    fitted = fitted_expert_parallel(experts, ranks, ep)
    if fitted != ep:
        values["expert_parallel"], sources["expert_parallel"] = fitted, "derived"


def _check_ulysses(values: dict[str, Any], tp: int, cp: int, shape: ShapeOf) -> None:
    """Ulysses CP splits the heads of a TP rank (`ulysses_divides`)."""
    model, source = shape()
    if not ulysses_divides(model, tp, cp):
        query, kv = ulysses_heads(model, tp)
        raise layout_error(
            "context_parallel",
            cp,
            f"a divisor of the query heads ({query}) and the K/V heads ({kv}) of a TP rank "
            f"with cp_comm_type a2a (Ulysses splits each rank's heads over CP; shape from "
            f"{source}, tensor_parallel {tp})",
        )


def _check_micro_batches(values: dict[str, Any]) -> None:
    """At least one micro batch per pipeline (`enough_micro_batches`): padded, a micro batch
    too large where one of a sample would do is named, else the GPUs (too many pipelines)."""
    dp, b, samples = values["data_parallel"], values["micro_batch"], values["samples_per_step"]
    batching = values["batching"]
    if enough_micro_batches(values["micro_batches_per_step"], batching, samples, dp):
        return
    if batching == "padded" and b > 1 and samples >= dp:
        raise layout_error(
            "micro_batch",
            b,
            f"at most samples_per_step ({samples:,}) / data_parallel ({dp:,}): at least one "
            "micro batch per pipeline and step",
        )
    tp, pp, cp = (values[k] for k in SPLIT_KEYS)
    pipelines = f"data_parallel = num_gpus / (TP {tp} x PP {pp} x CP {cp})"
    if batching == "padded":
        allowed = (
            f"at least one micro batch per pipeline and step: data_parallel x micro_batch "
            f"({dp:,} x {b:,} = {dp * b:,}; {pipelines}) at most samples_per_step ({samples:,})"
        )
    else:
        allowed = (
            f"at least one sample per pipeline and step (packed batching): data_parallel "
            f"({dp:,}; {pipelines}) at most samples_per_step ({samples:,})"
        )
    raise layout_error("num_gpus", values["num_gpus"], allowed)


def _module_params(values: dict[str, Any], model: ModelShape) -> tuple[dict[str, float], float]:
    """Matmul parameters per token of each module whose recompute redoes weight GEMMs
    (`recompute.WEIGHT_MODULES`), from the scenario's shape `model`, and the N they are a share
    of."""
    shape = model
    parts = {key: float(value) for key, value in shape.breakdown.items()}
    up = 0.0
    if shape.mla:  # MLA's up-projections: q_b (from the query latent) and kv_b, per MLA layer
        nope = shape.qk_head_dim - shape.qk_rope_head_dim
        query = shape.q_lora_rank * shape.num_heads * shape.qk_head_dim if shape.q_lora_rank else 0
        kv = shape.kv_lora_rank * shape.num_heads * (nope + shape.v_head_dim)
        up = float(query + kv) * values["num_full_attention_layers"]
    params = float(shape.activated_params)
    if values["num_mtp_layers"]:
        params += float(shape.mtp_activated_params)
    modules = {
        "mlp": parts["dense_mlp"],
        "moe": parts["routed_experts_active"] + parts["router"] + parts["shared_experts"],
        "shared_experts": parts["shared_experts"],
        "mla_up_proj": up,
    }
    return modules, params


def recompute_fractions(
    values: dict[str, Any], policy: str | None = None, modules=None, shape: ShapeOf | None = None
) -> dict[str, Any]:
    """The weights and attention-core fractions recompute redoes (`recompute.fractions`) for the
    scenario's policy, or another (`policy`, with `modules` for selective: the scenario's, else
    Megatron-LM's default set), and where r comes from. `shape`: the values' model shape
    (`shape_of`; built from the values when not given)."""
    policy = policy or values["recompute"]
    if policy == "selective" and modules is None:
        modules = values.get("recompute_modules") or list(act.DEFAULT_RECOMPUTE_MODULES)
    stage_layers = math.ceil(values["num_layers"] / values["pipeline_parallel"])
    if policy == "selective":
        params, n = _module_params(values, (shape or shape_of(values))()[0])
    else:
        params, n = {}, 1.0
    full = policy == "full" and values["recompute"] == "full"
    return plain.fractions(
        policy,
        modules or (),
        params,
        n,
        selective_fraction=values.get("selective_recompute_fraction"),
        layers_share=plain.recomputed_layers(
            stage_layers,
            values.get("recompute_num_layers") if full else None,
            values["recompute_method"],
        ),
    )


def _schedule(values: dict[str, Any]) -> None:
    """virtual_pipeline goes with the interleaved schedule: at least 2 chunks that split the
    most loaded stage's layers evenly (`virtual_splits_stage`); DualPipe with an even pipeline
    (`dualpipe_allows`)."""
    schedule, chunks = values["pipeline_schedule"], values.get("virtual_pipeline")
    if schedule == "interleaved" and chunks is None:
        raise layout_error(
            "virtual_pipeline",
            chunks,
            "an integer of at least 2 with pipeline_schedule interleaved",
        )
    if schedule != "interleaved" and chunks is not None:
        raise layout_error(
            "virtual_pipeline", chunks, "null unless pipeline_schedule is interleaved"
        )
    layers, pp = values["num_layers"], values["pipeline_parallel"]
    uneven = pp > 1 and any(values.get(key) for key in UNEVEN_KEYS)  # one stage: the even check
    if chunks is not None and not uneven and not virtual_splits_stage(layers, pp, chunks):
        raise layout_error(
            "virtual_pipeline",
            chunks,
            f"a divisor of the layers of a pipeline stage ({-(-layers // pp)}: num_layers / "
            "pipeline_parallel, rounded up): chunks of equal size",
        )
    if schedule == "dualpipe":
        _check_dualpipe(values)
    refused = interleaving_refusal(values) or stage_split_refusal(values)
    if refused:
        raise layout_error(*refused)


def _check_dualpipe(values: dict[str, Any]) -> None:
    """DualPipe's even pipeline (`dualpipe_allows`)."""
    pp = values["pipeline_parallel"]
    if not dualpipe_allows(pp):
        raise layout_error(
            "pipeline_parallel",
            pp,
            "an even number (or 1) with pipeline_schedule dualpipe (DualPipe feeds the "
            "pipeline from both ends, pairing its ranks)",
        )


def _check_ce_chunks(values: dict[str, Any], sources: dict[str, str]) -> None:
    """ce_chunks at most the tokens of a micro batch on one GPU (`ce_chunks_most`): the
    course's 8 is brought down to them (source `derived`), a team's is refused beyond them."""
    most = ce_chunks_most(values["micro_batch"], values["seq_len"], values["context_parallel"])
    chunks = values["ce_chunks"]
    if chunks <= most:
        return
    if sources.get("ce_chunks") == "course":
        values["ce_chunks"], sources["ce_chunks"] = most, "derived"
        return
    raise layout_error(
        "ce_chunks",
        chunks,
        f"at most the tokens of a micro batch on one GPU (micro_batch x seq_len / "
        f"context_parallel = {most:,}): a piece of the logits holds at least one token's",
    )


def memory_settings(
    values: dict[str, Any], sources: dict[str, str], shape: ShapeOf | None = None
) -> None:
    """The memory and recompute keys that go together: recompute_modules only with selective
    recompute (null: Megatron-LM's default set), recompute_num_layers (more than a stage's layers:
    all of them) and a team's recompute_method only with full, FP8 storage only with FP8 training, cross_entropy null
    the framework's; then the recompute fractions of the weights and of the attention core
    (`recompute.fractions`), derived."""
    policy = values["recompute"]
    if values.get("recompute_modules") is not None and policy != "selective":
        raise layout_error(
            "recompute_modules", values["recompute_modules"], "null unless recompute is selective"
        )
    for key in ("recompute_num_layers", "recompute_method"):
        given = values.get(key) is not None and sources.get(key) != "course"
        if given and policy != "full":
            raise layout_error(key, values[key], "unset unless recompute is full")
    if values["fp8_activations"] != "none" and values["fp8"] == "none":
        raise layout_error(
            "fp8_activations", values["fp8_activations"], "none unless fp8 is hybrid"
        )
    if values["fp8_activations"] == "moe_inputs" and not values["num_experts"]:
        raise layout_error(
            "fp8_activations",
            "moe_inputs",
            "none or linear_inputs for a dense model (num_experts = 0: no MoE inputs to store)",
        )
    _check_ce_chunks(values, sources)
    if values.get("cross_entropy") is None:
        values["cross_entropy"] = act.FRAMEWORKS[values["framework"]].cross_entropy
        sources["cross_entropy"] = "derived"
    if policy == "selective" and values.get("recompute_modules") is None:
        values["recompute_modules"] = list(act.DEFAULT_RECOMPUTE_MODULES)
        sources["recompute_modules"] = "derived"
    _schedule(values)
    got = recompute_fractions(values, shape=shape)
    values["recompute_weights_fraction"] = got["weights"]
    values["recompute_core_fraction"] = got["core"]
    values["recompute_fraction_from"] = got["from"]
    for key in ("recompute_weights_fraction", "recompute_core_fraction", "recompute_fraction_from"):
        sources[key] = "derived"
