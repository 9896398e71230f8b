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
# # 09 常见坑：错的算法和对的算法各算一遍
#
# 前面几节把 MFU 的每个组成部分都推导过了。这一节反过来：把常见的算错方式逐条摆出来，每一条都按本场景把“错的”和“对的”各算一遍，再看错了多少。错误的大小取决于场景，所以同一个坑，在 MoE 长序列上可能是一个数量级，在稠密短序列上可能无关紧要。坑 1–7 是课程 06.9 列出的几条，坑 8、9 是本库补充的两个与峰值有关的错误。

# %% [markdown] tags=["lab-only"]
# **换成自己的场景**：下一个单元格是参数。本节最常改的键是 `recompute`（坑 2、7）、`mean_tokens_per_sample` 与 `batching`（坑 3–5：真实长度和是否定长补齐），以及 `communication_share`（坑 6：实测的暴露通信份额；不填时用按并行布局估出的上界）。`scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 只改单个键，例如 `{"step_time": 90}`。改完之后重启内核（Restart Kernel）并从头运行全部单元格（Run All）。
#
# 本页各个数的口径（N 怎么数、模型与硬件 FLOPs、注意力项）以及与 Megatron-LM、nanoGPT、torchtitan 等的差别，见 [docs/conventions.md](../docs/conventions.md)。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %% tags=["remove-input"]
import math

import sympy as sp

from costmodel import course
from costmodel.derive import attention, levers
from costmodel.derive import utilization as u
from costmodel.derive.recompute import factor as policy_factor
from costmodel.derive.symbols import B, D, F_lin, N, N_total, P, sum_sq
from costmodel.inputs import hardware
from costmodel.evaluate.account.claims import communication_share_now
from costmodel.present import answers_zh
from costmodel.present import display as d
from costmodel.present import words
from costmodel.present.claims import total_params_verdict

sc, acc = d.load(scenario_file, overrides)
team = bool(sc.changed)
subs = sc.substitutions()
pad = acc["padding"]
padded = pad["slots"] > sc.tokens_per_step  # pad slots exist (fixed-length padding)
f_now = acc["recompute_factor"]
f_none = float(policy_factor("none"))
f_full = policy_factor("full")
full_gap = float(f_full - 1)  # HFU / MFU - 1 under full recompute
att = acc["attention"]
quoted = course.figures()  # the course's figures, as it writes them

# %% [markdown]
# 场景：**{{ sc.name }}**（{{ sc.num_gpus }} × {{ sc.gpu }}，每步 {{ sc.step_time|num(1) }} 秒）。正确的 MFU（6ND 口径、激活参数、只数真实 token、稠密峰值）为 **{{ acc.mfu|pct }}**，下面每个坑都拿它作对照。

# %% [markdown]
# ## 坑 1：MoE 用总参数代替激活参数
#
# 6ND 里的 N 是每个 token 实际经过的矩阵乘参数。MoE 的配置文件和模型名里最醒目的却是总参数，把它代进去，MFU 就被放大了“总参数 / 激活参数”倍：

# %%
wrong = acc["mfu_if_total_params"]
right = acc["mfu"]
ratio_total = sp.simplify(u.mfu.subs(N, N_total) / u.mfu)
d.eq(r"\frac{\mathrm{MFU}(N_{\mathrm{total}})}{\mathrm{MFU}(N)}", ratio_total,
     d.num(wrong / right, 2))

# %% [markdown]
# {% if sc.num_experts > 0 and wrong > right %}
# 本场景是 MoE（{{ sc.num_experts }} 选 {{ sc.experts_per_token }}）：用总参数 {{ sc.total_params|sci }} 算出 MFU = **{{ wrong|pct }}**，正确值（激活参数 {{ sc.activated_params|sci }}）是 **{{ right|pct }}**，错的数是对的 {{ (wrong / right)|times(1) }}。错的数字{% if wrong >= 1 %}超过 100%，一眼就能看出不可能{% elif wrong >= 0.5 %}已经过半，看上去离硬件上限不远，很容易让人得出“没有优化空间”的结论{% else %}仍在 100% 以内、不会被任何检查拦下，却会让剩下的优化空间显得小得多{% endif %}。
# {% else %}
# 本场景是{% if sc.num_experts > 0 %}MoE{% else %}稠密模型{% endif %}，总参数 {{ sc.total_params|sci }}、激活参数 {{ sc.activated_params|sci }}：用总参数算出 {{ wrong|pct }}，正确值 {{ right|pct }}，{% if wrong > right %}只高估 {{ (wrong / right - 1)|pct }}。{% else %}两者相同。{% endif %}这个坑主要出在 MoE 上：专家越多、每个 token 选中的越少，总参数与激活参数之比越大，误差就是这个比值。
# {% endif %}

# %% [markdown]
# ## 坑 2：MFU 和 HFU 混用
#
# HFU 把重算也算作产出，比 MFU 多乘一个重算系数。两份报告只要一个报 MFU、一个报 HFU，差距就等于系数减一：

# %%
d.eq(r"\frac{\mathrm{HFU}}{\mathrm{MFU}}", sp.simplify(u.hfu / u.mfu), f"{f_now:.4f}")

# %% [markdown]
# {% if f_now > f_none %}
# 本场景 recompute = {{ sc.recompute|code }}，把 HFU **{{ acc.hfu|pct }}** 当成 MFU 报，比正确的 **{{ acc.mfu|pct }}** 高 {{ (f_now - 1)|pct }}{% if sc.recompute == "full" %}（全量重算，差距正是 {{ (f_full - 1)|string }}）{% else %}（全量重算时为 {{ full_gap|pct }}）{% endif %}。方向也可能反过来：关掉重算后（假设单步耗时与 6ND 口径的硬件 FLOPs 成正比，不计注意力核心），一步从 {{ sc.step_time|num(1) }} 秒缩到 {{ (sc.step_time / f_now)|num(1) }} 秒，新的 MFU 是 {{ (acc.mfu * f_now)|pct }}，恰好等于改动前的 HFU：用旧 HFU 对比新 MFU，会把一次真实的提速读成“没有变化”。
# {% else %}
# {% if sc.recompute == "none" %}本场景不重算{% else %}本场景的重算（{{ sc.recompute|code }}）不重做权重 GEMM{% endif %}，MFU 与 HFU 相等（{{ acc.mfu|pct }}），自己报数不会出这个错。但与一个全量重算的任务比较时，对方报的 HFU 比它的 MFU 高 {{ full_gap|pct }}，要先换算到同一口径。
# {% endif %}

# %% [markdown]
# ## 坑 3：拿自己的 MFU 和别的设定比
#
# 课程给过一张“典型 MFU”的参照表（06.7），最常被拿来比的是稠密模型、短序列、强卡那一行。直接拿它比是不公平的，原因之一是口径本身随序列长度变：6ND 不含注意力核心，而注意力核心在总运算里的占比随序列长度上升。同样的模型、同样的硬件实际吞吐，序列越长，报出的 6ND MFU 就越低。下面把本场景的模型放到参照的序列长度上，只改这一项。

# %% tags=["remove-input"]
reference = quoted["typical_mfu"]["rows"][0]
REFERENCE_SEQ_LEN = 4096  # the "4K" of that reference row
lin = acc["linear_attention"]
lin_per_token = (lin["flops_per_step"] or 0.0) / sc.tokens_per_step if lin else 0.0

# %% [markdown]
# 参照行：{{ reference.zh }}，6ND 口径的 MFU 典型为 {{ reference.range|join("–") }}（课程 06.7）；参照长度按 {{ REFERENCE_SEQ_LEN|num }} 个 token 计。

# %%
share_of_one = attention.share(attention.attention_actual)  # attention core / all FLOPs


def attention_share(seq_len):
    """Attention-core share of all FLOPs for one sequence of seq_len tokens."""
    one = {B: 1, D: seq_len, sum_sq: seq_len**2, F_lin: lin_per_token * seq_len}
    return float(share_of_one.subs({**subs, **one}))


hw_view = att["actual"]["mfu_with_attention"]  # the hardware's rate, attention counted
mfu_ref = hw_view * (1 - attention_share(REFERENCE_SEQ_LEN))  # same rate, 4K sequences

# %% tags=["remove-input"]
if sc.lengths is None:  # every sample at the mean length: the account's own reading
    assert math.isclose(attention_share(sc.mean_tokens_per_sample), att["actual"]["share"], rel_tol=1e-9)
ref_ratio = mfu_ref / acc["mfu"]
ref_gpu = hardware.GPUS["H100-SXM"]
same_balance = math.isclose(acc["machine_balance"], ref_gpu.balance, rel_tol=1e-2)

# %% [markdown]
# **同一模型、计入注意力后利用率同为 {{ hw_view|pct }} 时，6ND MFU 随序列长度的变化**
#
# | 序列长度 | 注意力核心占总 FLOPs | 同等硬件吞吐下的 6ND MFU |
# |---|---|---|
# | 本场景（真实长度，均长 {{ sc.mean_tokens_per_sample|count }}） | {{ att.actual.share|pct }} | {{ acc.mfu|pct }} |
# | 参照长度 {{ REFERENCE_SEQ_LEN|num }} | {{ attention_share(REFERENCE_SEQ_LEN)|pct }} | {{ mfu_ref|pct }} |
#
# 仅口径一项：同样的硬件吞吐，换到 {{ REFERENCE_SEQ_LEN|num }} 序列会报出 {{ mfu_ref|pct }}，{% if (ref_ratio - 1)|abs < 0.02 %}两者几乎相同（{{ ref_ratio|times }}），本场景的序列长度与参照相近{% else %}是本场景 {{ acc.mfu|pct }} 的 {{ ref_ratio|times }}{% endif %}。此外{% if sc.gpu == ref_gpu.name %}卡型与参照相同（都是 {{ ref_gpu.name }}）{% elif same_balance %}卡型不同（{{ sc.gpu }} 对 {{ ref_gpu.name }}），但机器平衡点相同（{{ ref_gpu.balance|decimals(0) }} FLOP/byte），卡上其余的差别（显存、互联）仍要核对{% else %}卡型也不同：{{ sc.gpu }} 对 {{ ref_gpu.name }}，机器平衡点 {{ acc.machine_balance|decimals(0) }} 对 {{ ref_gpu.balance|decimals(0) }} FLOP/byte{% endif %}；模型是否 MoE、micro batch 多大也都会改变 GEMM 的形状（见 06、07）。比较之前，模型形状、序列长度、卡型和口径都要对齐。

# %% [markdown]
# ## 坑 4：长序列下仍把 6ND 当作全部运算
#
# 这是上一个坑的另一面。短序列时注意力核心（QKᵀ 与 A·V）可以忽略，6ND 是好近似；长序列时它按 s² 增长，把 6ND 口径的 MFU 当作“硬件真实利用率”就会低估。下式把注意力核心加回分子，口径由场景的 `attention_flops` 决定（式中 $a$：课程默认 1，即整块 s×s、训练 3 倍前向；`causal` 时为 1/2，见 05）；混合模型的线性注意力项 $F_{lin}$ 也一并计入：

# %%
d.eq(r"\mathrm{MFU}_{+\mathrm{attn}}", attention.mfu_with_attention(attention.attention_actual))

# %% [markdown]
# **注意力核心的影响，按{{ words.convention(att.convention) }}**
#
# | 序列口径 | 长度 | 注意力占总 FLOPs | 6ND MFU | 计入注意力 |
# |---|---|---|---|---|
# | 按真实长度 | {{ att.actual.seq_len|count }} | {{ att.actual.share|pct }} | {{ acc.mfu|pct }} | {{ att.actual.mfu_with_attention|pct }} |
# | 按配置长度（定长 padding） | {{ att.padded.seq_len|count }} | {{ att.padded.share|pct }} | {{ acc.mfu|pct }} | {{ att.padded.mfu_with_attention|pct }} |
#
# 按真实长度，注意力核心占全部运算的 {{ att.actual.share|pct }}：只看 6ND 会把硬件实际完成的运算低估这么多，计入后利用率是 {{ att.actual.mfu_with_attention|pct }}（6ND 口径为 {{ acc.mfu|pct }}）。{% if padded and att.padded.share > att.actual.share %}若真在做定长补齐，pad 位置上的注意力也在算，占比升到 {{ att.padded.share|pct }}。{% endif %}这不只是报数问题：注意力占比越高，attention kernel 的效率对总时间的影响就越大。

# %% [markdown]
# ## 坑 5：只看 MFU，不看 padding
#
# MFU 的 D 只数真实 token。定长补齐时 GPU 还在 pad 槽位上做运算，这部分既不进 MFU 也不进 HFU，它是一个与 MFU 高低无关的独立问题，而且往往比提高 kernel 效率好修。反过来也有人把槽位数当成 D 来算，得到的 MFU 虚高了“槽位 / 真实 token”倍。

# %% tags=["remove-input"]
wrong_pad = acc["mfu"] * pad["packing_speedup"]  # the slots counted as D
pack = answers_zh.packing(acc)  # the one answer to what packing gives this run (04, 08, the report)

# %% [markdown]
# {% if padded %}
# 本场景每步 {{ pad.slots|num }} 个槽位、{{ sc.tokens_per_step|count }} 个真实 token。把槽位当 D 算出 MFU = {{ wrong_pad|pct }}，正确值 {{ acc.mfu|pct }}，虚高为 {{ pad.packing_speedup|times }}。若确实在补齐，{{ pad.waste_fraction|pct }} 的算力花在 pad 上；按单步耗时模型（与 04、08 和报告相同的答案），完美 packing 能把一步从 {{ sc.step_time|num(1) }} 秒缩到 {{ pack.step_time|num(1) }} 秒，MFU 升到 {{ pack.mfu|pct }}。先去日志里确认每步实际算了多少 token（见 04）。
# {% elif sc.batching == "packed" %}
# 本场景按 packing 组批（`batching = packed`），样本首尾相接，没有 pad 槽位，这个坑不存在。
# {% else %}
# 本场景的平均真实长度等于配置长度，定长补齐也不产生 pad 槽位，这个坑不存在。
# {% endif %}

# %% [markdown]
# ## 坑 6：先去优化通信
#
# “分布式训练的瓶颈是通信”是一个很强的直觉，但收益上限由通信占单步耗时的比例决定：通信即使完全被计算掩盖，单步耗时也最多缩短这个比例。本库按场景的并行布局逐个估算一步里的集合通信（每卡收发的字节 ÷ 链路带宽，见 08），得到的是**上界**：假设没有任何重叠、每次传输都跑满链路峰值。再按重叠规则（见 08）扣掉能藏在计算后面的部分，剩下暴露在外的，才是把通信优化到极致能省下的时间。能藏多少取决于那段计算有多长，这里用单步耗时模型预测的计算（见 08）。团队在场景里给了实测的 `communication_share` 时，用实测值。课程对它那次运行给的实测占比放在文末的对照表里。

# %% tags=["remove-input"]
comm = acc["communication"]
comm_share = comm["share_used"]
measured = comm["basis"] == "measured"
# an estimate longer than the measured step contradicts it: nothing here is derived from it
contradicted = comm["basis"] == "estimated" and comm["exceeds_step"]

# %% [markdown]
# {% set too_long %}按并行布局估出的通信要 {{ comm.seconds|num(1) }} 秒，比实测的一步（{{ sc.step_time|num(1) }} 秒）还长：估计与实测矛盾（多半是带宽、`gpus_per_node` 或并行布局与实际不符）{% endset %}
# {% if contradicted %}
# {{ too_long|safe }}，本页不用它，也不从它推出杠杆。核对这些键，或把实测值写进 `communication_share`。
# {% else %}
# 本场景一步里的通信占比：**{{ comm_share|pct }}**，{% if measured %}团队实测（场景的 `communication_share`）{% else %}按并行布局估计（每卡每步收发 {{ comm.bytes_per_gpu|gb }}，约 {{ comm.seconds|num(2) }} 秒；不计重叠的上界）{% endif %}。{% if comm.exceeds_step %}另外，{{ too_long|safe }}，以实测为准。{% endif %}
# {% endif %}

# %% [markdown] tags=["exercise"]
# ### 练习 1：优化一项，其余的份额就变大
#
# 上面给出了本场景通信占一步的比例 s。假设先把其余部分（计算）整体提速 g 倍，例如计算快一倍（g = 2），而通信时间一点不变。**先预测**：那时通信占一步的比例 s′ 是多少？再把通信全部藏起来，最多还能快多少倍？先写出只含 s 和 g 的式子，再代入本场景的 s 和 g = 2 算出数值，然后对照解答核对。

# %% tags=["solution"]
g_faster = 2
# this scenario's share; the course's where the estimate contradicts the step (see above)
s_now = course.number(quoted["communication_share_course"]["text"]) if contradicted else comm_share
s_comm, g = sp.symbols("s g", positive=True)
share_later = levers.share_after.subs({levers.share: s_comm, levers.G: g})  # derived in levers
later = float(share_later.subs({s_comm: s_now, g: g_faster}))
bound_later = levers.amdahl_limit.subs(levers.share, sp.Symbol("s'"))  # 1 / (1 - s')
limit_later = levers.amdahl_bound(later)  # infinite when s' = 1
d.eq(r"s'", share_later, d.pct(later))
d.eq(r"\text{speedup}_{\max}'", bound_later, d.times(limit_later, 4) if math.isfinite(limit_later) else r"\infty")

# %% [markdown] tags=["solution"]
# {% if contradicted %}本场景的估计与实测矛盾（见上），这里代入课程的 {{ s_now|pct(0) }}。{% endif %}{% if s_now == 0 %}s = 0：没有暴露在外的通信，计算再快，它的份额也还是 0，把通信藏起来没有可省的。每做完一项优化，仍要重新测一遍各部分的份额，再排下一个优先级。{% elif s_now >= 1 %}s = 1：按实测，一步全是暴露在外的通信，计算再快 s′ 也还是 1，公式给出的上限是无穷大。这只是式子的极限：GPU 就算跑在峰值也要一段时间算完这一步，所以库给“通信完全掩盖”这个杠杆时，把暴露的通信封顶在峰值算力留下的那部分（下表）。这样的实测值值得再核对一遍。{% else %}计算快 {{ g_faster }} 倍后，通信的份额从 {{ s_now|pct }} 升到 **{{ later|pct }}**，把它全部藏起来的上限也随之升到 {{ limit_later|times(4) }}。反过来读：先做的那项优化越大，原本不起眼的部分就越显眼。所以每做完一项都要重新测一遍份额，再排下一个优先级，而不是沿用优化前的排序。{% endif %}

# %% [markdown]
# 下表把库为本场景算出的各个杠杆按提速排在一起：每一项单独做、其余不变，把改动放进场景，用单步耗时模型重新预测一步（见 08）；改完显存放不下、层数切不开或并不更快的，记为不可行。“依据”一列是这个数依赖的场景键：其中有的是课程的假设值（例如 `attention_kernel_speedup`），换成实测值结论才算数。

# %% tags=["remove-input"]
LEVER_NAMES = {
    "packing": "完美 packing（若在定长补齐）",
    "recompute_off": "关闭重算",
    "selective_recompute": "改成选择性重算",
    "attention_kernel": "更快的注意力 kernel",
    "load_balance": "专家负载均衡",
    "communication_overlap": "打开通信重叠",
    "micro_batch": "micro batch 翻倍",
    "pipeline_bubble": "缩小流水线气泡",
}
overlap = next(a for a in acc["advice"] if a["lever"] == "communication_overlap")
# each lever's gain on this run's step (the report's and every page's figure for it)
levers_shown = [a for a in acc["advice"] if a["gain"] > 1.0005 or a["lever"] == "communication_overlap"]
best = max((a for a in levers_shown if a["lever"] != "communication_overlap" and a["feasible"]),
           key=lambda a: a["gain"], default=None)
best_name = LEVER_NAMES.get(best["lever"], best["lever"]) if best is not None else None
comm_first = overlap["gain"] > 1.0005 and (best is None or overlap["gain"] >= best["gain"])

# %% [markdown]
# **本场景各个杠杆的收益（单步耗时模型重新预测）**
#
# | 手段 | 提速（本次运行的一步） | 一步缩短 | 可行 | 依据（场景键） |
# |---|---|---|---|---|
# {% for a in levers_shown %}
# | {{ LEVER_NAMES.get(a.lever, a.lever) }} | {{ a.gain|times(3) }} | {{ (1 - 1 / a.gain)|pct }} | {% if a.feasible %}可行{% else %}不可行{% endif %} | {% for key in a.rests_on %}{{ key|code }}{% if not loop.last %}、{% endif %}{% endfor %} |
# {% endfor %}
#
# {% set basis_word %}{% if measured %}实测{% else %}估计{% endif %}{% endset %}
# {% if contradicted %}
# 通信这一行记为 1×：按布局估出的通信比实测的一步还长，与实测矛盾，不从它推出杠杆。{% if best is not none %}其余可行的杠杆里最大的是“{{ best_name }}”（{{ best.speedup|times }}）。{% else %}表里其他杠杆也都没有可行的收益。{% endif %}通信到底占多少，要先实测，写进 `communication_share` 再排：先量再改。
# {% elif best is none and not comm_first %}
# 按{{ basis_word|safe }}的通信，把通信重叠做到模型知道的极致也只有 {{ overlap.speedup|times(3) }}；表里其他杠杆也都没有可行的收益，下一步该量的是 kernel 效率：先量再改。
# {% elif not comm_first %}
# 按{{ basis_word|safe }}的通信，把通信重叠做到模型知道的极致也只有 {{ overlap.speedup|times(3) }}；本场景里“{{ best_name }}”一项就有 {{ best.speedup|times }}。原则是先量再改：先确认瓶颈在哪，再排优先级。
# {% else %}
# 在本场景里，打开通信重叠（{{ overlap.speedup|times(3) }}）是表中最大的可行一项，按这个数，直觉在这里可能是对的。{% if not measured %}但它来自估计：通信按链路跑满、没有延迟来算，偏乐观，真实能省的未必这么多。先实测暴露的部分，把它写进 `communication_share`，再排优先级。{% else %}它来自团队的实测值，可以放心排在前面。{% endif %}
# {% endif %}

# %% [markdown]
# ## 坑 7：忘了 recompute 是自愿的
#
# 重算是用算力换显存。一旦显存腾出来（例如 fused / chunked 交叉熵省掉 logits 的大张量，见 08），首先该考虑的就是减少或关掉重算，而不是把它当成固定成本。

# %% tags=["remove-input"]
step = sc.step_time
sel = acc["projections"]["selective_recompute"]
off = acc["projections"]["recompute_off"]
off_lever = next(a for a in acc["advice"] if a["lever"] == "recompute_off")  # the model's, memory checked
sel_lever = next(a for a in acc["advice"] if a["lever"] == "selective_recompute")

# %% [markdown]
# {% if off.speedup > 1 %}
# 本场景 recompute = {{ sc.recompute|code }}，系数 {{ f_now|decimals(4) }}。按单步耗时模型（与 08 和报告相同的答案），关掉重算：{{ step|num(1) }} 秒 → {{ off_lever.step_time|num(1) }} 秒（{{ off_lever.gain|times }}）{% if sel.speedup > 1 %}；改成选择性重算（重算 {{ sel.modules|join("、") }}，权重 GEMM 的 r = {{ sel.weights_fraction|sig(4) }}）：{{ step|num(1) }} 秒 → {{ sel_lever.step_time|num(1) }} 秒（{{ sel_lever.gain|times }}）{% endif %}。只按硬件 FLOPs（含注意力核心）的比例缩短会是 {{ off.speedup|times }}{% if sel.speedup > 1 %} 和 {{ sel.speedup|times }}{% endif %}：那只是运算量之比，一步里不随重算变的部分（通信、逐元素运算、模型没有解释的时间）它也按比例缩短了{% if off_lever.fits is not none and off_lever.peak_after is not none %}。按显存模型，关掉重算后负载最重的卡要 {{ off_lever.peak_after|gb }}{% if off_lever.fits %}，放得下{% else %}，放不下：先腾出显存，这个杠杆才拿得到{% endif %}{% endif %}。每个 micro batch 的 logits（BF16）占 {{ acc.logits_bytes|gb }}，分块计算交叉熵能把它切小，是腾显存的一个候选（见 08）。
# {% else %}
# 本场景已经不做重算，这一项没有可挖的空间。
# {% endif %}

# %% [markdown]
# ## 坑 8：用了稀疏峰值
#
# 下面两个坑课程没有列出，是本库补充的。不少规格表把“带结构化稀疏”的峰值放在最显眼的位置，它是稠密峰值的 2 倍。训练里的矩阵乘是稠密的，MFU 的分母必须用稠密 BF16 峰值；用稀疏峰值，MFU 直接被砍掉一半。

# %%
sparse_ratio = sp.simplify(u.mfu.subs(P, 2 * P) / u.mfu)
d.eq(r"\frac{\mathrm{MFU}(P_{\mathrm{sparse}} = 2P)}{\mathrm{MFU}(P)}", sparse_ratio)
wrong_sparse = acc["mfu"] * float(sparse_ratio)

# %% tags=["remove-input"]
card = hardware.GPUS.get(sc.gpu)
# Which of the card's figures the scenario's peak is, and the FP8 one an FP8 run sees on the sheet.
peak_is_fp8 = card is not None and card.fp8_flops is not None and sc.peak_flops == card.fp8_flops
fp8_peak = card.fp8_flops if card is not None and sc.fp8 == "hybrid" else None

# %% [markdown]
# {% if peak_is_fp8 %}本场景写的峰值 {{ sc.peak_flops|tflops }} 是 {{ sc.gpu }} 的稠密 FP8 峰值（稠密 BF16 是 {{ card.bf16_flops|tflops }}），它的稀疏口径写成 {{ (2 * sc.peak_flops)|tflops }}{% else %}{{ sc.gpu }} 的稠密 BF16 峰值是 {{ sc.peak_flops|tflops }}，稀疏口径写成 {{ (2 * sc.peak_flops)|tflops }}{% endif %}。用后者算出 MFU = {{ wrong_sparse|pct }}，正确值 {{ acc.mfu|pct }}。{% if fp8_peak and not peak_is_fp8 %}本场景用 FP8（`fp8: hybrid`）：规格表上的 {{ fp8_peak|tflops }} 是 {{ sc.gpu }} 的稠密 FP8 峰值，不是稀疏口径，只是数值与 BF16 的稀疏口径相近；看清表里那一行标的是精度还是稀疏。FP8 的 GEMM 可以快过 BF16 峰值，但本页的 MFU 按稠密 BF16 峰值计，与课程的口径一致。{% endif %}

# %% [markdown]
# ## 坑 9：代码里写死了别的卡的峰值
#
# 一些公开的 MFU 估算代码把 A100 的 BF16 峰值写成常量（例如 nanoGPT 的 `estimate_mfu`）。换了卡却没改这个常量，误差就是两张卡峰值之比：在更快的卡上 MFU 虚高，甚至超过 100%；在更慢的卡上则被低估。

# %%
wrong_gpu = hardware.GPUS["A100-80GB"]
if math.isclose(wrong_gpu.bf16_flops, sc.peak_flops):
    wrong_gpu = hardware.GPUS["H100-SXM"]  # the scenario already runs at A100's peak
P_wrong = sp.Symbol(r"P_{\mathrm{hardcoded}}", positive=True)
d.eq(r"\frac{\mathrm{MFU}(P_{\mathrm{hardcoded}})}{\mathrm{MFU}(P)}",
     sp.simplify(u.mfu.subs(P, P_wrong) / u.mfu))
wrong_peak = acc["mfu"] * sc.peak_flops / wrong_gpu.bf16_flops

# %% [markdown]
# 本场景的卡是 {{ sc.gpu }}（{{ sc.peak_flops|tflops }}）。若代码里写死的是 {{ wrong_gpu.name }} 的 {{ wrong_gpu.bf16_flops|tflops }}，算出 MFU = {{ wrong_peak|pct }}，正确值 {{ acc.mfu|pct }}，{% if wrong_peak > acc.mfu %}高估{% else %}低估{% endif %}为 {{ (wrong_peak / acc.mfu)|times }}{% if wrong_peak > 1 %}，超过 100%，一眼可见是错的{% endif %}。峰值要按实际的卡取，并且取稠密 BF16 那一列。

# %% [markdown]
# ## 汇总
#
# 上面的坑分两类，分成两张表。第一类是**同一次运行换了错的口径**：N、D、分母或指标名用错，报出的数和正确的 MFU 不同。这一类的正确值每一行都一样，就是按正确口径算出的 MFU；“错 / 对”大于 1 是高估，小于 1 是低估。

# %% tags=["remove-input"]
# (pitfall, plot label, utilization): this run's MFU under a wrong convention
misreadings = [("N 用总参数", "N = total params", wrong), ("HFU 当 MFU 报", "HFU reported as MFU", acc["hfu"])]
if padded:
    misreadings.append(("D 按槽位数（含 pad）算", "D = padded slots", wrong_pad))
misreadings += [("分母用稀疏峰值", "sparse peak (2x dense)", wrong_sparse),
                (f"写死 {wrong_gpu.name} 的峰值", f"{wrong_gpu.name} peak hard-coded", wrong_peak)]

# %% [markdown]
# **同一次运行按不同口径报出的利用率（正确口径：6ND、N 取激活参数、D 只数真实 token、分母用稠密峰值）**
#
# | 坑 | 按错的口径算出 | 正确口径的 MFU | 错 / 对 |
# |---|---|---|---|
# {% for name, label, w in misreadings %}
# | {{ name }} | {{ w|pct }} | {{ acc.mfu|pct }} | {{ (w / acc.mfu)|times }} |
# {% endfor %}

# %% [markdown]
# 第二类是 **MFU 本身算对了，但单看它会误判**：它需要配上另一个数一起读。下表每一行的第三列是各自不同的量，最后一列写明它是什么；它不是“正确的 MFU”，而是和 MFU 一起报告的补充。
#
# **MFU 之外要一起报告的数（本场景）**
#
# | 坑 | 6ND MFU（口径正确） | 要一起看的数 | 这个数是什么 |
# |---|---|---|---|
# | 与 {{ REFERENCE_SEQ_LEN|num }} 序列的参照直接比 | {{ acc.mfu|pct }} | {{ mfu_ref|pct }} | 同样硬件吞吐、序列换成 {{ REFERENCE_SEQ_LEN|num }} 时报出的 6ND MFU（反事实：只改序列长度） |
# | 只数 6ND，不数注意力核心 | {{ acc.mfu|pct }} | {{ att.actual.mfu_with_attention|pct }} | 计入注意力核心后的利用率（按真实长度，按{{ words.convention(att.convention) }}数）：硬件实际完成的模型运算 |
# {% if padded %}
# | 只看 MFU，不看 padding | {{ acc.mfu|pct }} | {% if pack %}{{ pack.mfu|pct }}{% else %}{{ acc.mfu|pct }}{% endif %} | 完美 packing 后的 6ND MFU（单步耗时模型；若真在定长补齐；pad 占槽位 {{ pad.waste_fraction|pct }}） |
# {% endif %}

# %% tags=["remove-input"]
import matplotlib.pyplot as plt

d.setup_plots()
names = [label for _, label, _ in misreadings]
values = [100 * w for _, _, w in misreadings]
fig, ax = plt.subplots()
ax.barh(names, values, color="#dd6b20", label="MFU under the wrong convention")
ax.axvline(100 * acc["mfu"], color="#2b6cb0", linewidth=2, label="correct MFU")
for y, value in enumerate(values):
    ax.annotate(f"{value:.1f}%", (value, y), textcoords="offset points", xytext=(4, -3), fontsize=9)
ax.set_xlim(0, max(values + [100 * acc["mfu"]]) * 1.18)
ax.invert_yaxis()
ax.set_xlabel("utilization reported (%)")
ax.set_title("The same run under each wrong convention vs the correct MFU")
ax.legend(loc="lower right")
plt.show()

# %% [markdown]
# 图注：横轴是报出的利用率（%），纵轴是各种错误的口径（每行一个坑）。

# %% [markdown]
# ## 课程怎么说，本页算出多少
#
# 课程 06.9 列出的常见坑，逐条放在本场景的计算结果旁边。课程的数字说的是它自己那次运行；换成你的场景时，中间一列是你的数字。

# %% tags=["remove-input"]
def same_as_course(key, value):
    """The course's figure and this value agree at the precision the course writes it."""
    text = quoted[key]["text"]
    digits = len(text.rstrip("%").partition(".")[2])
    return d.pct(value, digits) == d.pct(course.number(text), digits)


ok = same_as_course("total_params_mistake", wrong)
total_verdict = total_params_verdict(sc, acc) if team else ""  # 02's and 03's wording
gap = f_now - 1
# The claim is about full recompute, whichever run reads it: 4/3 - 1 for any model.
ok_gap = same_as_course("nb09_mfu_hfu_gap", gap if sc.recompute == "full" else full_gap)
share_a, share_p = att["actual"]["share"], att["padded"]["share"]
major = share_a > 0.5
# the claim is that the two are separate problems: true of any run with pad slots (the course's
# 5.85% and 41% are its run's figures, judged in 01 and 04)
ok_pad = True if padded else None
levers_ranked = [a["lever"] for a in acc["advice"]]
pack_rank = levers_ranked.index("packing") + 1 if "packing" in levers_ranked else None
now_comm = communication_share_now(acc)  # the share 08 and 10 judge the course's "under 3%" on
ok_comm = None if contradicted else now_comm["share"] <= course.number(quoted["communication_share_course"]["text"])

# %% [markdown]
# {% macro word(holds) %}{% if holds is none %}无从判断{% elif holds %}成立{% else %}有出入{% endif %}{% endmacro %}
# {% set ours %}{% if team %}课程的数说的是课程那次运行；你的运行：{% else %}按同一算法由场景现算：{% endif %}{% endset %}
# {% set whose %}{% if team %}你的{% else %}本场景的{% endif %}{% endset %}
# **课程怎么说 / 本页算出 / 出入**{% if team %}（本页按你的场景计算：中间一列是你的数字，与课程的说法对照）{% endif %}
#
# | 课程怎么说 | 本页算出 | 出入 |
# |---|---|---|
# | MoE 误把总参数 35B 代进 6ND，MFU 会被算成 {{ course.claim("total_params_mistake") }}，让人以为没有优化空间 | {{ wrong|pct }}（N = total_params = {{ sc.total_params|sci }}） | {% if team %}{{ total_verdict|safe }}{% else %}{{ word(ok) }}：{{ ours|safe }}误用总参数得 {{ wrong|pct }}{% if wrong > acc.mfu %}（正确值 {{ acc.mfu|pct }} 的 {{ (wrong / acc.mfu)|times(1) }}）{% endif %}{% if ok %}，与课程一致{% else %}，与课程的数不同{% endif %}{% if 0.5 <= wrong < 1 %}；这个错数已过半，确实容易让人以为接近上限{% elif wrong >= 1 %}；它超过 100%，一眼可见是错的{% elif wrong > acc.mfu %}；它不到一半，不至于让人以为接近上限，但仍把效率高估了{% else %}；总参数等于 N，这个错在这里不改变结果{% endif %}{% endif %} |
# | 混用 MFU 和 HFU：全量重算下两者差 {{ course.claim("nb09_mfu_hfu_gap") }}，足以让对比得出反向结论 | HFU / MFU − 1 = {{ gap|pct }}（recompute = {{ sc.recompute }}） | {{ word(ok_gap) }}：{% if sc.recompute == "full" %}{% if team %}你的运行也是全量重算：{% endif %}全量重算系数 4/3（坑 2 的 SymPy 式在 r = 1 时），HFU 比 MFU 高 1/3{% else %}{{ quoted.nb09_mfu_hfu_gap.text }} 指全量重算，任何模型全量重算时都是 {{ full_gap|pct }}；{{ whose|safe }}运行 recompute = {{ sc.recompute }}，{% if gap > 0 %}HFU 比 MFU 高 {{ gap|pct }}{% else %}HFU 等于 MFU，混用两者在这里不出差别{% endif %}{% endif %} |
# | 拿自己的 MFU 和别人的比，{{ course.claim("nb09_compare_aligned") }}都要对齐 | 4K 参照长度下 {{ mfu_ref|pct }}（本场景 {{ acc.mfu|pct }}） | 成立：{% if (ref_ratio - 1)|abs >= 0.02 %}只把序列长度换成 {{ REFERENCE_SEQ_LEN|num }}，同样的硬件吞吐报出的 6ND MFU 就变成原来的 {{ ref_ratio|times }}{% else %}{{ whose|safe }}序列长度与参照相近，这一项几乎没有差别{% endif %}{% if sc.gpu == ref_gpu.name %}；卡型与参照相同{% elif same_balance %}；卡型不同（{{ sc.gpu }} 对 {{ ref_gpu.name }}），机器平衡点相同{% else %}；卡型不同，机器平衡点 {{ acc.machine_balance|decimals(0) }} 对 {{ ref_gpu.balance|decimals(0) }} FLOP/byte{% endif %}；四项对齐才能比 |
# | 序列长到 {{ course.claim("nb09_six_nd_fails_long") }}时注意力占大头，6ND 不再是好近似 | 注意力占 {{ share_a|pct }}（真实长度）/ {{ share_p|pct }}（配置长度） | {{ word(major) }}：{% if team %}课程说的是 {{ quoted.nb09_six_nd_fails_long.text }} 序列的运行；{% endif %}按真实长度（均长 {{ sc.mean_tokens_per_sample|count }}）注意力核心占 {{ share_a|pct }}，{% if major %}过半，6ND 漏掉的比它数到的还多{% else %}不到一半，谈不上“大头”{% if padded %}，按配置长度定长补齐算（pad 上也在算）是 {{ share_p|pct }}{% if share_p > 0.5 %}，才过半{% endif %}{% endif %}{% if share_a >= 0.25 %}；但 6ND 少数了 {{ share_a|pct }} 的运算，超过四分之一，“不再是好近似”这一点成立{% elif share_a >= 0.05 %}；6ND 少数了 {{ share_a|pct }} 的运算，是否还算好近似要看用途，报数时应一并说明{% else %}；6ND 只少数了 {{ share_a|pct }}，在这里仍是好近似{% endif %}{% endif %} |
# | MFU 低，与“槽位里 {{ course.claim("nb09_padding_independent") }}是 pad”是两个独立的问题，后者更好修 | MFU {{ acc.mfu|pct }}；pad {{ pad.waste_fraction|pct }} | {{ word(ok_pad) }}：{% if padded %}MFU 的分子只数真实 token，pad 只让 T 变长，两者互不包含；{{ ours|safe }}pad 占槽位 {{ pad.waste_fraction|pct }}，完美 packing {{ pack.gain|times }}（单步耗时模型；槽位之比 {{ pad.packing_speedup|times }}）{% if pack_rank %}，在坑 6 的杠杆表里排第 {{ pack_rank }}{% endif %}{% else %}{% if team %}课程的 {{ quoted.nb09_padding_independent.text }} 说的是课程那次运行；{% endif %}你的运行没有 pad 槽位，这一项为零{% endif %} |
# | 先优化通信是误区：实测通信只占 {{ course.claim("communication_share_course") }}，永远先量 | {% if contradicted %}估计比一步还长，不用{% else %}{{ now_comm.share|pct }}（{% if measured %}实测{% else %}估计：重叠后暴露在外的部分{% endif %}）{% endif %} | {{ word(ok_comm) }}：{% if team %}课程的 {{ quoted.communication_share_course.text }} 说的是课程那次运行；{% endif %}{% if contradicted %}按并行布局估出的通信要 {{ comm.seconds|num(1) }} 秒，比实测的一步（{{ sc.step_time|num(1) }} 秒）还长：估计与实测矛盾（多半是带宽、`gpus_per_node` 或并行布局与实际不符），从它判断不了{% else %}{% if measured %}团队实测{% else %}按重叠规则估计（不计重叠的上界是 {{ comm_share|pct }}）{% endif %}没被计算掩盖的通信占 {{ now_comm.share|pct }}，{% if ok_comm %}不超过 {{ quoted.communication_share_course.text }}；把模型知道的重叠都打开，预测的一步快 {{ overlap.speedup|times(3) }}{% else %}超过 {{ quoted.communication_share_course.text }}；把模型知道的重叠都打开，预测的一步快 {{ overlap.speedup|times(3) }}，在这次运行里通信值得先实测{% endif %}{% endif %}。“先量再改”在任何情况下都成立 |
# | 忘了 {{ course.claim("nb09_recompute_voluntary") }}：显存腾出来后，第一个该考虑关掉它 | recompute = {{ sc.recompute }}，系数 {{ f_now|decimals(4) }} | {{ word(none if sc.recompute == "none" else off_lever.gain > 1) }}：{% if off_lever.gain > 1 %}{{ ours|safe }}关掉重算按单步耗时模型可把一步从 {{ step|num(1) }} 秒缩到 {{ off_lever.step_time|num(1) }} 秒（{{ off_lever.gain|times }}；按硬件 FLOPs 等比是 {{ off.speedup|times }}，那只是运算量之比）{% if not off_lever.fits %}，但按显存模型现在关掉放不下（要 {{ off_lever.peak_after|gb }}），所以要先腾出显存{% endif %}；重算只是拿算力换显存，省下的就是重做的那部分前向{% elif sc.recompute == "none" %}{{ whose|safe }}运行已经不做重算（recompute = none），这条建议没有可关的对象{% else %}{{ whose|safe }}运行关掉重算按模型并不更快{% endif %} |

# %% tags=["remove-input"]
ranked = sorted(misreadings, key=lambda item: abs(math.log(item[2] / acc["mfu"])), reverse=True)

# %% [markdown]
# ## 本节要点
#
# - 同一次运行换错口径时偏差最大的三个坑：{% for name, label, w in ranked[:3] %}{{ name }}（错 / 对 = {{ (w / acc.mfu)|times }}）{% if not loop.last %}；{% endif %}{% endfor %}。
# - 正确口径：N 取激活参数、D 只数真实 token、分母用 {{ sc.gpu }} 的稠密峰值 {{ sc.peak_flops|tflops }}，得到 MFU {{ acc.mfu|pct }}；{% if f_now > f_none %}HFU {{ acc.hfu|pct }} 要单独标明。{% else %}本场景不重算，HFU 与它相等。{% endif %}
# - 6ND 不含注意力核心：按真实长度它占全部运算的 {{ att.actual.share|pct }}，计入后利用率为 {{ att.actual.mfu_with_attention|pct }}，两个数应一起报。
# - {% if contradicted %}按布局估出的通信比实测的一步还长，与实测矛盾，通信占多少要先实测；{% else %}通信占一步的 {{ comm_share|pct }}（{% if measured %}实测{% else %}估计上界{% endif %}），把模型知道的重叠都打开，预测的一步快 {{ overlap.speedup|times(3) }}；{% endif %}{% if comm_first %}在本场景里它是最大的杠杆，先实测暴露在外的部分。{% elif best is not none %}本场景最大的杠杆是“{{ best_name }}”，先量、先修它。{% else %}先量 kernel 效率，再决定改什么。{% endif %}

# %% [markdown] tags=["exercise"]
# ### 练习 2：两个错误同时犯
#
# 有人把 MoE 的总参数代进了 N，分母又用了规格表上的稀疏峰值。**先预测**：他报出的 MFU 是正确值的几倍？先用坑 1 和坑 8 的两个比值写出结果，再代入本场景的数算出百分比，想一想这个数看上去是否可信、能不能靠它本身发现错误。然后对照解答核对。

# %% tags=["solution"]
both = sp.simplify(u.mfu.subs({N: N_total, P: 2 * P}) / u.mfu)
wrong_both = acc["mfu"] * float(both.subs(subs))
d.eq(r"\frac{\mathrm{MFU}(N_{\mathrm{total}},\ 2P)}{\mathrm{MFU}(N,\ P)}", both,
     d.num(float(both.subs(subs)), 3))
k = sc.total_params / sc.activated_params  # what the total parameters multiply the MFU by

# %% [markdown] tags=["solution"]
# 两个错误相乘：{% if k > 1 %}总参数把 MFU 放大 {{ k|num(2) }} 倍{% else %}总参数等于 N，这一处不起作用{% endif %}，稀疏峰值再砍掉一半，报出 **{{ wrong_both|pct }}**，正确值是 {{ acc.mfu|pct }}。{% if wrong_both >= 1 %}两处错误抵消了一部分，结果仍超过 100%，这次一眼可见是错的。{% elif k > 2 %}两处错误抵消了一部分，结果仍偏高，却不像单犯坑 1 时那样离谱，更难被一眼看出。{% elif k == 2 %}两处错误恰好抵消，报出的数与正确值相同，错误完全看不出来。{% elif k > 1 %}总参数带来的放大不到 2 倍，稀疏峰值占了上风，报出的数反而偏低。{% else %}只剩稀疏峰值这一处错误，报出的数是正确值的一半。{% endif %}所以不能靠数字“看上去合理”来判断口径是否正确：要逐项核对 N、D、峰值，并用吞吐（tok/s）换一条路验算（见 03）。
