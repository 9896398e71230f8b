"""Communication of one training step for a parallel layout, in numbers (plain numbers in, not a
scenario): every collective with its group, where it runs, the bytes each GPU sends, the
bandwidth it gets, its seconds and its share of the step, and what of it compute hides; the
totals; the pipeline bubble.

The closed forms are in `costmodel.derive.communication` (sources there); this module puts the
ranks on nodes and evaluates them, through their generated numeric forms (`costmodel.derive.
numeric`: the tables of `costmodel.derive.numeric_forms.communication_tables`).

Where a group runs. Ranks are numbered TP fastest, then CP, then EP, then the rest of DP, then
PP outermost (Megatron-LM's order; the EP ranks are DP ranks, the innermost e_p of them); rank
r sits on node r // gpus_per_node. A kind of group runs intra-node when every group of that
kind lies on one node, at the intra-node bandwidth; else it spans nodes, with g_n of its ranks
on each node (the fewest, when uneven), and uses NVLink and the network at once (the split of
`derive.communication.across_nodes`; the EP all-to-all's own split, de-duplicated per node).

Two totals. `seconds` and `share` are the upper bound: nothing overlaps, neither collectives
with each other nor with compute, and each transfer runs at the links' peak. `exposed_seconds`
and `exposed_share` apply the overlap rules (OVERLAP_RULES): a collective hides behind the
compute it can run beside (`hidden_behind`), that compute taken as the phase's hardware FLOPs at
the GPU's peak, a lower bound on its time (the caller's `Compute`), so the exposed time is an
upper bound too. Collectives behind the same compute share it, as if one after another.
"""

from __future__ import annotations

import copy

from costmodel.derive import numeric, plain
from costmodel.derive.lanes import as_float, is_lanes
from costmodel.errors import CostModelError
from costmodel.evaluate.communication.comm_overlap import (  # noqa: F401 (re-exported: the overlap rules)
    OVERLAP,
    OVERLAP_RULES,
    WINDOWS,
    Compute,
    expose,
    exposed_seconds,
)
from costmodel.evaluate.communication.comm_placement import (  # noqa: F401 (re-exported: the placement)
    DIMS,
    EXPERT_PLACEMENT_RULE,
    GROUPS,
    PLACEMENT_RULE,
    expert_sizes,
    placement,
)
from costmodel.evaluate.communication.comm_rows import (  # noqa: F401 (re-exported: the table of rows)
    Collective,
    Table,
    context_parallel,
    data_parallel,
    expert_parallel,
    num,
    pipeline_parallel,
    tensor_parallel,
)
from costmodel.inputs import hardware
from costmodel.inputs.assumptions import COMMUNICATION_ASSUMPTIONS
from costmodel.inputs.fields import EP_OVERLAPS
from costmodel.inputs.layout import check_ep_overlap
from costmodel.records import frozen_dataclass

#: The CP communication types (Megatron-LM's --cp-comm-type; its `allgather` is all_gather).
CP_COMM_TYPES = tuple(numeric.CP_COLLECTIVES)


@frozen_dataclass
class Communication:
    """The collectives of one step on one GPU, their time and share, and what stays exposed."""

    collectives: tuple[Collective, ...]
    bytes_per_gpu: float
    seconds: float  # the upper bound: nothing overlapped
    share: float
    #: The estimate is longer than the measured step: it contradicts the step time (a slower link
    #: or a bigger layout than the run has), so no conclusion may rest on it.
    exceeds_step: bool
    bubble_fraction: float  # 1F1B: (p - 1) / (m + p - 1) of the step
    bubble_seconds: float
    upper_bound: bool
    overlap: str
    placement_rule: str
    assumptions: tuple[str, ...]
    exposed_seconds: float  # after the overlap rules (an upper bound on the exposed time)
    exposed_share: float
    compute: dict  # the compute hidden behind: seconds per phase, micro batches, basis
    settings: dict  # the overlap and routing settings the figures rest on
    overlap_rules: tuple[str, ...]

    def as_dict(self) -> dict:
        """`dataclasses.asdict(self)`, written out for these fields (flat rows, two small dicts,
        tuples of text): asdict's recursion over every value of every row was a tenth of a cold
        report's work (a step is predicted 16 times). tests/evaluate/test_communication.py
        checks it against asdict."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["collectives"] = tuple(
            {name: getattr(row, name) for name in row.__dataclass_fields__}
            for row in self.collectives
        )
        out["compute"] = copy.deepcopy(self.compute)
        out["settings"] = copy.deepcopy(self.settings)
        return out


def _whole(name: str, value, minimum: int = 1) -> int:
    if is_lanes(value):  # a sweep's points, each checked as its scenario was resolved
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CostModelError(f"{name}: {value!r}; expected a whole number >= {minimum}")
    return value


def _is_number(value) -> bool:
    """A real number that is not a bool (NaN fails every comparison)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _positive(name: str, value, allow_zero: bool = False) -> float:
    if is_lanes(value):  # a sweep's points, each checked as its scenario was resolved
        return value.astype(float)
    ok = _is_number(value)
    if not ok or value != value or value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise CostModelError(f"{name}: {value!r}; expected a number {bound}")
    return float(value)


def links(gpu: str, gpus_per_node: int = 8) -> tuple[float, float]:
    """(intra-node, network) one-direction bandwidth per GPU from the GPU table
    (`costmodel.inputs.hardware`; the network figure is a default, an assumption)."""
    found = hardware.lookup(gpu)
    if found is None:
        raise CostModelError(f"gpu: {gpu!r}; expected one of {', '.join(hardware.GPUS)}")
    return hardware.link_bandwidths(found, gpus_per_node)


def communication(
    *,
    dp: int,
    tp: int = 1,
    pp: int = 1,
    cp: int = 1,
    ep: int = 1,
    etp: int | None = None,
    sp: bool = False,
    zero_stage: int = 1,
    grad_bytes: float = 4,
    gpus_per_node: int = 8,
    intra_node_bandwidth: float,
    inter_node_bandwidth: float,
    micro_batch: int,
    seq_len: int,
    hidden_size: int,
    num_layers: int,
    num_full_attention_layers: int,
    num_moe_layers: int,
    experts_per_token: int,
    num_heads: int = 1,
    num_kv_heads: int = 1,
    head_dim: float = 1,
    v_head_dim: float | None = None,
    dense_params: float,
    expert_params: float,
    micro_batches: int,
    step_time: float,
    bytes_per_element: float = 2,
    full_recompute: bool = False,
    cp_comm_type: str = "p2p",
    collective_latency: str = "nccl",
    moe_router_max_nodes: int | None = None,
    moe_router_max_devices: int | None = None,
    fp8_dispatch: bool = False,
    tp_comm_overlap: bool = False,
    overlap_grad_reduce: bool = False,
    overlap_param_gather: bool = False,
    ep_overlap: str = "none",
    ep_overlap_fraction: float | None = None,
    moe_shared_expert_overlap: bool = False,
    moe_tp_collectives: bool = True,
    compute: Compute | None = None,
) -> Communication:
    """Every collective of one step, per GPU, for a layout of tp x cp x dp x pp GPUs (EP inside
    DP). `num_layers`, `num_full_attention_layers` and `num_moe_layers` are the model's (MTP
    layers included when they are trained); the most loaded pipeline stage's share is taken.
    `dense_params` are the parameters outside the routed experts (attention, mixers, shared
    experts, router, embedding, lm_head, norms), `expert_params` every routed expert; the
    attention heads give the K/V (and, for a2a, Q/O) widths; `micro_batches` per step on one
    pipeline; bandwidths per GPU, one direction, byte/s; `grad_bytes` per gradient element in
    the DP reduction (4: Megatron-LM's fp32 main gradients, 2: BF16). `ep_overlap_fraction`:
    with ep_overlap partial, the most of each EP all-to-all that may hide (0 to 1; read only
    then); `moe_shared_expert_overlap`: with ep_overlap none, the EP all-to-all hides behind
    the shared expert's compute (`compute.shared_expert`). `etp`: the experts' TP size under
    MoE parallel folding (None: TP, EP inside DP): the EP and expert-DP groups placed on the
    expert layers' order (ETP, EP, EDP), the expert gradients reduced over EDP = TP x CP x DP /
    (ETP x EP); `moe_tp_collectives` false: the MoE layers run no TP collectives of their MLP
    half (ETP 1 and no shared expert: Megatron-Core gathers the tokens over the expert TP group,
    of one rank). `compute`: the compute the collectives may hide behind (None: nothing hides,
    exposed = seconds)."""
    given = dict(locals())
    layout = _checked_layout(given)
    values = _symbol_values(given)
    table = _table(given, values, layout)
    _rows(table.add, given)
    n_mb = int(values["n_mb"])
    rows = expose(table.rows, table.hides, compute, n_mb)
    settings = {key: given[key] for key in SETTINGS}
    bubble = num(numeric.COMM["bubble_fraction"], values)
    rule = PLACEMENT_RULE if expert_tp(given, layout) is None else EXPERT_PLACEMENT_RULE
    return _result(rows, bubble, table.step_time, n_mb, compute, settings, rule)


def _rows(add, given: dict) -> None:
    """Every collective of `communication`'s arguments, DP, TP, CP, EP and PP, into `add`."""
    recompute = 1 if given["full_recompute"] else 0
    data_parallel(
        add, given["zero_stage"], given["overlap_grad_reduce"], given["overlap_param_gather"]
    )
    tensor_parallel(add, given["sp"], recompute, tp_overlap(given))
    context_parallel(add, given["cp_comm_type"], recompute)
    expert_parallel(
        add,
        given["fp8_dispatch"],
        recompute,
        given["ep_overlap"],
        given["ep_overlap_fraction"],
        given["moe_shared_expert_overlap"],
        given["moe_router_max_devices"] is not None,
    )
    pipeline_parallel(add, given["sp"], given["ep_overlap"])


def tp_overlap(given: dict) -> bool:
    """Whether tp_comm_overlap hides the TP collectives: only where every TP group lies in one
    node (TP fastest in the rank order, so where TP divides gpus_per_node). Transformer
    Engine's comm+GEMM overlap (userbuffers) is single-node tensor parallelism: its transport
    relies on CUDA multicast handles that only NVLink provides (TransformerEngine issue #1071,
    a maintainer's answer, 2024-08-02); a TP group across nodes runs its collectives exposed."""
    return bool(given["tp_comm_overlap"]) and given["gpus_per_node"] % given["tp"] == 0


def exposed(compute: Compute, **kwargs) -> tuple[float, float]:
    """`communication(**kwargs, compute=compute)`'s exposed_seconds, and the exposed seconds of
    its collectives outside DP that nothing may hide, without row objects (the plan's search
    times thousands of layouts): the same rows, in the same order, the same floats."""
    given = {**_DEFAULTS, **kwargs, "compute": compute}
    layout = _checked_layout(given)
    table = _table(given, _symbol_values(given), layout)
    table.seconds_only = True
    _rows(table.add, given)
    n_mb = int(table.values["n_mb"])
    seconds = exposed_seconds(table.rows, table.hides, compute, n_mb)
    fixed = sum(
        row
        for row, hide, parallelism in zip(seconds, table.hides, table.parallelisms)
        if not hide and parallelism != "DP"
    )
    return sum(seconds), fixed


def floor_rows(zero_stages: tuple[int, ...], others: bool, **kwargs) -> dict:
    """What evaluate.plan.plan_comm bounds a layout's exposed time with, from `communication`'s
    arguments (the compute not read), without row objects: `dp`, the DP rows of each ZeRO
    stage of `zero_stages` as (seconds, the windows each may hide behind: () where it may
    not), in the table's order; with `others`, `exposed`, the seconds of the TP and CP rows
    that may not hide, and `capped`, those of the CP ring (hidden at most behind the attention
    core); `n`, the micro batches per step."""
    given = {**_DEFAULTS, **kwargs}
    layout = _checked_layout(given)
    values = _symbol_values(given)
    table = _table(given, values, layout)
    table.seconds_only = True
    out: dict = {"n": int(values["n_mb"]), "dp": {}}
    if others:
        recompute = 1 if given["full_recompute"] else 0
        tensor_parallel(table.add, given["sp"], recompute, tp_overlap(given))
        context_parallel(table.add, given["cp_comm_type"], recompute)
        rows = list(zip(table.rows, table.hides))
        out["exposed"] = sum(seconds for seconds, hide in rows if not hide)
        out["capped"] = sum(seconds for seconds, hide in rows if hide and hide[2])
    for zero in zero_stages:
        table.rows, table.hides = [], []
        data_parallel(table.add, zero, given["overlap_grad_reduce"], given["overlap_param_gather"])
        out["dp"][zero] = [
            (seconds, hide[1] if hide else ()) for seconds, hide in zip(table.rows, table.hides)
        ]
    return out


def _table(given: dict, values: dict[str, float], layout: tuple[int, ...]) -> Table:
    """The empty table of `communication`'s layout (tp, pp, cp, ep, dp, gpus_per_node), its
    bandwidths and step checked."""
    tp, pp, cp, ep, dp, gpus_per_node = layout
    table = _dense_table(given, values, layout)
    etp = expert_tp(given, layout)
    if etp is not None:  # MoE parallel folding: the expert layers' own layout
        edp = tp * cp * dp // (etp * ep)
        table.sizes = (tp, cp, 1, dp, pp)  # the dense layers' ranks: TP, CP, DP (no EP inside)
        table.expert_sizes = expert_sizes(etp, ep, edp, pp)
        table.group_sizes["DP experts"] = edp
        table.expert_values = {**values, "t_p": float(etp), "d_p": dp * tp / etp}
        if not given["moe_tp_collectives"]:
            table.tp_kept = _tp_kept(values)
    return table


def expert_tp(given: dict, layout: tuple[int, ...]) -> int | None:
    """The experts' TP size the expert layers' groups are placed with (`_table`): the scenario's
    expert_tensor_parallel, or TP where EP and CP are both above 1, else None (the dense order
    places EP as the expert layers do). Megatron-Core numbers the expert layers' ranks with their
    own generator, ETP fastest (ETP defaulting to TP), then EP, then the expert data parallel,
    CP folded into it (megatron/core/parallel_state.py, initialize_model_parallel's
    expert_decoder_rank_generator, cp=1; MoE parallel folding, core_v0.10.0): EP never strides
    over CP. torchtitan's EP mesh likewise takes the CP ranks next to TP
    (torchtitan/distributed/parallel_dims.py)."""
    tp, _, cp, ep, _, _ = layout
    etp = given["etp"]
    return etp if etp is not None else (tp if cp > 1 and ep > 1 else None)


def _tp_kept(values: dict[str, float]) -> float:
    """The share of the stage's TP collectives left when its MoE layers run none in their MLP
    half: each layer's collectives are half the attention's, half the MLP's (derive.communication:
    two of each kind a layer), so 1 - (MoE layers of the stage) / (2 x its layers)."""
    layers = -(-values["L"] // values["p_p"])
    return 1 - min(values["L_moe"], layers) / (2 * layers)


def _dense_table(given: dict, values: dict[str, float], layout: tuple[int, ...]) -> Table:
    """`_table` of the dense layout (the EP groups inside DP)."""
    tp, pp, cp, ep, dp, gpus_per_node = layout
    return Table(
        values=values,
        sizes=(tp, cp, ep, dp // ep, pp),  # in DIMS order
        group_sizes={
            "TP": tp,
            "CP": cp,
            "EP": ep,
            "DP": dp * cp,
            "DP experts": dp * cp // ep,
            "PP": pp,
        },
        gpus_per_node=gpus_per_node,
        intra=_positive("intra_node_bandwidth", given["intra_node_bandwidth"]),
        inter=_positive("inter_node_bandwidth", given["inter_node_bandwidth"]),
        step_time=_positive("step_time", given["step_time"]),
        max_nodes=given["moe_router_max_nodes"],
        max_devices=given["moe_router_max_devices"],
        latency=given["collective_latency"] == "nccl",
    )


#: `communication`'s defaults (data_parallel_rows).
_DEFAULTS = dict(communication.__kwdefaults__)  # its parameters are all keyword-only
#: The overlap and routing settings a result states (Communication.settings).
SETTINGS = (
    "cp_comm_type",
    "collective_latency",
    "moe_router_max_nodes",
    "fp8_dispatch",
    "tp_comm_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "ep_overlap",
    "ep_overlap_fraction",
    "moe_shared_expert_overlap",
)


def _checked_layout(given: dict) -> tuple[int, int, int, int, int, int]:
    """(tp, pp, cp, ep, dp, gpus_per_node) of `communication`'s arguments, each checked, and the
    other settings checked (CostModelError naming the first that is not allowed)."""
    tp, pp, cp, ep, dp = (_whole(name, given[name]) for name in ("tp", "pp", "cp", "ep", "dp"))
    etp = given["etp"]
    if etp is None and dp % ep:
        raise CostModelError(f"ep: {ep}; the EP ranks are DP ranks: ep must divide dp ({dp})")
    if etp is not None and (tp * cp * dp) % (_whole("etp", etp) * ep):
        raise CostModelError(
            f"etp: {etp}; with ep {ep}, etp x ep must divide tp x cp x dp ({tp * cp * dp}): "
            "the expert layers' ranks are ETP x EP x EDP"
        )
    zero_stage, cp_comm_type, ep_overlap = (
        given["zero_stage"],
        given["cp_comm_type"],
        given["ep_overlap"],
    )
    if zero_stage not in plain.STAGES or isinstance(zero_stage, bool):
        raise CostModelError(f"zero_stage: {zero_stage!r}; expected 0, 1, 2 or 3")
    if cp_comm_type not in CP_COMM_TYPES:
        raise CostModelError(f"cp_comm_type: {cp_comm_type!r}; expected one of {CP_COMM_TYPES}")
    if ep_overlap not in EP_OVERLAPS:
        raise CostModelError(f"ep_overlap: {ep_overlap!r}; expected one of {EP_OVERLAPS}")
    if given["collective_latency"] not in ("nccl", "none"):
        raise CostModelError(
            f"collective_latency: {given['collective_latency']!r}; expected 'nccl' or 'none'"
        )
    fraction = given["ep_overlap_fraction"]
    if ep_overlap == "partial" and not (_is_number(fraction) and 0 <= fraction <= 1):
        raise CostModelError(
            f"ep_overlap_fraction: {fraction!r}; expected a number from 0 to 1 with ep_overlap "
            "partial"
        )
    if not isinstance(given["moe_shared_expert_overlap"], bool):
        raise CostModelError(
            f"moe_shared_expert_overlap: {given['moe_shared_expert_overlap']!r}; expected true "
            "or false"
        )
    check_ep_overlap(ep_overlap, given["moe_shared_expert_overlap"])
    for key in ("moe_router_max_nodes", "moe_router_max_devices"):
        if given[key] is not None:
            _whole(key, given[key])
    return tp, pp, cp, ep, dp, _whole("gpus_per_node", given["gpus_per_node"])


def _symbol_values(given: dict) -> dict[str, float]:
    """The symbols of derive.communication, by name, as floats (SymPy's Floats: the generated
    forms evaluate as xreplace did), from `communication`'s arguments (each checked)."""
    num_layers = _whole("num_layers", given["num_layers"])
    for name in ("num_full_attention_layers", "num_moe_layers"):
        if _whole(name, given[name], minimum=0) > num_layers:
            raise CostModelError(
                f"{name}: {given[name]}; expected at most num_layers ({num_layers})"
            )
    moe_k = _whole(
        "experts_per_token", given["experts_per_token"], 1 if given["num_moe_layers"] else 0
    )
    n_mb = _whole("micro_batches", given["micro_batches"])
    beta = _positive("bytes_per_element", given["bytes_per_element"])
    head_dim, v_head_dim = given["head_dim"], given["v_head_dim"]
    expert_params = given["expert_params"]
    values = {
        "t_p": given["tp"],
        "p_p": given["pp"],
        "c_p": given["cp"],
        "ep": given["ep"],
        "d_p": given["dp"],
        "b_micro": _whole("micro_batch", given["micro_batch"]),
        "S": _whole("seq_len", given["seq_len"]),
        "h": _whole("hidden_size", given["hidden_size"]),
        "L": num_layers,
        "L_full": given["num_full_attention_layers"],
        "L_moe": given["num_moe_layers"],
        "k_top": max(moe_k, 1),  # unused without MoE layers
        "n_heads": _whole("num_heads", given["num_heads"]),
        "n_kv": _whole("num_kv_heads", given["num_kv_heads"]),
        "d_head": _positive("head_dim", head_dim),  # a shape built from keys: h / heads
        "d_hv": _positive("v_head_dim", head_dim if v_head_dim is None else v_head_dim),
        "N_exp": _positive("expert_params", expert_params, allow_zero=True),
        "N_total": _positive("dense_params", given["dense_params"]) + as_float(expert_params),
        "n_mb": n_mb,
        "beta_g": _positive("grad_bytes", given["grad_bytes"]),
        "bytes_per_element": beta,
        "beta_dispatch": float(numeric.FP8_DISPATCH_BYTES) if given["fp8_dispatch"] else beta,
    }
    return {name: as_float(value) for name, value in values.items()}


def _result(
    rows, bubble: float, step_time: float, n_mb: int, compute, settings, rule=PLACEMENT_RULE
) -> Communication:
    """The step's communication from its rows (exposed seconds applied): the totals, the
    bubble, what the figures rest on."""
    total_bytes = sum(row.bytes_per_gpu for row in rows)
    total_seconds = sum(row.seconds for row in rows)
    exposed = sum(row.exposed_seconds for row in rows)
    return Communication(
        collectives=tuple(rows),
        bytes_per_gpu=total_bytes,
        seconds=total_seconds,
        share=total_seconds / step_time,
        exceeds_step=total_seconds > step_time,
        bubble_fraction=bubble,
        bubble_seconds=bubble * step_time,
        upper_bound=True,
        overlap=OVERLAP,
        placement_rule=rule,
        assumptions=COMMUNICATION_ASSUMPTIONS,
        exposed_seconds=exposed,
        exposed_share=exposed / step_time,
        compute={
            "forward_seconds": compute.forward if compute else None,
            "backward_seconds": compute.backward if compute else None,
            "attention_seconds": compute.attention if compute else None,
            "micro_batches": n_mb,
            "basis": compute.basis if compute else "none given: nothing hidden",
        },
        settings=settings,
        overlap_rules=OVERLAP_RULES,
    )
