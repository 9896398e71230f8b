# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 05 注意力项：6ND 没有数进去的那一块
#
# 6ND 数的是“每个参数对每个 token 做一次乘加”，也就是所有以权重为一侧的矩阵乘。注意力核心里的两个矩阵乘 QKᵀ 和 A·V 却不一样：两侧都是激活，没有一个参数参与，所以 N 里根本没有它们。短序列时这一项小到可以忽略；序列一长，它按长度的平方增长，会变成一步运算量里的大头。本节先推导它的大小，再看它在本场景里占多少；然后把“整块方阵还是只数下三角（full / causal）”与“普通实现还是 FlashAttention（eager / flash）”四种组合并排，找出你的训练框架日志用的是哪一种；最后和 PyTorch 的 FLOP 计数器对一次账，并把课程在这一节的说法逐条核对。

# %% [markdown] tags=["lab-only"]
# **换成你自己的场景。** 在 JupyterLab 里改下面的参数单元格。本节最常改的键是 `attention_flops`（full 或 causal）、`attention_kernel`（eager、flash，或写明 kernel 家族的 flash2、flash3、cudnn）、`seq_len` 和 `batching`（padded 或 packed）。`scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 覆盖单个键，例如 `{"attention_flops": "causal"}` 或 `{"step_time": 90}`。改完后重启内核并运行全部单元格（Kernel → Restart Kernel and Run All Cells）。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"seq_len": 32768}

# %% tags=["remove-input"]
import csv
from importlib import resources

import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

from costmodel import course
from costmodel.derive import attention, padding
from costmodel.derive.flops import model_flops
from costmodel.derive.recompute import recompute_factor
from costmodel.derive.symbols import (B, D, F_lin, L_full, N, S, a_sq, d_attn, kappa, r, r_core, s,
                                      sum_sq)
from costmodel.errors import CostModelError
from costmodel.evaluate.account import claims
from costmodel.evaluate.account.account import account
from costmodel.evaluate.simulate import compute_time
from costmodel.inputs import attention_kernels, efficiency, models, scenario
from costmodel.inputs.assumptions import COURSE_MODEL
from costmodel.inputs.model_shape import matching_shape
from costmodel.present import display as d
from costmodel.present import words

sc, acc = d.load(scenario_file, overrides)
subs = sc.substitutions()
att = acc["attention"]
lin = acc["linear_attention"]
is_course = not sc.changed  # the course's own run: its figures can be checked one by one
# A team's model with a config: its widths are known, the course's shape guesses do not describe it.
known = not is_course and matching_shape(sc.values) is not None
kind_of = attention_kernels.KIND  # what an attention_kernel value computes: flash or eager


#: The attention figures do not depend on the parallel layout, and another shape's layers or
#: heads may not allow this run's: the shapes below are resolved without TP or PP, and with the
#: least CP that leaves each pipeline a micro batch (CP 1 unless the run has more GPUs than
#: samples).
NO_SPLIT = {"tensor_parallel": 1, "pipeline_parallel": 1, "context_parallel": 1,
            "sequence_parallel": False, "cp_comm_type": "p2p", "virtual_pipeline": None,
            "pipeline_schedule": "1f1b", "first_stage_layers": None, "last_stage_layers": None,
            "expert_tensor_parallel": None}


def resolve_unsplit(keys):
    """The scenario in force with `keys`, resolved with NO_SPLIT at the least CP (a divisor of
    the GPUs) that the rules accept; where none does (a cluster too large to split this shape
    for the step's samples), on the most GPUs that can, at the same GPU-seconds (the step
    stretched by as much), which leaves every figure the tables show as it is: the FLOPs, the
    shares, and the utilizations, FLOPs over T x GPUs x peak (a stretched T past the most a
    scenario may state is set on the resolved scenario). The refusal at CP 1 if none does."""
    refused = None
    for cp in sp.divisors(sc.num_gpus):
        try:
            return scenario.resolve(scenario_file, {**overrides, **NO_SPLIT,
                                                    "context_parallel": int(cp), **keys})
        except CostModelError as error:
            refused = refused or error
    for gpus in reversed(sp.divisors(sc.num_gpus)[:-1]):
        stretched = None if sc.step_time_from == "predicted" else sc.step_time * sc.num_gpus / int(gpus)
        beyond = stretched is not None and stretched > scenario.FIELDS["step_time"].maximum
        stretch = {"num_gpus": int(gpus), "measured_tokens_per_s": None,
                   "step_time": None if beyond else stretched}
        try:
            hsc = scenario.resolve(scenario_file, {**overrides, **NO_SPLIT, **keys, **stretch})
        except CostModelError:
            continue
        # a stretched step past the most a scenario may state: set on the resolved one, a number
        return hsc.replace(step_time=stretched, sources={"step_time": sc.sources["step_time"]}) if beyond else hsc
    raise refused


def resolve_with(**keys):
    """The scenario in force with some keys replaced (NO_SPLIT: no TP or PP), and its account; a
    predicted step (step_time null) is kept as the scenario's, so the variants compare at one T.
    A shape given with its own heads (`num_heads` set or reset here) drops a `num_kv_heads` the
    scenario sets: that count was for the scenario's heads, not these. Fewer layers than the
    scenario's dense layers before the MoE ones (`first_dense_layers`) keep one MoE layer, and
    than its offloaded ones (`cpu_offload_layers`) keep the last on the GPU."""
    if "num_heads" in keys and sc.num_kv_heads is not None:
        keys = {"num_kv_heads": None if keys["num_heads"] is None else shape.num_kv_heads, **keys}
    dense_first = sc.first_dense_layers
    if "num_layers" in keys and dense_first is not None and dense_first >= keys["num_layers"]:
        keys = {"first_dense_layers": keys["num_layers"] - 1, **keys}
    if "num_layers" in keys and sc.cpu_offload_layers >= keys["num_layers"]:  # the last stays
        keys = {"cpu_offload_layers": keys["num_layers"] - 1, **keys}
    hsc = resolve_unsplit(keys)
    if sc.step_time_from == "predicted":  # at the scenario's GPU-seconds (resolve_unsplit)
        stretched = sc.step_time * sc.num_gpus / hsc.num_gpus
        hsc = hsc.replace(step_time=stretched, sources={"step_time": "predicted"})
    return hsc, account(hsc)


def linear_cell(hsc, hacc, key, digits=1):
    """The linear-attention share next to one reading (padded | actual) of a scenario: a
    percentage, "—" without such layers, or "not counted" when their widths are unknown."""
    hlin = hacc["linear_attention"]
    if hlin is None:
        return "—"
    if hlin["flops_per_step"] is None:
        return "未计入"
    expr = attention.attention_padded if key == "padded" else attention.attention_actual
    value = attention.linear_share(expr).subs({**hsc.substitutions(), F_lin: hlin["flops_per_step"]})
    return d.pct(float(value), digits)


def span(values, digits=1):
    """The range of some fractions as percentages, "a–b" (one number when they agree)."""
    low, high = d.pct(min(values), digits), d.pct(max(values), digits)
    return low if low == high else f"{low}–{high}"


def two_readings(actual_value, padded_value, digits=1):
    """A figure read at the real lengths and at the padded length S (once when they agree)."""
    a, p = d.pct(actual_value, digits), d.pct(padded_value, digits)
    if sc.batching == "packed":  # no padding: the real lengths are what the run does
        return f"packed，按文档长度 {a}"
    return f"真实长度与补齐长度相同，都是 {a}" if a == p else f"真实长度 {a}、补齐长度 {p}"


def where_in_range(values, key, digits=1):
    """Where a scenario's two readings (real, padded) lie against the course's range `key`:
    "在" / "不在" when they read alike, else "都在" / "都不在" / "只有一种读数在"."""
    inside = [in_course_range(x, key) for x in values]
    if len({d.pct(x, digits) for x in values}) == 1:
        return "的读数在" if inside[0] else "的读数不在"
    return "的两种读数" + ("都在" if all(inside) else "都不在" if not any(inside) else "只有一种在")


def in_course_range(value, key):
    """Whether a fraction lies in the range the course gives under `key`, at its digits."""
    low, high = course.figures()[key]["range"]
    digits = len(low[:-1].partition(".")[2])
    return float(low[:-1]) <= round(100 * value, digits) <= float(high[:-1])


# %% tags=["remove-input"]
width_from = {"num_heads x head_dim": "头数 × 每头宽度", "attention_dim": "直接给定的 attention_dim",
              "hidden_size": "hidden_size（未给出头数与每头宽度）"}[sc.attention_dim_from]
if sc.sources.get("attention_dim") == "model":
    width_from = "场景所用模型的 config 给出的 attention_dim"

# %% [markdown]
# 场景：**{{ sc.name }}**。注意力宽度 d = {{ sc.attention_dim|num }}，来自{{ width_from|safe }}；{% if sc.num_mtp_layers %}{{ sc.num_layers }} 层主干加 {{ sc.num_mtp_layers }} 个 MTP 层，共有 {{ sc.num_full_attention_layers }} 个全注意力层{% else %}{{ sc.num_layers }} 层里有 {{ sc.num_full_attention_layers }} 层是全注意力层{% endif %}；配置长度 S = {{ sc.seq_len|num }}，平均真实长度 s̄ = {{ sc.mean_tokens_per_sample|count }}，每步 {{ sc.samples_per_step|num }} 个样本，Σsᵢ² = {{ sc.sum_squared_lengths|sci }}，取自{% if sc.sum_squared_lengths_from == "sequence_lengths" %}长度文件里每步真实长度的平方和{% else %} B·s̄²（没有长度文件，按每个样本都是平均长度计）{% endif %}。
#
# 计数约定：{{ ("attention_flops: " ~ sc.attention_flops)|code }}（{% if sc.attention_flops == "full" %}整块 s×s 方阵{% else %}只数下三角，方阵的一半{% endif %}），{{ ("attention_kernel: " ~ sc.attention_kernel)|code }}（{% if sc.attention_kernel == "eager" %}反向是前向的 2 倍{% else %}反向重算打分矩阵，是前向的 2.5 倍{% endif %}），{{ ("batching: " ~ sc.batching)|code }}（{% if sc.batching == "padded" %}每个样本补齐到配置长度 S{% else %}样本首尾相接、没有补齐，注意力按文档分块{% endif %}）。

# %% [markdown]
# ## 1. 从两个矩阵乘推出 4·s²·d
#
# 一个注意力头的宽度记作 d_h，序列长度记作 s。这个头的 Q、K、V 都是 s × d_h 的矩阵：
#
# - 打分 QKᵀ：(s × d_h) 乘 (d_h × s)，得到 s × s 的分数矩阵；
# - 加权求和 A·V：(s × s) 乘 (s × d_h)，得到 s × d_h 的输出。
#
# 按“一次乘加 = 2 FLOPs”，一个 (m × k)(k × n) 的矩阵乘是 2mnk。下面让 SymPy 逐项算出来，再乘上头数 n_h，并把 n_h·d_h 换成注意力宽度 d。

# %%
per_head = attention.core_forward_per_head()
d.eq(r"F_{QK^\top}", per_head["QK^T"])
d.eq(r"F_{AV}", per_head["AV"])
d.eq(r"F_{\mathrm{fwd}}^{\mathrm{layer}}", r"n_h\,(F_{QK^\top}+F_{AV})\big|_{n_h d_h = d}",
     attention.forward_per_layer)

# %% [markdown]
# 反向传播对每个矩阵乘 C = A·B 要算两个同样大小的矩阵乘（对 A 的梯度和对 B 的梯度），所以反向是前向的 2 倍，前向加反向是 3 倍。这和 6ND 里“2ND 前向 + 4ND 反向”是同一个道理，也是**模型 FLOPs**（MFU 的分子）对注意力的数法：不管实际用的是哪种 kernel，都按 3 倍计。
#
# FlashAttention 类的 kernel 不把 s × s 的打分矩阵存下来，反向时要把 QKᵀ 再算一遍。把它反向里的矩阵乘逐个列出来，和前向的两个比一比，2.5 倍就出来了：

# %%
flash_bwd = attention.flash_backward_gemms()
d.table([(name.replace(" (recomputed)", "（重算）"), sp.sstr(expr)) for name, expr in flash_bwd.items()],
        ["反向的矩阵乘（一个头）", "FLOPs"], "FlashAttention 反向的矩阵乘（一个头）")
kappa_flash = sp.cancel(sum(flash_bwd.values()) / sum(per_head.values()))
assert kappa_flash == attention.KERNEL_BACKWARD_OVER_FORWARD["flash"]
d.eq(r"\kappa_{\mathrm{flash}}", r"\frac{\sum F_{\mathrm{bwd}}^{\mathrm{flash}}}{F_{QK^\top}+F_{AV}}",
     rf"\frac{{{sp.latex(sum(flash_bwd.values()))}}}{{{sp.latex(sum(per_head.values()))}}}", kappa_flash)
d.eq(r"\kappa_{\mathrm{eager}}", attention.KERNEL_BACKWARD_OVER_FORWARD["eager"])

# %% [markdown]
# 5 个同样大小的矩阵乘对前向的 2 个，κ = 5/2：重算的那一个是硬件真的做了、模型本身却不需要的运算，所以它只进**硬件 FLOPs**（HFU 的分子），不进模型 FLOPs。
#
# 一步有 B 个样本、L_full 个全注意力层（线性注意力层没有 s² 项）。再引入三个由场景决定的数：a 是方阵里被数进去的比例（full 为 1，causal 为 1/2），κ 是 kernel 的反向倍数，r 是 recompute 重做的前向比例（与线性层相同）。注意力按两种长度读：每个样本都按补齐长度 S，或者按每个样本的真实长度求平方和 Σsᵢ²。混合模型的线性注意力（gated DeltaNet）核心记作 F_lin，它随长度线性增长，也不在 6ND 里，所有“含注意力”的数字都把它算进去（没有这类层、或它们的头宽度未知时，F_lin = 0）：

# %%
F = sp.Symbol("F_attn", positive=True)
F_hw = sp.Symbol("F_attn^hw", positive=True)
d.eq(r"\frac{F_{\mathrm{bwd}}}{F_{\mathrm{fwd}}}\Big|_{\mathrm{model}}", attention.BACKWARD_OVER_FORWARD)
d.eq(r"F_{\mathrm{attn}}(S)", attention.attention_padded)
d.eq(r"F_{\mathrm{attn}}(\Sigma s_i^2)", attention.attention_actual)
d.eq(r"F_{\mathrm{attn}}^{\mathrm{hw}}(\Sigma s_i^2)", attention.attention_actual_hardware)
d.eq(r"\text{attention share}", attention.share(F))
d.eq(r"\text{linear-attention share}", attention.linear_share(F))
d.eq(r"\mathrm{MFU}_{\mathrm{with\ attn}}", attention.mfu_with_attention(F))
d.eq(r"\mathrm{HFU}_{\mathrm{with\ attn}}", attention.hfu_with_attention(F_hw))

# %% [markdown]
# 本场景：a = {{ sp.sstr(attention.SQUARE_FRACTION[sc.attention_flops]) }}（{{ ("attention_flops: " ~ sc.attention_flops)|code }}），κ = {{ sp.sstr(attention.KERNEL_BACKWARD_OVER_FORWARD[kind_of[sc.attention_kernel]]) }}（{{ ("attention_kernel: " ~ sc.attention_kernel)|code }}），r_core = {{ subs[r_core]|short }}（{{ ("recompute: " ~ sc.recompute)|code }}{% if sc.recompute_modules %}，重算 {% for m in sc.recompute_modules %}{{ m|code }}{% if not loop.last %}、{% endif %}{% endfor %}{% endif %}：注意力核心自己被重做的份额，与权重一侧的 r 分开计）。于是注意力的模型 FLOPs 按{{ words.convention(att.convention) }}计，硬件 FLOPs 按{{ words.convention(att.hardware_convention) }}计，{% if subs[r_core] > 0 %}再加上 recompute 重做的核心前向。{% else %}没有 recompute 重做的核心前向。{% endif %}

# %% [markdown]
# 下表是本场景的数字：一行按补齐长度 S（每个样本都补齐），一行按真实长度（Σsᵢ²）。分母里的模型 FLOPs 始终是真实 token 的 6ND。

# %% tags=["remove-input"]
actual, padded = att["actual"], att["padded"]
over_peak_padded = max(padded["mfu_with_attention"], padded["hfu_with_attention"]) > 1
over_peak = max(a[k] for a in (actual, padded) for k in ("mfu_with_attention", "hfu_with_attention")) > 1

# %% [markdown]
# **本场景的注意力项：模型 FLOPs 按{{ words.convention(att.convention) }}，硬件 FLOPs 按{{ words.convention(att.hardware_convention) }}{% if subs[r_core] > 0 %}，含 recompute{% endif %}；d = {{ sc.attention_dim }}，L_full = {{ sc.num_full_attention_layers }}**
#
# | 序列口径 | 长度 | 注意力模型 FLOPs | 注意力硬件 FLOPs | 注意力占比 |{% if lin %} 线性注意力占比 |{% endif %} 含注意力的 MFU | 含注意力的 HFU |
# |---|---|---|---|---|{% if lin %}---|{% endif %}---|---|
# | 补齐长度 S | S = {{ padded.seq_len|num }} | {{ padded.flops_per_step|sci }} | {{ padded.hardware_flops_per_step|sci }} | {{ padded.share|pct }} |{% if lin %} {{ linear_cell(sc, acc, "padded", 2) }} |{% endif %} {{ padded.mfu_with_attention|pct }} | {{ padded.hfu_with_attention|pct }} |
# | 真实长度 Σsᵢ² | s̄ = {{ actual.seq_len|count }}，Σsᵢ² = {{ actual.sum_squared_lengths|sci }} | {{ actual.flops_per_step|sci }} | {{ actual.hardware_flops_per_step|sci }} | {{ actual.share|pct }} |{% if lin %} {{ linear_cell(sc, acc, "actual", 2) }} |{% endif %} {{ actual.mfu_with_attention|pct }} | {{ actual.hfu_with_attention|pct }} |
#
# 按真实长度计，注意力核心占一步全部运算的 **{{ actual.share|pct }}**，把它算进分子后利用率从 MFU {{ acc.mfu|pct }} 变成 **{{ actual.mfu_with_attention|pct }}**，硬件口径的 HFU 从 {{ acc.hfu|pct }} 变成 {{ actual.hfu_with_attention|pct }}；按补齐长度计则是 {{ padded.share|pct }}、MFU {{ padded.mfu_with_attention|pct }}、HFU {{ padded.hfu_with_attention|pct }}。{% if sc.batching == "packed" %}本场景 `batching: packed`，样本没有补齐、注意力按文档分块，所以真实长度那一行就是硬件做的事；补齐长度那一行只回答“如果改成补齐会怎样”{% if over_peak_padded %}，而且它超过 100%：同样的一步时间里放不下补齐后的运算，这组输入下补齐不可能发生{% endif %}。{% elif sc.mean_tokens_per_sample < sc.seq_len and sc.attention_on_padding == "computed" %}本场景 `batching: padded`、`attention_on_padding: computed`{% if sc.sources.attention_on_padding == "course" %}（课程的前提，不是量出来的）{% endif %}：注意力 kernel 在补齐后的每一行上整行运行，硬件做的注意力是补齐长度那一行，单步耗时模型（第 08 节）也按这一行计时；但那一行的分子把补齐后的注意力和真实 token 的 6ND 放在了一起，第 6 节会拆开。kernel 若拿到了 `cu_seqlens`，只算真实长度，就写 `attention_on_padding: skipped`。{% elif sc.mean_tokens_per_sample < sc.seq_len %}本场景 `batching: padded`、`attention_on_padding: skipped`：样本虽然补齐，注意力 kernel 拿到了真实长度（`cu_seqlens`），只算真实 token，硬件做的注意力是真实长度那一行，单步耗时模型（第 08 节）也按这一行计时；补齐长度那一行只在 kernel 整行计算时才是真的。{% else %}本场景的平均真实长度等于配置长度，两行读数相同。{% endif %}{% if over_peak %}表中有超过 100% 的利用率：集群在 step_time 内做不了这么多运算，所以那个读数描述的运算不可能全部真的发生（比如注意力并没有按补齐长度运行），否则就是场景的输入彼此矛盾。{% endif %}
#
# {% if lin is none %}
# 本场景的模型没有线性注意力层，F_lin = 0，上面的占比只有 softmax 注意力一项。
# {% elif lin.flops_per_step is none %}
# 本场景有 {{ lin.layers }} 层线性注意力（gated DeltaNet），但没有一份模型配置给出它们的头宽度，这一项**没有计入**：上表“含注意力”的利用率因此偏低，softmax 注意力的占比则偏高。库的说明：{{ lin.note }}。
# {% else %}
# 本场景的 {{ lin.layers }} 层线性注意力（gated DeltaNet，块长 {{ lin.chunk_size }}，头宽度取自 {{ lin.widths_from }} 的配置）核心运算每步 {{ lin.flops_per_step|sci }} FLOPs，按真实长度读数占一步运算的 **{{ lin.share|pct }}**，{% if lin.share < actual.share %}只有 softmax 注意力的 {{ (lin.share / actual.share)|pct(1) }}{% else %}是 softmax 注意力的 {{ (lin.share / actual.share)|times(1) }}{% endif %}（{{ actual.share|pct }}）。它对每个 token 的代价与序列长度无关，只随 token 数线性增长；softmax 注意力对每个 token 的代价却随长度增长，所以序列越长，两者差得越远。这个数只含分块 gated-delta 规则里的矩阵运算（前向加 2 倍前向），conv1d 与逐元素运算不计。
# {% endif %}

# %% [markdown]
# ## 2. 课程的六行敏感性表
#
# 课程写作时不知道模型确切的层数和宽度，于是做了三组假设：48 层 × hidden 2048、48 层 × hidden 4096、64 层 × hidden 2560，全注意力层按“每 4 层 1 层”计，注意力宽度取 hidden size，每组再按定长和均长各算一行。{% if known %}你的模型有 config.json，宽度是已知的：{{ sc.num_layers }} 层、hidden {{ sc.hidden_size|num }}、注意力宽度 {{ sc.attention_dim|num }}、{{ sc.num_full_attention_layers }} 层全注意力。下表因此按它自己的宽度算，不套用课程的猜测；三组猜测只在第 3、4 节作为课程那边的对照出现。{% else %}下面把每组假设当作对本场景的覆盖（num_layers、hidden_size，注意力宽度 = hidden size）重新解析场景，其余输入、计数约定与全注意力层的间隔都沿用本场景（间隔比假设的层数还大时，取假设的层数，即只有一层全注意力；本场景若规定了开头的稠密层数 first_dense_layers，而它不少于假设的层数，则取假设层数减一，留下一层 MoE）；只有并行布局不沿用，按 TP = PP = CP = 1 解析：注意力的数与布局无关，而假设的层数或宽度未必容得下本场景的切分。{% endif %}

# %%
HYPOTHESES = [(48, 2048), (48, 4096), (64, 2560)]  # the course's guesses: (num_layers, hidden_size)
hyp = {(layers, hidden): resolve_with(num_layers=layers, hidden_size=hidden, attention_dim=hidden,
                                      num_heads=None, head_dim=None,
                                      full_attention_every=min(sc.full_attention_every, layers))
       for layers, hidden in HYPOTHESES}

# %% tags=["remove-input"]
fewer_gpus = sorted({hsc.num_gpus for hsc, _ in hyp.values()} - {sc.num_gpus})
offload_kept = sc.cpu_offload_layers >= min(layers for layers, _ in HYPOTHESES)

# %% [markdown]
# {% if fewer_gpus %}本场景的 {{ "{:,}".format(sc.num_gpus) }} 张卡太多：{{ "{:,}".format(sc.samples_per_step) }} 个样本一步，不切张量和流水线时，有的假设形状在这么多卡上分不开。这些假设改在能分开的最多卡上（{{ fewer_gpus|join("、") }} 张）解析，单步耗时按同样的 GPU·秒拉长，所以表里的 FLOPs、占比和利用率与在本场景的卡数上算的一样。{% endif %}{% if offload_kept %}本场景卸载到 CPU 的层数（`cpu_offload_layers` = {{ sc.cpu_offload_layers }}）不少于假设的层数，假设里取层数减一（最后一层留在 GPU 上）；卸载只影响显存，不影响这里的运算量。{% endif %}

# %% tags=["remove-input"]
COURSE_TABLE = {(row["num_layers"], row["hidden_size"], row["sequence"]):  # the course's rows (a quote)
                (row["flops"], row["share"], row["mfu_with_attention"])
                for row in course.figures()["attention_table"]["rows"]}


def as_quoted(value, quoted):
    """`value` written with the digits of the course's `quoted` figure ("58%", "8.6%", "5.70e16")."""
    if quoted.endswith("%"):
        return d.pct(value, len(quoted[:-1].partition(".")[2]))
    return d.sci(value, len(quoted.partition("e")[0].replace(".", "")))


def table_mismatches(results):
    """How many of the course's figures the library, run for the three shapes in `results`,
    writes differently at the digits the course gives."""
    wrong = 0
    for (layers, hidden), (_, hacc) in results.items():
        for key in ("padded", "actual"):
            a = hacc["attention"][key]
            ours = (a["flops_per_step"], a["share"], a["mfu_with_attention"])
            wrong += sum(as_quoted(v, q) != q for v, q in zip(ours, COURSE_TABLE[(layers, hidden, key)]))
    return wrong


actual_label = "均长" if sc.sum_squared_lengths_from != "sequence_lengths" else "真实长度"
rows, hyp_rows = [], []  # hyp_rows: (share, utilization, label) of each of the six rows
groups = {(sc.num_layers, sc.hidden_size): (sc, acc)} if known else hyp  # a known model: its own
for (layers, hidden), (hsc, hacc) in groups.items():
    label = (f"你的模型：{layers} 层 h{hidden}（{hsc.num_full_attention_layers} 层全注意力，"
             f"注意力宽度 {d.num(hsc.attention_dim)}）" if known
             else f"{layers} 层 h{hidden}（{hsc.num_full_attention_layers} 层全注意力）")
    for key, reading in (("padded", "定长"), ("actual", actual_label)):
        a = hacc["attention"][key]
        hyp_rows.append((a["share"], a["mfu_with_attention"], f"{layers} 层 h{hidden} {reading}"))
        rows.append([label, f"{reading} {d.num(a['seq_len'])}", d.sci(a["flops_per_step"]),
                     d.pct(a["share"], 1), d.pct(a["mfu_with_attention"], 1)]
                    + ([" / ".join(COURSE_TABLE[(layers, hidden, key)])] if is_course else []))
headers = ["模型" if known else "假设", "序列口径", "注意力 FLOPs", "占总量", "含注意力的 MFU"]
d.table(rows, headers + (["课程原表（引用）"] if is_course else []),
        ("你的模型（config.json 的宽度）" if known else "三组形状假设") + " × 两种序列口径，"
        f"本库现算，按{words.convention(att['convention'])}")
shares = [row[0] for row in hyp_rows]
mfus = [row[1] for row in hyp_rows]
mismatches = table_mismatches(hyp) if is_course else None
hyp_lin = [hacc["linear_attention"] for _, hacc in groups.values()]
unknown = sum(x is not None and x["flops_per_step"] is None for x in hyp_lin)

# %% [markdown]
# {% if known %}按你的模型自己的宽度，注意力核心占一步运算的 **{{ span(shares, 0) }}**，含注意力的利用率是 **{{ span(mfus) }}**{% else %}在这三组假设下，注意力核心占一步运算的 **{{ (shares|min)|pct(0) }} 到 {{ (shares|max)|pct(0) }}**，含注意力的利用率在 **{{ (mfus|min)|pct(1) }} 到 {{ (mfus|max)|pct(1) }}** 之间{% endif %}，而 6ND 口径的 MFU 是 {{ acc.mfu|pct }}。{% if is_course %}本场景就是课程场景，最后一列是课程原文给出的数字，可以逐行对照：{% if mismatches == 0 %}按课程给出的位数，它们与本库现算的结果一致。{% else %}有 {{ mismatches }} 个数按课程给出的位数与本库现算的结果不同。{% endif %}{% else %}本场景不是课程场景，所以这里没有列出课程原表的数字：课程的数字只对课程的输入成立。{% endif %}{% if unknown and not known %}{% if unknown < hyp_lin|length %}{{ unknown }} 组{% else %}三组{% endif %}假设的形状都对不上任何一份模型配置，其中的线性注意力层没有头宽度可用，这些行的占比与利用率不含线性注意力项。{% endif %}

# %% [markdown]
# ## 3. 注意力占比随序列长度怎么变
#
# 把一步的 token 数固定、只改变每个样本的长度 s（B = D / s），占比就只剩 s 一个变量。6ND 对每个 token 是常数，线性注意力对每个 token 也是常数（记作 φ，F_lin = φ·D），softmax 注意力对每个 token 却正比于 s，于是占比是 s 的一条饱和曲线，占比过半的长度也能直接解出来。曲线用本场景的方阵比例 a（模型口径）；本场景还多画一条硬件口径的曲线（κ 与 r 取本场景的值）。

# %%
phi = sp.Symbol("phi", nonnegative=True)  # linear-attention FLOPs per token: F_lin = phi * D
per_length = {S: s, F_lin: phi * D}
att_s = attention.attention_padded.subs(per_length)
share_of_s = sp.simplify(attention.share(att_s).subs(per_length).subs(D, B * s))
att_hw_s = attention.attention_padded_hardware.subs(per_length)
all_hw = recompute_factor * model_flops + attention.linear_attention_hardware + att_hw_s
share_hw_of_s = sp.simplify((att_hw_s / all_hw).subs(per_length).subs(D, B * s))
(s_half,) = sp.solve(sp.Eq(share_of_s, sp.Rational(1, 2)), s)
d.eq(r"\text{share}(s)", share_of_s)
d.eq(r"\text{share}^{\mathrm{hw}}(s)", share_hw_of_s)
d.eq(r"s_{1/2}", s_half)

# %% tags=["remove-input"]
d.setup_plots()
args = (s, N, d_attn, L_full, phi, a_sq, kappa, r, r_core)
share_fn = sp.lambdify(args, share_of_s, "numpy")
share_hw_fn = sp.lambdify(args, share_hw_of_s, "numpy")


def phi_of(hsc, hacc):
    """Linear-attention FLOPs per token of a scenario (0 without such layers or widths)."""
    hlin = hacc["linear_attention"]
    return ((hlin or {}).get("flops_per_step") or 0.0) / hsc.tokens_per_step


#: This scenario's point on the curves: every argument of share_fn but the length s.
here = (sc.activated_params, sc.attention_dim, sc.num_full_attention_layers, phi_of(sc, acc),
        subs[a_sq], subs[kappa], subs[r], subs[r_core])
lengths = np.geomspace(1024, 4 * sc.seq_len, 200)
fig, ax = plt.subplots()
curves = [(f"{layers} layers, h{hidden} ({hsc.num_full_attention_layers} full)",
           hsc.attention_dim, hsc.num_full_attention_layers, phi_of(hsc, hacc), "-")
          for (layers, hidden), (hsc, hacc) in hyp.items()]
curves.append((f"scenario: d={sc.attention_dim}, {sc.num_full_attention_layers} full",
               sc.attention_dim, sc.num_full_attention_layers, phi_of(sc, acc), "--"))
for label, width, full, per_token, style in curves:
    ax.plot(lengths, 100 * share_fn(lengths, sc.activated_params, width, full, per_token,
                                    subs[a_sq], subs[kappa], subs[r], subs[r_core]), style, label=label)
ax.plot(lengths, 100 * share_hw_fn(lengths, *here), ":", color="black",
        label=f"scenario, hardware count ({sc.attention_kernel}, recompute {sc.recompute})")
for x, name in ((sc.mean_tokens_per_sample, "mean length"), (sc.seq_len, "seq_len")):
    ax.axvline(x, color="grey", lw=0.8, ls=":")
    ax.text(x, 2, f" {name}", rotation=90, va="bottom", fontsize=8, color="grey")
ax.set_xscale("log", base=2)
ax.set_ylim(0, 100)
ax.set_xlabel("sequence length s (tokens)")
ax.set_ylabel("attention share of all FLOPs (%)")
ax.set_title(f"Attention-core share vs sequence length (N = {sc.activated_params:.3g}, "
             f"attention_flops: {sc.attention_flops})")
ax.legend(fontsize=8, loc="upper left")
plt.show()

# %% [markdown]
# 图注：横轴是序列长度 s（token，按 2 的幂取对数刻度），纵轴是注意力核心占全部 FLOPs 的百分比。

# %%
half = {label: float(s_half.subs({N: sc.activated_params, d_attn: width, L_full: full,
                                  phi: per_token, a_sq: subs[a_sq]}))
        for label, width, full, per_token, _ in curves}

# %% tags=["remove-input"]
hw_over_model = float(sp.cancel(attention.attention_padded_hardware / attention.attention_padded)
                      .subs(subs))  # attention's hardware / model FLOPs (matmuls: recompute_factor)
hw_same = abs(hw_over_model - float(recompute_factor.subs(subs))) < 1e-12
half_values = list(half.values())  # the course's three shapes, then this scenario

# %% [markdown]
# 把各组数字代入 s₁/₂（a = {{ sp.sstr(attention.SQUARE_FRACTION[sc.attention_flops]) }}）：{% for (layers, hidden), (hsc, _) in hyp.items() %}{{ layers }} 层、h{{ hidden }}（{{ hsc.num_full_attention_layers }} 层全注意力）为 {{ half_values[loop.index0]|num }}；{% endfor %}本场景（d = {{ sc.attention_dim }}，{{ sc.num_full_attention_layers }} 层全注意力）为 {{ half_values[-1]|num }}。这张图里每个样本都按同一长度 s 计，没有定长补齐的混合口径（见第 6 节）。{% if hw_same %}硬件口径的曲线与模型口径的虚线重合：本场景里注意力与线性层的硬件倍数相同。{% else %}硬件口径的曲线高于模型口径的虚线：本场景的注意力在硬件上比线性层多做了一部分（flash kernel 重算打分矩阵，或 recompute 对注意力核心重做的份额比对权重一侧的大）。{% endif %}

# %% [markdown]
# ## 4. 真实的模型结构：注意力宽度不一定是 hidden size
#
# 课程用 hidden size 当注意力宽度，但这只在“头数 × 每头宽度 = hidden size”时成立。从场景所用模型发布的 config.json 读出它的结构（`costmodel.inputs.models`{% if is_course %}；课程场景是 Qwen3.6-35B-A3B{% endif %}）：

# %% tags=["remove-input"]
# The scenario's own model when its config is known (model:, or the course's); else the course's
# model, said plainly to be the course's worked example.
own_shape = matching_shape(sc.values)
shape = own_shape if own_shape is not None else models.load_shape(COURSE_MODEL)
shown_name = "Qwen3.6-35B-A3B" if shape.name == COURSE_MODEL else shape.name  # as the course writes it
model_name = shown_name if own_shape is not None else f"课程的模型 {shown_name}"

# %% [markdown]
# {% if own_shape is none %}
# 本场景的模型没有 config.json 可读（或它的键与 config 不符），下面用课程的模型 {{ shown_name }} 作例子，不是你的模型；换成你的模型要在场景里写 `model:`。
#
# {% endif %}
# **{{ model_name }} 的注意力结构（来自 config.json）**
#
# | 字段 | 值 |
# |---|---|
# | hidden_size | {{ shape.hidden_size|num }} |
# | 全注意力层的头数 × 每头宽度 | {{ shape.num_heads }} × {{ shape.head_dim }} = {{ shape.attention_dim|num }} |
# | 注意力宽度 / hidden size | {{ (shape.attention_dim / shape.hidden_size)|short }} |
# | 全注意力层 / 总层数 | {{ shape.num_full_attention_layers }} / {{ shape.num_layers }} |
# | 其余层 | {% if shape.num_linear_attention_layers %}{{ shape.num_linear_attention_layers }} 层线性注意力（gated DeltaNet），没有 s² 项{% else %}没有（每层都是全注意力）{% endif %} |

# %%
rsc, racc = resolve_with(num_layers=shape.num_layers, full_attention_every=shape.full_attention_every,
                         hidden_size=shape.hidden_size, num_heads=shape.num_heads,
                         head_dim=shape.head_dim, attention_dim=shape.attention_dim)
wsc, wacc = resolve_with(num_layers=shape.num_layers, full_attention_every=shape.full_attention_every,
                         hidden_size=shape.hidden_size, attention_dim=shape.hidden_size,
                         num_heads=None, head_dim=None)

# %% tags=["remove-input"]
real_product = shape.num_full_attention_layers * shape.attention_dim
products = {(layers, hidden): hsc.num_full_attention_layers * hsc.attention_dim
            for (layers, hidden), (hsc, _) in hyp.items()}
same = [f"{layers} 层 h{hidden}" for (layers, hidden), p in products.items() if p == real_product]
own = (sc.attention_dim == rsc.attention_dim
       and sc.num_full_attention_layers == rsc.num_full_attention_layers)
lin_rows = {linear_cell(rsc, racc, "actual"), linear_cell(wsc, wacc, "actual")}

# %% [markdown]
# **{{ model_name }} 的结构（L_full = {{ rsc.num_full_attention_layers }}）代入本场景的其余输入，按{{ words.convention(att.convention) }}**
#
# | 注意力宽度 | 序列口径 | 注意力 FLOPs | 占总量 | 线性注意力占比 | 含注意力的 MFU |
# |---|---|---|---|---|---|
# {% for label, xsc, x in (("真实宽度 d = 头数 × 每头宽度", rsc, racc), ("误用 hidden size 当宽度", wsc, wacc)) %}
# {% for key, reading in (("padded", "定长"), ("actual", "真实长度")) %}
# | {{ label }} | {{ reading }} | {{ x.attention[key].flops_per_step|sci }} | {{ x.attention[key].share|pct(1) }} | {{ linear_cell(xsc, x, key) }} | {{ x.attention[key].mfu_with_attention|pct(1) }} |
# {% endfor %}
# {% endfor %}
#
# {% if own %}本场景用的正是这个结构，所以第一行与第 1 节的数字相同。{% else %}本场景自己的结构是 d = {{ sc.attention_dim|num }}、L_full = {{ sc.num_full_attention_layers }}，上表只是把 {{ model_name }} 的结构代入本场景的其余输入，供对照。{% endif %}{% if shape.attention_dim != shape.hidden_size %}把 hidden size 当宽度，每个全注意力层的注意力项只算到真实值的 {{ (shape.hidden_size / shape.attention_dim)|pct(0) }}。{% else %}这个模型的注意力宽度恰好等于 hidden size，两行相同。{% endif %}决定注意力项的是乘积 L_full·d：真实结构是 {{ shape.num_full_attention_layers }} × {{ shape.attention_dim|num }} = {{ real_product|num }}，三组假设分别是 {% for p in products.values() %}{{ p|num }}{% if not loop.last %}、{% endif %}{% endfor %}{% if same %}，其中 {{ same|join("、") }} 与真实结构的乘积恰好相等，所以{% if same|length == 1 %}那两行{% else %}那 {{ 2 * same|length }} 行{% endif %}的注意力 FLOPs 就是真实模型的注意力项。{% else %}，在本场景的层间隔下没有一组与真实结构相等。{% endif %}{% if "未计入" in lin_rows %}线性注意力一列标为“未计入”的行：只有形状与场景所用的模型配置（`model:`，没有时是课程模型）完全对上，库才知道线性注意力层的头宽度；对不上的行不含这一项，它们的占比和利用率因此不能与计入的行直接相比。{% endif %}

# %% [markdown]
# ## 5. 同一次运行，四种数法并排
#
# 公开的 FLOP 计数器在两点上分歧最大（各家的具体做法见仓库的约定文档 [docs/conventions.md](../docs/conventions.md)）：
#
# - **方阵比例（attention_flops）**：因果注意力只需要 s×s 的下三角，causal kernel 会跳过上三角，按 causal 数只算一半；按 full 数则是整块方阵；
# - **反向倍数（attention_kernel）**：eager 实现的反向是前向的 2 倍；FlashAttention 重算一次 QKᵀ，反向是 2.5 倍（第 1 节）。
#
# 模型 FLOPs 只看方阵比例（始终 3 倍前向），硬件 FLOPs 还要看 kernel 与 recompute。下面把本场景换成四种组合各算一遍，标出本场景自己的那一种。

# %%
combo = {(flops, kernel): resolve_with(attention_flops=flops, attention_kernel=kernel)[1]["attention"]
         for flops in attention.SQUARE_FRACTION for kernel in attention.KERNEL_BACKWARD_OVER_FORWARD}

# %% tags=["remove-input"]
rows = []
for (flops, kernel), c in combo.items():
    mark = "◀ 本场景" if (flops, kernel) == (sc.attention_flops, sc.attention_kernel) else ""
    for key, reading in (("padded", "补齐长度 S"), ("actual", "真实长度 Σsᵢ²")):
        a = c[key]
        rows.append((flops, kernel, reading, d.sci(a["flops_per_step"]),
                     d.sci(a["hardware_flops_per_step"]), d.pct(a["share"], 1),
                     d.pct(a["mfu_with_attention"], 1), d.pct(a["hfu_with_attention"], 1), mark))
d.table(rows, ["attention_flops", "attention_kernel", "序列口径", "模型 FLOPs（3×）",
               "硬件 FLOPs（含 recompute）", "注意力占比", "含注意力的 MFU", "含注意力的 HFU", ""],
        f"四种组合下的注意力项（本场景其余输入不变，r_core = {subs[r_core]:g}）")

# %% [markdown]
# 模型 FLOPs 只随方阵比例变：kernel 不改变它，所以同一方阵比例的 eager 行与 flash 行模型 FLOPs 相同，MFU 也相同。硬件 FLOPs 则按 (1 + r_core + κ) 倍前向计，r_core 是注意力核心被重算的份额（重算了 `core_attn` 或整层时为 1）。

# %% tags=["remove-input"]
full_eager, causal_eager = combo[("full", "eager")]["actual"], combo[("causal", "eager")]["actual"]
full_flash = combo[("full", "flash")]["actual"]
hw_multiplier = {k: 1 + subs[r_core] + float(v) for k, v in attention.KERNEL_BACKWARD_OVER_FORWARD.items()}

# %% [markdown]
# 本场景 r_core = {{ subs[r_core]|short }}：eager 是 {{ hw_multiplier.eager|short }} 倍前向、flash 是 {{ hw_multiplier.flash|short }} 倍前向。{% if full_eager.flops_per_step > 0 %}full 的注意力模型 FLOPs 是 causal 的 {{ (full_eager.flops_per_step / causal_eager.flops_per_step)|times(1) }}；同一方阵比例下 flash 的硬件 FLOPs 比 eager 多 {{ (full_flash.hardware_flops_per_step / full_eager.hardware_flops_per_step - 1)|pct(1) }}。按真实长度，含注意力的 MFU 在 {{ causal_eager.mfu_with_attention|pct(1) }}（causal）和 {{ full_eager.mfu_with_attention|pct(1) }}（full）之间，取决于你接受哪种数法。{% else %}本场景没有全注意力层，四种组合的注意力项都是 0。{% endif %}

# %% [markdown]
# 公开的代码和日志常把“训练/前向”的倍数和方阵比例乘在一起，当成一个数记账。把四种习惯写成 (倍数, 比例) 两个数，最大和最小的乘积相差：

# %%
factor = {key: conv.training_multiplier * conv.square_fraction
          for key, conv in attention.CONVENTIONS.items()}
spread = max(factor.values()) / min(factor.values())
d.table([(words.convention(key), sp.sstr(conv.training_multiplier), sp.sstr(conv.square_fraction),
          sp.sstr(factor[key])) for key, conv in attention.CONVENTIONS.items()],
        ["数法", "训练/前向", "方阵比例", "乘积"], "各家数法的两个数（attention.CONVENTIONS）")
d.eq(r"\frac{\max(\text{multiplier}\times\text{fraction})}{\min(\text{multiplier}\times\text{fraction})}",
     spread, f"{float(spread):.2f}")

# %% [markdown]
# ### 你的框架日志用的是哪一种
#
# 读训练日志里的“TFLOP/s”或“MFU”之前，先弄清它用哪种数法。下表按各家公开代码的计数方式（只列做法，不抄原文），把本场景的注意力项各算一遍：
#
# - 课程、PaLM 附录 B、nanoGPT 的 `estimate_mfu`、torchtitan：整块方阵，3 倍；后三者按给定的序列长度（nanoGPT 的 block_size、torchtitan 的 seq_len）给每个 token 记注意力，对应本场景的配置长度 S；
# - Megatron-LM 的 `num_floating_point_operations`（2025 年起）：causal 减半，3 倍；定长（BSHD）模式把 token 数记为 batch_size × seq_length，补齐的槽位也当成运算，Σs² 记为 B·S²；packed（THD）模式用 cu_seqlens 里的真实长度，token 数是 Σ L_i，平方和是 Σ L_i²；
# - FlashAttention 仓库的基准脚本：3.5 倍，causal 时减半，公式按一批同长序列写（batch × seqlen²）；套用到本场景时取 kernel 实际处理的长度；
# - PyTorch `FlopCounterMode` 对 SDPA 的计数：3.5 倍，不因 causal 减半；它按张量的实际形状数，补齐的批次就是 S，varlen 调用按 cu_seqlens 的每段长度。
#
# 表中“按 B·S²”是每个样本都补齐到 S；“按 Σsᵢ²”是按真实长度逐个样本求平方和；“按 S·slots”是每个 token 按配置长度 S 记注意力、乘以一步填满的 token 槽位数。

# %%
slots = padding.SLOTS[sc.batching]  # token slots a step fills: B·S padded, D packed
SQUARES = {"B·S²": B * S**2, "Σsᵢ²": sum_sq, "S·slots": S * slots}
shape_square = "B·S²" if sc.batching == "padded" else "Σsᵢ²"  # what a kernel call sees
per_token_square = "B·S²" if sc.batching == "padded" else "S·slots"


def conv_flops(key, square):
    """Attention-core FLOPs of the step under CONVENTIONS[key] over one of SQUARES."""
    return float((attention.training_per_layer(key, 1) * L_full * SQUARES[square]).subs(subs))

# %% tags=["remove-input"]
MEGATRON = "Megatron-LM num_floating_point_operations（2025 起）"
FRAMEWORKS = [  # (who, CONVENTIONS key, squares it logs for this scenario)
    ("课程（第 06 节）", "course", ("B·S²", "Σsᵢ²")),
    ("PaLM 附录 B / nanoGPT estimate_mfu / torchtitan", "course", (per_token_square,)),
    (MEGATRON, "causal", (shape_square,)),
    ("FlashAttention 基准脚本（causal=True）", "flash_causal", (shape_square,)),
    ("torch FlopCounterMode（SDPA）", "flash", (shape_square,)),
]
logged = {}
rows = []
for who, key, squares in FRAMEWORKS:
    conv = attention.CONVENTIONS[key]
    logged[who] = {square: conv_flops(key, square) for square in squares}
    rows.append((who, sp.sstr(conv.square_fraction), sp.sstr(conv.training_multiplier),
                 "；".join(f"按 {x}：{d.sci(v)}" for x, v in logged[who].items()),
                 "；".join(d.pct(v / acc["model_flops_per_step"], 1) for v in logged[who].values())))
d.table(rows, ["日志 / 计数器", "方阵比例", "训练/前向", "本场景会记下的注意力项", "相对 6ND"],
        f"各家数法下本场景的注意力项（batching: {sc.batching}；slots = {sp.sstr(slots)}）")

# %%
megatron_matmul = float(model_flops.subs(D, slots).subs(subs))
megatron_attention = logged[MEGATRON][shape_square]
megatron_total = megatron_matmul + megatron_attention
d.eq(r"F_{\mathrm{matmul}}^{\mathrm{Megatron}}", model_flops.subs(D, slots), d.sci(megatron_matmul))

# %% tags=["remove-input"]
all_logged = [v for x in logged.values() for v in x.values()]
lo, hi = min(all_logged), max(all_logged)

# %% [markdown]
# 本场景 {{ ("batching: " ~ sc.batching)|code }}，对应 Megatron-LM 的{% if sc.batching == "padded" %}定长（BSHD）模式：线性层按 B·S 个槽位计，补齐的 pad 也算作运算{% else %} packed（THD）模式：线性层按真实 token 数 Σ L_i = D 计，注意力按 cu_seqlens 的 Σ L_i²{% endif %}。它的线性层项约为 {{ megatron_matmul|sci }}（6ND 是 {{ acc.model_flops_per_step|sci }}），注意力项 {{ megatron_attention|sci }}，合计 {{ megatron_total|sci }}，日志里的吞吐约为 **{{ (megatron_total / (sc.step_time * sc.num_gpus))|tflops }}/GPU**，相当于峰值的 {{ (megatron_total / (sc.step_time * sc.num_gpus * sc.peak_flops))|pct(1) }}{% if megatron_total > sc.step_time * sc.num_gpus * sc.peak_flops %}（超过 100%：本场景的输入与这种数法不能同时成立，见第 1 节）{% endif %}。这里用本场景的 N 代替 Megatron 按结构参数自己数出的线性层项（稠密 SwiGLU 模型两者相同，MoE 与混合模型有小差别，例如它不数路由器，见 benchmarks/megatron_flops.py）{% if lin %}，也没有加线性注意力层的核心运算{% endif %}。{% if sc.batching == "packed" and sc.sum_squared_lengths_from != "sequence_lengths" %}本场景没有长度文件，Σsᵢ² 用 B·s̄² 代替；样本长短不一时真实的 Σ L_i² 更大，Megatron 日志里的注意力项也会比这里大。{% endif %}
#
# {% if sc.attention_flops == "causal" %}
# - 日志来自 Megatron-LM：本场景已设 `attention_flops: causal`，第 1 节的模型口径就是它的数法。
# {% else %}
# - 日志来自 Megatron-LM：它按 causal（一半）数注意力，本场景按 full 数，多出一倍；对照时把场景的 `attention_flops` 设为 `causal` 再读第 1 节，或直接看上表 Megatron 那一行。
# {% endif %}
# {% if sc.batching == "padded" %}
# - Megatron-LM 在定长模式下把补齐的槽位也算作运算：它的利用率对应的是“槽位”口径（第 6 节第二种读法，线性层 6N·B·S），不能和按真实 token 的 6ND 口径 MFU {{ acc.mfu|pct }} 直接比；packed（THD）模式则用真实长度，与第 1 节的真实长度读数一致。
# {% else %}
# - Megatron-LM 在 packed（THD）模式下用真实长度，与第 1 节按真实长度、causal 的读数一致；若换成定长模式，它会把补齐的槽位也算作运算。
# {% endif %}
# - 日志来自 nanoGPT 的 `estimate_mfu`、torchtitan 或按 PaLM 附录 B 自己写的公式：整块方阵、3 倍，与课程口径（`attention_flops: full`）比，长度取配置长度 S。
# - 数字来自 FlashAttention 的基准或 `FlopCounterMode`：3.5 倍里含重算打分矩阵，是硬件 FLOPs，应和 HFU 比而不是和 MFU 比；FlashAttention 基准在 causal 时减半，`FlopCounterMode` 不减半。{% if subs[r] > 0 or subs[r_core] > 0 %}计数器数的是真正执行的算子：本场景开着 recompute（{{ ("recompute: " ~ sc.recompute)|code }}），被重算的那部分前向也会算进它的总数。{% endif %}
# {% if lo > 0 %}
# - 同一次运行，上表各家记下的注意力项从 {{ lo|sci }} 到 {{ hi|sci }}，相差 {{ (hi / lo)|times(2) }}：报“含注意力的 MFU”时必须同时写明数法，拿两个数法不同的数相比，结论可能完全相反。
# {% endif %}

# %% [markdown]
# ## 6. 定长行里藏着的混合口径
#
# 课程的“定长”行把两种东西放在了一起：注意力项按补齐后的长度 S 算（好像 pad 位置也参与了注意力），6ND 却仍然只数真实 token 的 D。如果定长补齐真的发生了，pad token 也会穿过每一个线性层，硬件实际做的线性层运算是 6N·B·S，而不是 6N·D。下面把三种自洽程度不同的读法并排（注意力按本场景的方阵比例 a）：

# %%
mixed = model_flops + attention.attention_padded
padded_real = model_flops.subs(D, padding.SLOTS["padded"]) + attention.attention_padded
packed = model_flops + attention.attention_actual
d.eq(r"F_{\text{course, padded row}}", mixed)
d.eq(r"F_{\text{padding real}}", padded_real)
d.eq(r"F_{\text{padding real}} - F_{\text{course, padded row}}", sp.factor(padded_real - mixed))

# %%
cluster = sc.step_time * sc.num_gpus * sc.peak_flops  # FLOPs the cluster can do in a step
readings = {
    "课程定长行：6N·D + 注意力(S)": (model_flops, attention.attention_padded),
    "若真的定长补齐：6N·B·S + 注意力(S)": (model_flops.subs(D, padding.SLOTS["padded"]),
                                          attention.attention_padded),
    "若已 packing（varlen）：6N·D + 注意力(Σsᵢ²)": (model_flops, attention.attention_actual),
}
values = {label: (float(linear.subs(subs)), float(attn.subs(subs)))
          for label, (linear, attn) in readings.items()}

# %% tags=["remove-input"]
# one table when the three readings differ in a column as written
readings_differ = len({(d.sci(lin_f), d.sci(at), d.sci(lin_f + at), d.pct(at / (lin_f + at), 1),
                        d.pct((lin_f + at) / cluster, 1)) for lin_f, at in values.values()}) > 1
(mix_l, mix_a), (pad_l, pad_a), (pk_l, pk_a) = values.values()

# %% [markdown]
# {% if readings_differ %}
# **定长行的三种读法（本场景，均不含 recompute{% if lin and lin.flops_per_step is not none %}，也不含线性注意力项{% endif %}）**
#
# | 读法 | 线性层 FLOPs | 注意力 FLOPs | 合计 | 注意力占比 | 合计 / 集群峰值 |
# |---|---|---|---|---|---|
# {% for label, (lin_f, at) in values.items() %}
# | {{ label }} | {{ lin_f|sci }} | {{ at|sci }} | {{ (lin_f + at)|sci }} | {{ (at / (lin_f + at))|pct(1) }} | {{ ((lin_f + at) / cluster)|pct(1) }} |
# {% endfor %}
# {% else %}
# 本场景没有 pad、每个样本都是 $S$ 长，三种读法是同一个数：线性层 {{ mix_l|sci }}、注意力 {{ mix_a|sci }}、合计 {{ (mix_l + mix_a)|sci }} FLOPs，注意力占 {{ (mix_a / (mix_l + mix_a))|pct(1) }}，合计 / 集群峰值 {{ ((mix_l + mix_a) / cluster)|pct(1) }}（均不含 recompute）。
# {% endif %}
#
# {% if pad_l > mix_l %}
# {% if sc.batching == "packed" %}本场景 `batching: packed`：第三行就是本场景的读法，前两行回答的是“如果改成定长补齐会怎样”。{% endif %}第一行（课程定长行的读法）给出利用率 {{ ((mix_l + mix_a) / cluster)|pct(1) }}。如果补齐真的发生，硬件在线性层上还多做了 {{ (pad_l - mix_l)|sci }} FLOPs（pad token 的 6N·(B·S − D)），它实际做的运算对应 **{{ ((pad_l + pad_a) / cluster)|pct(1) }}** 的利用率{% if pad_l + pad_a > cluster %}（超过 100%：在本场景的输入下，这样的补齐不可能真的发生）{% endif %}，注意力占比则是 {{ (pad_a / (pad_l + pad_a))|pct(1) }}，而不是 {{ (mix_a / (mix_l + mix_a))|pct(1) }}。{% if sc.batching == "packed" %}按第三行（已 packing）读，利用率是 {% else %}如果已经 packing，则应看第三行：{% endif %}{{ ((pk_l + pk_a) / cluster)|pct(1) }}{% if sc.sum_squared_lengths_from == "sequence_lengths" %}，其中 Σsᵢ² 来自长度文件，是真实长度的平方和。{% else %}，而且这还是下限，因为样本长度不一时 Σsᵢ² 大于 B·s̄²（见 04）。{% endif %}三行里没有一行是“真实 MFU”：它们回答的是三个不同的问题，课程的定长行恰好把其中两个问题的分子和分母混在了一起。{% if sc.attention_flops == "causal" %}本场景按 causal 数注意力，第二行正是 Megatron-LM 定长（BSHD）模式的数法（线性层项以 6N 近似）。{% else %}Megatron-LM 的定长（BSHD）模式就是第二行的读法，只是注意力按 causal 减半（把 `attention_flops` 设为 `causal` 再看这张表）。{% endif %}
# {% else %}
# 本场景的平均真实长度等于配置长度，没有 pad：三种读法给出同一个数，利用率 {{ ((mix_l + mix_a) / cluster)|pct(1) }}、注意力占比 {{ (mix_a / (mix_l + mix_a))|pct(1) }}。一旦样本短于配置长度，课程的定长行就会把补齐后的注意力和真实 token 的 6ND 混在一起，三行也随之分开。
# {% endif %}
# {% if sc.recompute != "none" %}
#
# 另外，本场景的 recompute 是 {{ sc.recompute|code }}，硬件还要重算一部分前向，上表的合计都没有包含这部分；表中的利用率因此都低于硬件真正的忙碌程度。
# {% endif %}

# %% [markdown]
# ## 7. 对账：与 PyTorch 的 FLOP 计数器比一比
#
# 公式是否数对了，最好让一个独立的计数器来验证。`make validate` 在小尺寸的真实模型结构上跑一次前向加反向，用 `torch.utils.flop_counter.FlopCounterMode` 逐个算子计数，再与本库的公式比较，结果写进 `costmodel/course/flop_counter.csv`（表中“预测”是公式的预测，“计数”是计数器数到的）。按仓库的约定文档 [docs/conventions.md](../docs/conventions.md)，注意力用 eager 实现、专家逐个计算时，计数器数到的应当恰好是 6·N·D + 3·(4·s²·d·L_full·B)，即课程的“3 倍、整块方阵”口径；输入 embedding 是查表，不计 FLOPs，所以 N 里也不含它。

# %% tags=["remove-input"]
csv_path = resources.files("costmodel.course") / "flop_counter.csv"
have_csv = csv_path.exists()


def agrees(row):
    try:
        return float(row.get("difference") or "nan") == 0
    except ValueError:
        return False


counter_rows = []
if have_csv:
    with csv_path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        columns = reader.fieldnames or []
        raw = list(reader)
    counter_rows = raw
    core = [r for r in raw if r.get("term") in ("matmul_6ND", "attention_core")]
    off = sorted({r.get("term", "") for r in raw if not agrees(r)})
    runs = {term: len({r.get("model") for r in core if r.get("term") == term})
            for term in ("matmul_6ND", "attention_core")}
    confirmed = {r.get("term") for r in raw if agrees(r)}
    checks = [("attention_core_flash", "PyTorch 对 SDPA 的 flash 公式是 3.5 倍、整块方阵，不因 causal 减半"),
              ("attention_core_sdpa_math", "SDPA 的 math 路径拆成普通矩阵乘，仍是 3 倍"),
              ("attention_core_varlen", "按文档切开的 varlen 注意力数到的是各段长度的平方和 Σsᵢ²")]
    seen = [claim for term, claim in checks if term in confirmed]
    same_rows, core_ok = sum(map(agrees, raw)), bool(core) and all(map(agrees, core))

# %% [markdown]
# {% if have_csv %}
# **FLOP 计数器对账（`costmodel/course/flop_counter.csv`）**
#
# | 模型 | 项 | batch | seq_len | 预测 | 计数 | 差值 | 说明 |
# |---|---|---|---|---|---|---|---|
# {% for r in counter_rows %}
# | {{ r.model|code }} | {{ r.term|code }} | {{ d.csv_cell(r.batch) }} | {{ d.csv_cell(r.seq_len) }} | {{ d.csv_cell(r.predicted) }} | {{ d.csv_cell(r.counted) }} | {{ d.csv_cell(r.difference) }} | {{ words.counter_note(r.model, r.term, r.note) }} |
# {% endfor %}
#
# 共 {{ raw|length }} 行，其中 {{ same_rows }} 行预测与计数完全相同。{% if core_ok %}本节用到的两项都逐个 FLOP 对上了：6ND 的矩阵乘在 {{ runs.matmul_6ND }} 次运行里，注意力核心在 {{ runs.attention_core }} 次运行里；课程口径的 3·4·s²·d·L_full·B 正是计数器数到的量。{% elif core %}注意：6ND 或注意力核心有对不上的行，先看“说明”一列。{% endif %}{% if off %}有差异的项是 {% for x in off %}{{ x|code }}{% if not loop.last %}、{% endif %}{% endfor %}，原因写在“说明”一列。{% endif %}{% if seen %}第 5 节用到的几条数法也在这里逐个 FLOP 对上了：{{ seen|join("；") }}。{% endif %}
# {% else %}
# 还没有对账结果：没有找到 `costmodel/course/flop_counter.csv`。在仓库根目录运行 `make validate` 生成它，再重新执行本笔记本。
# {% endif %}

# %% [markdown]
# ## 8. 课程的说法，逐条核对
#
# 课程在这一节（以及开头和标题）给出了一个公式、一张六行表和几条结论。下表把每一条放在本页算出的数字旁边。课程的数字说的是课程自己的运行；换成你的场景时，中间一列是你的数字，第三列说明课程的说法放到你的运行上是否还成立。

# %% tags=["remove-input"]
full_mfu = combo[("full", "eager")]["actual"]["mfu_with_attention"]  # with attention, real lengths
causal_mfu = combo[("causal", "eager")]["actual"]["mfu_with_attention"]
# A packed run has no padding: its one reading is the real lengths' (the padded one is hypothetical).
own_padded = actual if sc.batching == "packed" else padded
own_shares = (actual["share"], own_padded["share"])
own_mfus = (actual["mfu_with_attention"], own_padded["mfu_with_attention"])
own_text = f"{two_readings(*own_mfus)}，按{words.convention(att['convention'])}"
course_hyp = hyp if is_course else {  # the course's own run under its three shapes
    (layers, hidden): (lambda csc: (csc, account(csc)))(scenario.resolve(None, dict(
        num_layers=layers, hidden_size=hidden, attention_dim=hidden, num_heads=None, head_dim=None)))
    for layers, hidden in HYPOTHESES}
figures_checked = 3 * len(COURSE_TABLE)
table_wrong = table_mismatches(course_hyp)
for_team = "" if is_course else "课程说的是它自己的运行；"
rows = []


def per_token(xsc):
    """s̄·L_full·d ÷ N: what attention's FLOPs per token over 6N grow with."""
    return xsc.mean_tokens_per_sample * xsc.num_full_attention_layers * xsc.attention_dim / xsc.activated_params


def share_inputs():
    """Which inputs make a team's attention share differ from the course's range."""
    theirs = [per_token(hsc) for hsc, _ in course_hyp.values()]
    csc = next(iter(course_hyp.values()))[0]
    return (f"注意力占比随 s̄·L_full·d ÷ N 增长（s̄ 平均长度，L_full·d 全注意力层数 × 注意力宽度，N 激活参数）："
            f"你的场景是 {d.num(sc.mean_tokens_per_sample)} × {d.num(sc.num_full_attention_layers * sc.attention_dim)}"
            f" ÷ {d.sci(sc.activated_params)} = {d.num(per_token(sc), 2)}，课程的三组形状是 {d.num(min(theirs), 2)}–"
            f"{d.num(max(theirs), 2)}（s̄ = {d.num(csc.mean_tokens_per_sample)}，N = {d.sci(csc.activated_params)}）")

# The per-layer formula: 4·s²·width, with the hidden size as the width.
same_width = sc.attention_dim == sc.hidden_size
rows.append((
    "每层前向的注意力核心约为 " + course.claim("nb05_attention_per_layer"),
    f"4·s²·d，d = {d.num(sc.attention_dim)}（{width_from}）；hidden_size = {d.num(sc.hidden_size)}",
    d.verdict(same_width, ("" if is_course else "课程说的是它自己的模型；") + (
        "4·s² 乘宽度的形状与第 1 节的推导一致；本场景的注意力宽度恰好等于 hidden size，所以这个式子成立，"
        "但一般应写头数 × 每头宽度" if same_width else
        f"4·s² 乘宽度的形状与第 1 节的推导一致，但宽度应是注意力宽度 d = {d.num(sc.attention_dim)}，"
        f"不是 hidden size {d.num(sc.hidden_size)}；用 hidden size 会把注意力项算成真实值的 "
        f"{d.pct(sc.hidden_size / sc.attention_dim, 0)}"))))

# seq² at the configured length: the course's "这个数很大".
seq_sq = float(sc.seq_len) ** 2
rows.append((
    "49K 序列下 seq² = 49,152² = " + course.claim("nb05_seq_squared") + "，这个数很大",
    f"S² = {d.num(sc.seq_len)}² = {d.sci(seq_sq, 3)}",
    d.judge("nb05_seq_squared", seq_sq, d.sci(seq_sq, 3), "本场景的配置长度不是 49,152", own=False)
    if is_course or seq_sq == 49_152**2 else  # the claim is arithmetic on 49K: true for any run
    d.verdict(True, f"课程算的是 49,152 的平方，这个算术与运行无关；你的配置长度是 {d.num(sc.seq_len)}，"
              f"S² 是它的 {d.pct(seq_sq / 49_152**2, 1)}")))

# The six-row table, recomputed from the course's own inputs.
first = COURSE_TABLE[HYPOTHESES[0] + ("padded",)]
table_section = course.figures()["attention_table"]["section"]
rows.append((
    f"六行敏感性表：三组形状 × 定长/均长的注意力 FLOPs、占比与含注意力的 MFU（例如 {HYPOTHESES[0][0]} 层 "
    f"h{HYPOTHESES[0][1]} 定长：{' / '.join(first)}；课程 {table_section}）",
    (f"按课程的输入重算 {figures_checked} 个数，{figures_checked - table_wrong} 个按课程的位数相同" if is_course
     else f"{'你的模型（config.json 的宽度）' if known else '你的输入套用三组形状'}：占比 {span(shares, 0)}，"
     f"含注意力的利用率 {span(mfus)}（第 2 节）"
     + ("；超过 100% 的是补齐读法，说明这组输入下补齐不可能发生" if max(mfus) > 1 else "")),
    d.verdict(table_wrong == 0, (
        "本库按课程的输入逐个重算，" + ("全部对得上" if table_wrong == 0 else f"有 {table_wrong} 个数对不上"))
        + ("" if is_course else "；那是课程的运行，你的输入得到的是中间一列的数"))))

# Attention's share of all FLOPs: 32–73% over the course's shapes.
hyp_in = all(in_course_range(x, "attention_share_range") for x in shares)
own_in = all(in_course_range(x, "attention_share_range") for x in own_shares)
share_here = two_readings(*own_shares)
rows.append((
    "49K 序列下注意力核心占全部运算的 " + course.claim("attention_share_range"),
    (f"三组形状：{span(shares, 0)}；本场景的真实结构：{share_here}" if is_course else f"你的场景：{share_here}"),
    d.verdict((hyp_in if is_course else True) and own_in, (
        f"三组形状的占比{'都在' if hyp_in else '不都在'}这个范围内，本场景的真实结构"
        f"{where_in_range(own_shares, 'attention_share_range')}范围内" if is_course else
        f"你的场景{where_in_range(own_shares, 'attention_share_range')}这个范围内"
        + ("" if own_in else "：" + share_inputs())))))


def utilization_row(key, what):
    """A claim on the 'real' utilization (attention counted): the course's six rows against the
    range it gives, and this scenario's own readings."""
    low, high = course.figures()[key]["range"]
    own_ok = all(in_course_range(x, key) for x in own_mfus)
    if not is_course:
        return (what + course.claim(key), f"你的场景：{own_text}", d.verdict(own_ok, (
            f"你的场景{where_in_range(own_mfus, key)}这个范围内") + ("" if own_ok else (
            f"：含注意力的利用率是 6ND 口径的 MFU 加上注意力那一份，你的 MFU 是 {d.pct(acc['mfu'])}"
            f"（课程 {course.figures()['nb01_mfu']['text']}），注意力占 {span(own_shares)}"
            f"（课程 {'–'.join(course.figures()['attention_share_range']['range'])}）"))))
    lowest, highest = min(hyp_rows, key=lambda x: x[1]), max(hyp_rows, key=lambda x: x[1])
    problems = ([f"课程自己表中最低的一行（{lowest[2]}）是 {d.pct(lowest[1], 1)}，低于它写的下限 {low}"]
                if not in_course_range(lowest[1], key) else [])
    problems += ([f"最高的一行（{highest[2]}）是 {d.pct(highest[1], 1)}，高于上限 {high}"]
                 if not in_course_range(highest[1], key) else [])
    why = ("；".join(problems) + f"：照它自己的表，范围应是 {span(mfus)}" if problems else
           "课程表格的六行都在这个范围内")
    why += f"；本场景的真实结构{where_in_range(own_mfus, key)}范围内"
    return (what + course.claim(key), f"课程表格的六行：{span(mfus)}；本场景的真实结构：{own_text}",
            d.verdict(not problems and own_ok, why))


rows.append(utilization_row("true_utilization", "结论：把注意力算进去，硬件真实利用率约为 "))
rows.append(utilization_row("nb05_true_utilization_intro", "开头：真实的硬件利用率大概在 "))

# The headline: the reported 8–10% understates the real utilization. The course calls its 8–10%
# HFU (06.3): set against HFU with the attention core counted (evaluate/account/claims.py), like with like.
hfu_full = combo[("full", "eager")]["actual"]["hfu_with_attention"]
hfu_causal = combo[("causal", "eager")]["actual"]["hfu_with_attention"]
holds, top = (claims.headline_understated(hfu_full, hfu_causal, acc["mfu"], True) if is_course
              else claims.headline_understated(full_mfu, causal_mfu, acc["mfu"], False))
high = course.figures()["headline_understated"]["range"][1]
counts = (f"HFU 口径、含注意力、按真实长度：full {d.pct(hfu_full, 1)}，causal {d.pct(hfu_causal, 1)}"
          f"（MFU 口径：{d.pct(full_mfu, 1)}、{d.pct(causal_mfu, 1)}）")
convention = ("课程在 06.3 把这个区间读作 HFU，所以拿含注意力的 HFU 比（分子 = 重算系数 × (6ND + 注意力核心)，"
              "注意力核心按前向 3 倍计，不含 FlashAttention 反向里重算的分数）")
if is_course:
    why = convention + (f"：两种数法都高于 {high}，报出的数确实偏低" if holds else
                        f"：按 causal 数是 {d.pct(hfu_causal, 1)}，不高于 {high}，“被低估”只在 full 数法下成立"
                        if hfu_full > top else f"：两种数法都不高于 {high}，报出的数并没有被低估")
else:
    why = for_team + (f"与你的 6ND 口径 MFU 比：它是 {d.pct(acc['mfu'])}，算进注意力后是 {d.pct(causal_mfu, 1)}（causal）到 "
                      f"{d.pct(full_mfu, 1)}（full），" + ("漏掉注意力确实会低估你的利用率，低估多少取决于数法"
                                                         if holds else "注意力项可以忽略，谈不上低估"))
    counts += f"；6ND 口径的 MFU {d.pct(acc['mfu'])}"
rows.append(("标题：项目报出的 MFU " + course.claim("headline_understated") + "其实被低估了", counts,
             d.verdict(holds, why)))
d.claims(rows, sc)

# %% tags=["remove-input"]
lowest_quoted = min(COURSE_TABLE.values(), key=lambda q: course.number(q[2]))[2]

# %% [markdown]
# ## 9. 注意力 kernel 跑多快：单步耗时模型读的是一条曲线
#
# 前面几节数的是注意力的 FLOPs；单步耗时模型还要知道这些 FLOPs 跑多快。它不给注意力一个固定的效率，而是读已发表的 kernel 基准（FlashAttention-2/-3 论文里 TFLOP/s 随序列长度的曲线，`costmodel.inputs.attention_kernels`）：按 GPU 的代、`attention_kernel` 指的 kernel 家族、最接近的每头宽度、有没有 causal mask、前向还是反向，取一条曲线，在**每个 CP rank 看到的序列长度** seq_len / CP 处读数，再除以测量那张卡的稠密峰值，得到峰值的比例。短序列时一个 kernel 的工作量不足以填满 GPU，曲线低；序列变长，曲线升高并逐渐变平。这条曲线再乘以每一代 GPU 一个拟合的系数（`costmodel.inputs.fitted`），才是模型用的效率。

# %%
eff_table = efficiency.efficiencies(sc.values)
used = dict(zip(("forward", "backward"), compute_time.attention_efficiencies(sc, eff_table)))
kind = attention_kernels.KIND[sc.attention_kernel]
# the entries attention_efficiencies reads: eager's for both directions, else flash's two
entry_names = ({"forward": "attention_eager", "backward": "attention_eager"} if kind == "eager" else
               {"forward": "attention_flash_forward", "backward": "attention_flash_backward"})
entries = {way: eff_table[name] for way, name in entry_names.items()}
seq_rank = sc.seq_len / sc.context_parallel

# %% tags=["remove-input"]
generation = efficiency.generation(sc.gpu)
owner = generation if generation in attention_kernels.CURVES else attention_kernels.BORROWED.get(generation)
curved = {way: e for way, e in entries.items() if e.curve}
shown_ways = list(curved) if kind != "eager" else list(curved)[:1]  # eager: one entry for both
scale = next((e.scale for e in curved.values()), None)
spans = {way: (e.curve[0][0], e.curve[-1][0]) for way, e in curved.items()}
beyond = [way for way, (lo, hi) in spans.items() if not lo <= seq_rank <= hi]
beyond_spans = sorted({spans[way] for way in beyond})
measured_on = attention_kernels.MEASURED_ON.get(owner) if owner else None
att_overridden = sc.attention_efficiency is not None
curve_source = {way: e.stated_source.rsplit("; at ", 1)[0] for way, e in curved.items()}
published = {way: attention_kernels.interpolate(e.curve, seq_rank) for way, e in curved.items()}
flash_used = compute_time.attention_efficiencies(sc, eff_table, "flash")  # (forward, backward)
own_family = attention_kernels.family(sc.attention_kernel, generation) in attention_kernels.CURVES.get(owner, {})

# %% [markdown]
# **本场景的注意力效率（{{ sc.gpu }}，`attention_kernel: {{ sc.attention_kernel }}`，每个 CP rank {{ seq_rank|num }} 个 token）**
#
# | 方向 | 已发表曲线在此长度的读数（峰值的比例） | 拟合系数 | 模型用的效率 | 折合 TFLOP/s（{{ sc.gpu }} 稠密峰值 {{ sc.peak_flops|tflops }}） |
# |---|---|---|---|---|
# {% for way in ("forward", "backward") %}
# | {% if way == "forward" %}前向{% else %}反向{% endif %} | {% if entries[way].curve %}{{ published[way]|pct(1) }}{% else %}—（没有曲线）{% endif %} | {% if entries[way].scale is not none %}{{ entries[way].scale|decimals(4) }}{% else %}—{% endif %} | {{ used[way]|pct(1) }} | {{ (used[way] * sc.peak_flops / 1e12)|num(1) }} |
# {% endfor %}
#
# {% if att_overridden %}本场景用 `attention_efficiency` 直接给定了注意力效率 {{ sc.attention_efficiency|pct(1) }}（前向、反向和 eager 相同），单步耗时模型不读曲线，也不乘拟合系数。{% elif not curved %}{{ sc.gpu }} 所属的一代（{{ generation }}）没有记录已发表的注意力曲线，模型用一个固定的效率（前向 {{ used.forward|pct(1) }}、反向 {{ used.backward|pct(1) }}，来源：{{ entries.forward.source|code }}），不随序列长度变化。{% else %}{% if kind == "eager" %}本场景用 eager（不融合的）注意力：打分矩阵写回显存，前向与反向读同一条曲线（“标准注意力”那一条），在这个长度上是 flash kernel 前向效率（{{ flash_used[0]|pct(1) }}）的 {{ (used.forward / flash_used[0])|times(2) }}。{% else %}本场景用 flash 类 kernel，前向、反向各读一条曲线。{% if not own_family %}`{{ sc.attention_kernel }}` 指的 kernel 家族在这一代没有已发表的曲线，模型改用表里这一代 flash kernel 的曲线（见下面的来源原文）。{% endif %}{% endif %}{% if sc.context_parallel > 1 %}本场景 CP = {{ sc.context_parallel }}，每个 rank 的 kernel 只看到 {{ sc.seq_len|num }} ÷ {{ sc.context_parallel }} = {{ seq_rank|num }} 个 token 的查询块，所以读数取在这个长度上，而不是 seq_len 上。{% endif %}{% if beyond %}这个长度在已发表曲线的范围（{% for lo, hi in beyond_spans %}{{ lo|num }}–{{ hi|num }}{% if not loop.last %}、{% endif %}{% endfor %} token）之外，模型取曲线端点的值，不外推。{% endif %}{% if measured_on and measured_on != sc.gpu %}曲线是在 {{ measured_on }} 上测的{% if owner != generation %}（{{ generation }} 这一代没有自己的曲线，借用 {{ owner }} 的）{% endif %}，模型把它按“占峰值的比例”搬到本场景的 {{ sc.gpu }} 上：这是一个假设，不同的卡算力与带宽之比不同。{% endif %}{% if scale is not none %}拟合系数 {{ scale|decimals(4) }} 对这一代的前向、反向和 eager 曲线一视同仁，在每个长度上都乘同一个数：曲线的形状来自论文，只有高度是用已发表训练运行的单步耗时拟合出来的（与 GEMM 的拟合系数一起，`make calibrate`）。{% if scale < 1 %}系数小于 1：在拟合用的那些运行里，只按论文曲线算，注意力的时间偏短。{% else %}系数不小于 1：在拟合用的那些运行里，只按论文曲线算，注意力的时间偏长。{% endif %}这个系数吸收的是模型没有单独数、又和注意力时间一起变化的一切：论文基准测的是固定形状的单个 kernel，训练里却有变长文档、GQA 的布局、RoPE、随机丢弃之类模型没有计入的操作，以及其他部分的误差。所以它不是某个 kernel 的实测效率，而是让单步耗时模型在已发表运行上对得上的系数。{% else %}这一代没有拟合系数，模型直接用曲线的读数。{% endif %}{% endif %}
#
# {% if curved and not att_overridden %}下图中圆点是论文的数据点，点线是模型在点之间按长度的对数线性插值、在两端之外取端点值的曲线，实线是乘上拟合系数之后模型实际用的效率，星号是本场景的读数。{% for way in shown_ways %}{% if kind == "eager" %}前向与反向{% elif way == "forward" %}前向{% else %}反向{% endif %}用的曲线（来源原文）：{{ curve_source[way]|code }}。{% endfor %}{% endif %}

# %% tags=["remove-input"]
if curved and not att_overridden:
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, ax = plt.subplots()
    lo_x = min(256, seq_rank / 2, *(lo for lo, _ in spans.values()))
    hi_x = max(32768, 2 * seq_rank, *(hi for _, hi in spans.values()))
    grid = np.geomspace(lo_x, hi_x, 300)
    for j, way in enumerate(shown_ways):
        e = curved[way]
        name = "forward and backward" if kind == "eager" else way
        xs, ys = zip(*e.curve)
        ax.plot(xs, 100 * np.array(ys), "o", color=colors[j], ms=5,
                label=f"{name}: published points (% of {measured_on} peak)")
        ax.plot(grid, 100 * np.array([attention_kernels.interpolate(e.curve, x) for x in grid]), ":",
                color=colors[j], lw=1)
        ax.plot(grid, 100 * np.array([e.at(x) for x in grid]), "-", color=colors[j], lw=1.5,
                label=f"{name}: the model's efficiency" + (f" (x {e.scale:.4f}, fitted)" if e.scale else ""))
        ax.plot([seq_rank], [100 * used[way]], "*", color="black", ms=13, zorder=5,
                label="this scenario" if j == 0 else None)
    ax.axvline(seq_rank, color="grey", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 100)
    ax.set_xlabel("tokens per CP rank (seq_len / CP)")
    ax.set_ylabel("attention efficiency (% of the dense peak)")
    ax.set_title(f"Attention kernel efficiency vs length: {generation}, attention_kernel: {sc.attention_kernel}")
    ax.legend(fontsize=7, loc="upper left")
    plt.show()

# %% [markdown]
# 图注：横轴是每个 CP rank 上的 token 数（`seq_len / CP`，对数刻度），纵轴是注意力 kernel 的效率（稠密峰值的百分比）；星号是本场景。

# %% [markdown]
# ## 本节要点
#
# - 注意力核心每层前向是 4·s²·d，d 是注意力宽度（通常是头数 × 每头宽度），不一定等于 hidden size；模型 FLOPs 按 3 倍前向计。本场景按{{ words.convention(att.convention) }}数，d = {{ sc.attention_dim|num }}，有 {{ sc.num_full_attention_layers }} 个全注意力层。
# - 注意力占比：{% if is_course %}本场景（即课程的运行）{% else %}本场景{% endif %}按真实长度 {{ actual.share|pct }}、按补齐长度 {{ padded.share|pct }}；课程（它自己的运行，三组形状假设）：{{ course.claim("attention_share_range") }}。
# - 含注意力的利用率：{% if is_course %}本场景（即课程的运行）{% else %}本场景{% endif %}按真实长度是 {{ causal_mfu|pct(1) }}（causal）到 {{ full_mfu|pct(1) }}（full），6ND 口径的 MFU 是 {{ acc.mfu|pct }}，按{{ words.convention(att.hardware_convention) }}、含 recompute 的 HFU 是 {{ actual.hfu_with_attention|pct }}；课程（它自己的运行）的结论是 {{ course.claim("true_utilization") }}，而它自己表格的最低一行是 {{ lowest_quoted }}。
# {% if lin is not none and lin.flops_per_step is not none %}
# - 线性注意力（{{ lin.layers }} 层 gated DeltaNet）按真实长度占一步运算的 {{ lin.share|pct }}，softmax 注意力占 {{ actual.share|pct }}；它随 token 数线性增长，没有 s² 项。
# {% elif lin is not none %}
# - 本场景的 {{ lin.layers }} 层线性注意力因头宽度未知没有计入（见第 1 节库的说明）。
# {% endif %}
# - 注意力 kernel 的效率：{% if att_overridden %}本场景用 `attention_efficiency` 给定为 {{ sc.attention_efficiency|pct(1) }}，不读曲线。{% elif curved %}单步耗时模型在每个 CP rank 的长度 {{ seq_rank|num }} 处读已发表的 kernel 曲线{% if scale is not none %}，乘以拟合系数 {{ scale|decimals(4) }}{% endif %}，前向 {{ used.forward|pct(1) }}、反向 {{ used.backward|pct(1) }}（第 9 节）。{% else %}{{ generation }} 这一代没有已发表的曲线，用固定值：前向 {{ used.forward|pct(1) }}、反向 {{ used.backward|pct(1) }}（第 9 节）。{% endif %}
# - FlashAttention 的反向有 5 个矩阵乘（重算 QKᵀ），是前向的 {{ sp.sstr(kappa_flash) }} 倍；重算只进硬件 FLOPs，不进模型 FLOPs。
# - {{ model_name }} 的真实注意力宽度是 {{ shape.num_heads }} × {{ shape.head_dim }} = {{ shape.attention_dim|num }}，{% if shape.attention_dim != shape.hidden_size %}不是 hidden size {{ shape.hidden_size|num }}。{% else %}恰好等于 hidden size。{% endif %}
# - 各家数法（full / causal、3 倍 / 3.5 倍）的乘积最多相差 {{ spread|float|decimals(2) }} 倍；Megatron-LM 按 causal 数{% if sc.batching == "padded" %}，定长模式还把补齐的槽位算作运算{% else %}，packed 模式用真实长度{% endif %}。报数时必须写明数法。
# - {% if pad_l > mix_l %}课程的定长行把补齐后的注意力和真实 token 的 6ND 放在一起；若补齐真实发生，硬件做的运算对应 {{ ((pad_l + pad_a) / cluster)|pct(1) }} 的利用率{% if pad_l + pad_a > cluster %}（超过 100%，在本场景的输入下不可能）{% endif %}。{% else %}本场景没有 pad，定长行的三种读法相同；有 pad 时课程的定长行混用了两种口径。{% endif %}
# - 对账：{% if counter_rows %}计数器结果见第 7 节的 {{ counter_rows|length }} 行。{% else %}还没有计数器结果（先运行 `make validate`）。{% endif %}

# %% [markdown]
# ## 练习

# %% tags=["remove-input"]
x_at_S = float(share_fn(sc.seq_len, *here))
# exercise 1's length: 2S, or 4S where the share at 2S is a figure this page has shown (a packed
# run of two documents a row: its padded reading), which the prompt says
ex_k = 4 if d.pct(float(share_fn(2 * sc.seq_len, *here))) == d.pct(padded["share"]) else 2

# %% [markdown] tags=["exercise"]
# ### 练习 1：样本加长一倍，注意力占比变成多少？
#
# 沿用第 3 节曲线的设定：一步的 token 数不变，所有样本同一长度、没有补齐。记每个样本长 S 时注意力核心的占比为 x（下面给出本场景的 x）。现在把每个样本加长到 2S、样本数减半。先只用 x 写出新的占比，代入本场景的 x 算出一个数，再对照解答核对。{% if ex_k != 2 %}本场景 2S 的占比上面已经出现过（第 1 节按补齐长度读的 {{ padded.share|pct }}），所以代入数字时改算加长到 {{ ex_k }}S、样本数减为 1/{{ ex_k }} 的占比。{% endif %}

# %% [markdown]
# 本场景：S = {{ sc.seq_len|num }}，$x = \mathrm{share}(S)$ = {{ x_at_S|pct }}（方阵比例 a = {{ sp.sstr(attention.SQUARE_FRACTION[sc.attention_flops]) }}）。

# %% tags=["solution"]
x_at_kS = float(share_fn(ex_k * sc.seq_len, *here))  # the library's curve at kS
predicted = ex_k * x_at_S / (1 + (ex_k - 1) * x_at_S)
assert abs(x_at_kS - predicted) < 1e-9
d.eq(rf"\text{{share}}({ex_k}S)", rf"\frac{{{ex_k}x}}{{1+{ex_k - 1}x}}", d.pct(predicted),
     rf"\text{{share}}({ex_k}S)\big|_{{\mathrm{{curve}}}}", d.pct(x_at_kS))

# %% [markdown] tags=["solution"]
# softmax 注意力对每个 token 的代价正比于样本长度，6ND 和线性注意力对每个 token 的代价与长度无关。长度为 S 时注意力与其余运算之比是 x/(1−x)；长度加倍，这个比值也加倍，成为 2x/(1−x)，于是新的占比是 2x/(1+x)。{% if ex_k != 2 %}同理，长度变成 {{ ex_k }} 倍，比值变成 {{ ex_k }}x/(1−x)，占比是 {{ ex_k }}x/(1+{{ ex_k - 1 }}x)。{% endif %}x 很小时它接近 2x；x 越大，增长越慢，永远到不了 100%。

# %% [markdown] tags=["exercise"]
# ### 练习 2：causal 数法的读数，能不能只用 f 和 m 写出来？
#
# 课程的标题说项目报出的 MFU 被低估了；这句话能不能站住，取决于注意力按整块方阵还是按下三角来数。下面给出本场景按真实长度、full 数法的含注意力 MFU f，以及不含注意力核心的利用率 m（6ND 加线性注意力，再除以集群峰值；没有线性注意力层时就是 6ND 口径的 MFU）。第 5 节用 `attention_flops: causal` 重新解析场景，已经得到了 causal 数法下的含注意力 MFU（下面一并给出）。先不看解答：只用 f 和 m 写出这个读数的式子，说明为什么是它，并用下面的三个数验算；再对照解答核对。

# %% tags=["remove-input"]
m_without = acc["mfu"] + ((lin or {}).get("flops_per_step") or 0.0) / cluster

# %% [markdown]
# 本场景：f = {{ full_mfu|pct }}，m = {{ m_without|pct }}；第 5 节重新解析得到的 causal 读数是 {{ causal_mfu|pct }}。

# %% tags=["solution"]
predicted_causal = (full_mfu + m_without) / 2  # only the attention core halves
assert abs(predicted_causal - causal_mfu) <= 1e-9 * causal_mfu  # float rounding, at any scale
d.eq(r"\mathrm{MFU}^{\mathrm{causal}}_{\mathrm{with\ attn}}", r"\frac{f+m}{2}", d.pct(predicted_causal),
     r"\mathrm{MFU}^{\mathrm{causal}}\big|_{\mathrm{resolved}}", d.pct(causal_mfu))

# %% [markdown] tags=["solution"]
# causal 只把注意力核心减半，6ND 和线性注意力都不变，所以含注意力的 MFU 从 f 变成 m + (f − m)/2 = (f + m)/2：正好是 full 读数与不含注意力核心的利用率的中点。注意力占比越大，f 与 m 差得越远，两种数法给出的“真实利用率”也差得越多；报这个数时必须写明用的是哪一种。
