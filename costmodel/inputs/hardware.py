"""Accelerator figures: dense BF16 peak (no sparsity), HBM bandwidth and memory, and the links.

Collected in the project's reference notes (shared/reference/gpus.md) from the vendors'
documents named in `source`. Dense figures only: the 2x "with sparsity" numbers that some
tables show are a common error. Decimal units: 1 TB/s = 1e12 byte/s, 1 GB = 1e9 byte,
1 Gb/s = 1e9 / 8 byte/s.

Links, per GPU and one direction (what a collective's bus bandwidth is compared with, as
NVIDIA's nccl-tests define it in doc/PERFORMANCE.md: "the speed of the hardware bottleneck:
NVLink, PCI, QPI, or network"), in a second table, `_LINKS`, with its own sources:

- `nvlink_bandwidth`: the GPU-to-GPU fabric inside a node. Datasheets give NVLink "both ways"
  (e.g. 900 GB/s on H100 SXM: 18 links x 50 GB/s, 25 GB/s each way); one direction is half
  of it. `nvlink_gpus` says how many GPUs one NVLink domain joins: 8 on an HGX/SXM board, 2 for
  the H100 PCIe card's bridge (it pairs two cards), None where there is no NVLink (L40S).
  MI300X: AMD's Infinity Fabric, 896 GB/s aggregate over 7 links to the 7 other GPUs.
- `pcie_bandwidth`: the host interface, one direction, given only where it is the fallback for
  GPUs that NVLink does not join (PCIe Gen4 x16: 64 GB/s both ways; Gen5 x16: 128 GB/s).
- `network_bandwidth`: the network card per GPU, one direction, a DEFAULT and an assumption:
  clusters differ, a team gives its own. One NIC per GPU at the speed NVIDIA's reference
  systems pair with that generation: 400 Gb/s (50 GB/s; ConnectX-7) for Hopper and Blackwell
  HGX (and, assumed alike, MI300X platforms), 200 Gb/s (25 GB/s; ConnectX-6 HDR) for Ampere
  and for L40S (PCIe) servers. DeepSeek-V3's report (arXiv:2412.19437, its section on
  cross-node all-to-all) quotes 50 GB/s InfiniBand and 160 GB/s achievable NVLink per H800 GPU:
  what a kernel gets is below these peaks.

`GPU.intra_node_bandwidth(gpus)` is the one-direction bandwidth per GPU of a collective among
`gpus` GPUs of one node: NVLink when one NVLink domain holds them, else PCIe.

Memory a run can use, in a third table, `_CUDA_MEMORY`: `cuda_memory_bytes`, the card's total as
the CUDA runtime reports it (`cudaGetDeviceProperties().totalGlobalMem`, what
`torch.cuda.get_device_properties().total_memory` returns), not the datasheet's decimal GB. Where
no CUDA figure was found, nvidia-smi's `memory.total` (NVML), which is a little larger: an H100
80GB HBM3 shows 81,559 MiB in nvidia-smi and 81,106 MiB to the CUDA runtime (453 MiB the driver
keeps); where neither was found, the datasheet's figure read as GiB. `cuda_memory_kind` says
which (`cuda`, `nvidia-smi`, `datasheet GiB`) and `cuda_memory_source` where it was found. The
scenario key `memory_reserve` is taken from it for what the memory model does not count (the
CUDA context, NCCL's buffers, the allocator's fragmentation).

SMs (AMD: compute units), in a fourth table, `_SMS`, each with its source: what a GEMM's tiles
run on in waves (costmodel.inputs.gemm_efficiency); secondary sources are said to be.
"""

from __future__ import annotations

from dataclasses import replace

from costmodel.records import frozen_dataclass


@frozen_dataclass
class GPU:
    """One GPU of the table: its peaks, memory, HBM bandwidth, links and sources."""

    name: str
    bf16_flops: float  # dense, FLOP/s
    fp8_flops: float | None
    memory_bytes: float
    hbm_bandwidth: float  # byte/s
    source: str
    # Links, one direction, byte/s (filled from _LINKS below)
    nvlink_bandwidth: float | None = None  # GPU-to-GPU fabric in a node; half the datasheet's
    nvlink_gpus: int | None = None  # GPUs one NVLink domain joins (8: HGX board, 2: a bridge)
    pcie_bandwidth: float | None = None  # host interface; only where it is the fallback
    network_bandwidth: float | None = None  # NIC per GPU: a default, an assumption
    link_source: str = ""
    # Memory as the CUDA runtime reports it (filled from _CUDA_MEMORY below)
    cuda_memory_bytes: float = 0.0
    cuda_memory_kind: str = ""  # cuda | nvidia-smi | datasheet GiB
    cuda_memory_source: str = ""
    #: The architecture whose kernel efficiencies apply (costmodel.inputs.efficiency):
    #: ampere, hopper, blackwell; ada (L40S) and cdna3 (MI300X) have values of their own.
    generation: str = ""
    #: Streaming multiprocessors (AMD: compute units), for the GEMM efficiency's wave
    #: quantization (costmodel.inputs.gemm_efficiency; filled from _SMS below).
    sm_count: int | None = None
    sm_source: str = ""

    @property
    def balance(self) -> float:
        """Machine balance: FLOP per byte of HBM traffic at the BF16 peak."""
        return self.bf16_flops / self.hbm_bandwidth

    def intra_node_bandwidth(self, gpus: int = 8) -> float | None:
        """One-direction bandwidth per GPU of a collective among `gpus` GPUs of one node:
        NVLink when one NVLink domain holds them all, else PCIe (None if neither is known)."""
        if self.nvlink_bandwidth and self.nvlink_gpus and gpus <= self.nvlink_gpus:
            return self.nvlink_bandwidth
        return self.pcie_bandwidth


_T = 1e12
_G = 1e9

GPUS: dict[str, GPU] = {
    g.name: g
    for g in [
        GPU("H20", 148 * _T, 296 * _T, 96 * _G, 4.0 * _T, "NVIDIA H20 product brief"),
        GPU("H100-SXM", 989.4 * _T, 1979 * _T, 80 * _G, 3.35 * _T, "NVIDIA H100 datasheet"),
        GPU("H100-PCIe", 756 * _T, 1513 * _T, 80 * _G, 2.0 * _T, "NVIDIA H100 datasheet"),
        GPU(
            "H800",
            989 * _T,
            1979 * _T,
            80 * _G,
            3.35 * _T,
            "NVIDIA H800 (secondary sources; same die as H100 SXM)",
        ),
        GPU("H200", 989 * _T, 1979 * _T, 141 * _G, 4.8 * _T, "NVIDIA H200 datasheet"),
        GPU("A100-40GB", 312 * _T, None, 40 * _G, 1.555 * _T, "NVIDIA A100 datasheet"),
        GPU("A100-80GB", 312 * _T, None, 80 * _G, 2.039 * _T, "NVIDIA A100 datasheet"),
        GPU(
            "A800",
            312 * _T,
            None,
            80 * _G,
            2.039 * _T,
            "NVIDIA A800 (secondary sources; same die as A100 80GB)",
        ),
        GPU("B200", 2250 * _T, 4500 * _T, 180 * _G, 8.0 * _T, "NVIDIA HGX B200 datasheet"),
        GPU("L40S", 362 * _T, 733 * _T, 48 * _G, 0.864 * _T, "NVIDIA L40S datasheet"),
        GPU("MI300X", 1307 * _T, 2615 * _T, 192 * _G, 5.3 * _T, "AMD Instinct MI300X data sheet"),
    ]
}


_GBIT = 1e9 / 8  # byte/s per Gb/s


def _links(nvlink_both_ways, nvlink_gpus, nic_gbit, source, pcie_both_ways=None) -> dict:
    """One row of the link table: datasheet figures in, one-direction byte/s out."""
    return {
        "nvlink_bandwidth": nvlink_both_ways / 2 if nvlink_both_ways else None,
        "nvlink_gpus": nvlink_gpus,
        "pcie_bandwidth": pcie_both_ways / 2 if pcie_both_ways else None,
        "network_bandwidth": nic_gbit * _GBIT,
        "link_source": source,
    }


_NIC = "network: one NIC per GPU, {} Gb/s, assumed (clusters differ)"
_LINKS: dict[str, dict] = {
    "H20": _links(
        900 * _G, 8, 400, "NVIDIA H20 product brief (NVLink 900 GB/s); " + _NIC.format(400)
    ),
    "H100-SXM": _links(
        900 * _G, 8, 400, "NVIDIA H100 datasheet (NVLink 900 GB/s); " + _NIC.format(400)
    ),
    "H100-PCIe": _links(
        600 * _G,
        2,
        400,
        "NVIDIA H100 datasheet (NVLink bridge 600 GB/s, pairs two cards; PCIe Gen5 128 GB/s); "
        + _NIC.format(400),
        pcie_both_ways=128 * _G,
    ),
    "H800": _links(
        400 * _G,
        8,
        400,
        "NVLink 400 GB/s (secondary sources; DeepSeek-V3 report arXiv:2412.19437 measures "
        "160 GB/s achievable, 50 GB/s InfiniBand); " + _NIC.format(400),
    ),
    "H200": _links(
        900 * _G, 8, 400, "NVIDIA H200 datasheet (NVLink 900 GB/s); " + _NIC.format(400)
    ),
    "A100-40GB": _links(
        600 * _G, 8, 200, "NVIDIA A100 datasheet (NVLink 600 GB/s); " + _NIC.format(200)
    ),
    "A100-80GB": _links(
        600 * _G, 8, 200, "NVIDIA A100 datasheet (NVLink 600 GB/s); " + _NIC.format(200)
    ),
    "A800": _links(400 * _G, 8, 200, "NVLink 400 GB/s (secondary sources); " + _NIC.format(200)),
    "B200": _links(
        1800 * _G, 8, 400, "NVIDIA HGX B200 datasheet (NVLink 1.8 TB/s); " + _NIC.format(400)
    ),
    "L40S": _links(
        None,
        None,
        200,
        "NVIDIA L40S datasheet (no NVLink; PCIe Gen4 x16 64 GB/s); " + _NIC.format(200),
        pcie_both_ways=64 * _G,
    ),
    "MI300X": _links(
        896 * _G,
        8,
        400,
        "AMD Instinct MI300X data sheet (Infinity Fabric 896 GB/s aggregate, 7 links); "
        + _NIC.format(400),
    ),
}
GPUS = {name: replace(gpu, **_LINKS[name]) for name, gpu in GPUS.items()}

_MIB = 2**20
_GIB = 2**30
_SMI = "nvidia-smi memory.total {:,} MiB ({}); the CUDA runtime reports a few hundred MiB less"
_SMI_SEEN = "the nvidia-smi table of an idle {} quoted in public GitHub repositories"
_DATASHEET = "datasheet {} GB read as {} GiB: no CUDA or nvidia-smi figure was found"
#: name -> (bytes, kind, source)
_CUDA_MEMORY: dict[str, tuple[float, str, str]] = {
    "H20": (97_871 * _MIB, "nvidia-smi", _SMI.format(97_871, _SMI_SEEN.format("NVIDIA H20"))),
    "H100-SXM": (
        85_045_477_376,
        "cuda",
        "CUDA deviceQuery, NVIDIA H100 80GB HBM3: 81,106 MiB (85,045,477,376 bytes) "
        "(thamada/nvidia-smi, nvsim/H100SXMx8_deviceQuery.py); nvidia-smi shows 81,559 MiB "
        "(modal-labs/modal-client pull request #2797)",
    ),
    "H100-PCIe": (
        81_559 * _MIB,
        "nvidia-smi",
        _SMI.format(81_559, _SMI_SEEN.format("NVIDIA H100 PCIe")),
    ),
    "H800": (80 * _GIB, "datasheet GiB", _DATASHEET.format(80, 80)),
    "H200": (143_771 * _MIB, "nvidia-smi", _SMI.format(143_771, _SMI_SEEN.format("NVIDIA H200"))),
    "A100-40GB": (
        40_960 * _MIB,
        "nvidia-smi",
        _SMI.format(40_960, "modal-labs/modal-client pull request #2797"),
    ),
    "A100-80GB": (
        81_920 * _MIB,
        "nvidia-smi",
        _SMI.format(81_920, "modal-labs/modal-client pull request #2797"),
    ),
    "A800": (80 * _GIB, "datasheet GiB", _DATASHEET.format(80, 80)),
    "B200": (183_359 * _MIB, "nvidia-smi", _SMI.format(183_359, _SMI_SEEN.format("NVIDIA B200"))),
    "L40S": (
        46_068 * _MIB,
        "nvidia-smi",
        _SMI.format(46_068, "modal-labs/modal-client pull request #2797"),
    ),
    "MI300X": (192 * _GIB, "datasheet GiB", _DATASHEET.format(192, 192)),
}
GPUS = {
    name: replace(
        gpu,
        cuda_memory_bytes=float(_CUDA_MEMORY[name][0]),
        cuda_memory_kind=_CUDA_MEMORY[name][1],
        cuda_memory_source=_CUDA_MEMORY[name][2],
    )
    for name, gpu in GPUS.items()
}


#: The GPU's architecture (NVIDIA's names; AMD's CDNA 3), for the efficiencies of
#: costmodel.inputs.efficiency.
_GENERATION = {
    "H20": "hopper",
    "H100-SXM": "hopper",
    "H100-PCIe": "hopper",
    "H800": "hopper",
    "H200": "hopper",
    "A100-40GB": "ampere",
    "A100-80GB": "ampere",
    "A800": "ampere",
    "B200": "blackwell",
    "L40S": "ada",
    "MI300X": "cdna3",
}
GPUS = {name: replace(gpu, generation=_GENERATION[name]) for name, gpu in GPUS.items()}

_HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (H100 SXM5 132 SMs, PCIe 114)"
_AMPERE_WP = (
    "NVIDIA A100 Tensor Core GPU Architecture whitepaper (108 SMs); NVIDIA Matrix Multiplication "
    "Background User's Guide, section 3.2 ('an NVIDIA A100 GPU has 108 SMs')"
)
#: name -> (SMs or AMD compute units, source): what a GEMM's tiles run on in waves.
_SMS: dict[str, tuple[int, str]] = {
    "H20": (78, "secondary: Geekbench 6 listing of the H20 as reported in the press (78 SMs)"),
    "H100-SXM": (132, _HOPPER_WP),
    "H100-PCIe": (114, _HOPPER_WP),
    "H800": (132, "secondary: the H100 SXM's GH100 configuration (" + _HOPPER_WP + ")"),
    "H200": (132, "secondary: the H100 SXM's GH100 configuration (" + _HOPPER_WP + ")"),
    "A100-40GB": (108, _AMPERE_WP),
    "A100-80GB": (108, _AMPERE_WP),
    "A800": (108, "secondary: the A100's GA100 configuration (" + _AMPERE_WP + ")"),
    "B200": (148, "secondary: cudaGetDeviceProperties multiProcessorCount quoted in public code"),
    "L40S": (142, "NVIDIA L40S datasheet: 18,176 CUDA cores, 128 per Ada SM"),
    "MI300X": (304, "AMD Instinct MI300X data sheet (304 compute units)"),
}
GPUS = {
    name: replace(gpu, sm_count=_SMS[name][0], sm_source=_SMS[name][1])
    for name, gpu in GPUS.items()
}


def _norm(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


_ALIASES = {_norm(name): name for name in GPUS}
_ALIASES.update({"h100": "H100-SXM", "a100": "A100-80GB"})


def other_names() -> dict[str, str]:
    """The names `lookup` takes besides each GPU's own (in any spelling): name -> the GPU's
    (docs/gpus.md lists them)."""
    return {alias: name for alias, name in _ALIASES.items() if alias != _norm(name)}


def lookup(name: str) -> GPU | None:
    """The GPU for a name, forgiving case, spaces, '-' and '_'; None if unknown."""
    key = _ALIASES.get(_norm(str(name)))
    return GPUS[key] if key else None


def link_bandwidths(
    gpu: GPU, gpus_per_node: int, intra: float | None = None, inter: float | None = None
) -> tuple[float | None, float | None]:
    """(intra-node, network) one-direction bandwidth per GPU of a run on `gpus_per_node` GPUs
    of a node: the scenario's `intra` and `inter` (intra_node_bandwidth, inter_node_bandwidth)
    where it gives them, else the table's (`GPU.intra_node_bandwidth`, `network_bandwidth`).
    The one place a link is filled in: the report, the plan and the communication account."""
    return intra or gpu.intra_node_bandwidth(gpus_per_node), inter or gpu.network_bandwidth


#: The host link (PCIe x16) per GPU generation, one direction, byte/s, where the GPU table gives
#: no pcie_bandwidth: Gen4 on Ampere (NVIDIA A100 datasheet: 64 GB/s both ways), Gen5 on the
#: others (NVIDIA H100 and HGX B200 datasheets, AMD MI300X datasheet: 128 GB/s both ways). What
#: the copies of offloaded activations run on (evaluate.simulate.compute_time.offload_seconds).
_HOST_LINK = {"ampere": 32 * _G}


def host_bandwidth(gpu: str) -> float:
    """The GPU's host link, one direction: its pcie_bandwidth, else its generation's PCIe x16."""
    spec = GPUS[gpu]
    return spec.pcie_bandwidth or _HOST_LINK.get(spec.generation, 64 * _G)


def fp8_gemm_ratio(gpu: str, fp8: str) -> float | None:
    """How much faster than `peak_flops` the layers' GEMMs run: under fp8: hybrid on a GPU with
    an FP8 peak, its FP8 over its BF16 peak (the step-time model times them so, and a predicted
    step's MFU against the BF16 peak may reach it); None where they run in BF16."""
    card = GPUS[gpu]
    if fp8 != "hybrid" or not card.fp8_flops:
        return None
    return card.fp8_flops / card.bf16_flops


#: NCCL's latency constants for large messages (the Simple protocol), in seconds, by the names
#: of derive.communication's latency symbols: NVIDIA/nccl src/graph/tuning.cc at commit
#: 5067397 (2026-06-11), ncclTunerConstantsDefaults: baseLatencies, Ring and Tree Simple 8.4 us;
#: hwLatencies, Ring Simple NVLink 3.4 us and NET 14.0 us, Tree Simple NVLink 4.0 us and NET 14
#: us (a multi-node ring's step inside a node is max(3.4, 3 x netOverhead) with netOverhead 1 us
#: on Intel hosts: 3.4). The same on every GPU listed: they are NCCL's, not the card's.
NCCL_LATENCY = {
    "alpha_0": 8.4e-6,
    "lam_i": 3.4e-6,
    "lam_n": 14.0e-6,
    "lam_ti": 4.0e-6,
    "lam_tn": 14.0e-6,
}
