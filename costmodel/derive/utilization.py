"""MFU and HFU: the FLOPs a step needed (or ran) over what the cluster could have done.

    MFU = model FLOPs    / (T * n_gpu * P)      model FLOPs = 6ND, recompute not counted
    HFU = hardware FLOPs / (T * n_gpu * P)      hardware FLOPs = factor * 6ND

so HFU = MFU * recompute factor. The throughput form, MFU = 6N * tokens_per_s / (n_gpu * P),
is the same quantity reached from a measured tok/s: a cross-check of the step-time form.
"""

from __future__ import annotations

from costmodel.derive.flops import model_flops
from costmodel.derive.recompute import recompute_factor
from costmodel.derive.symbols import D, P, T, n_gpu, tau

cluster_peak = n_gpu * P
achieved_flops_per_s = model_flops / T
achieved_flops_per_s_per_gpu = achieved_flops_per_s / n_gpu
hardware_flops = recompute_factor * model_flops

mfu = model_flops / (T * cluster_peak)
hfu = hardware_flops / (T * cluster_peak)

tokens_per_s = D / T
tokens_per_s_per_gpu = tokens_per_s / n_gpu

#: MFU from a throughput tau (tokens/s): model FLOPs per token times tokens per second.
mfu_from_throughput = (model_flops / D) * tau / cluster_peak
