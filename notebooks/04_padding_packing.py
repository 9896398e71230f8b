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
# # 04 Padding 与 packing
#
# 6ND 里的 D 数的是真实 token。可如果每个样本都被补齐到配置的序列长度，线性层照样要在补齐的 pad 位置上做完整的矩阵乘：硬件忙了，账上却一个 FLOP 都不记。本节先按均值把这笔浪费算出来，再走出课程一步：样本长度其实是一个分布，装箱、注意力的平方项和 packing 的正确性都取决于它。

# %% [markdown] tags=["lab-only"]
# **换成自己的场景。** 本节最常改的键：`mean_tokens_per_sample`（平均每个样本的真实 token 数）、`seq_len`（补齐长度，或打包时的行长）、`batching`（`padded` 定长补齐，或 `packed` 已经打包）、`sequence_lengths`（团队的样本长度文件，给了它就不再用合成分布）。下面参数格里的 `scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 只改单个键，例如 `{"step_time": 90}`。改完之后重启内核并全部运行（Kernel → Restart Kernel and Run All Cells）。
#
# 本页各个数的口径（N 怎么数、模型与硬件 FLOPs、注意力项）以及与 Megatron-LM、nanoGPT、torchtitan 等的差别，见 [docs/conventions.md](../docs/conventions.md)。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"mean_tokens_per_sample": 20000}

# %% tags=["remove-input"]
from functools import partial

import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

from costmodel import course
from costmodel.derive import attention, padding
from costmodel.derive.attention import attention_training_flops, sum_of_squares_flops
from costmodel.derive.symbols import D, s_mean
from costmodel.evaluate.account import packing
from costmodel.present import answers_zh
from costmodel.present import display as d
from costmodel.present import words

sc, acc = d.load(scenario_file, overrides)
pad = acc["padding"]
packed = pad["batching"] == "packed"  # the run already packs: no padding slots
padded = pad["slots"] > sc.tokens_per_step  # some slots hold padding
# Scaling the step time by the slots would push MFU past 100%: the inputs contradict the premise
# that every slot costs as much as a real token (the run cannot be padding them all).
beyond_peak = padded and pad["mfu_after_packing"] > 1
# the one answer to "what would packing give this run": the step-time model's lever, as the
# report ranks it (the slot ratio is the course's arithmetic, quoted beside it)
pack = answers_zh.packing(acc)
pack_why = answers_zh.packing_why(acc) if pack else ""
team = sc.lengths  # the team's lengths file (sequence_lengths), or None
conv = attention.convention_of(sc.attention_flops, "eager")  # the account's model count
quoted = course.figures()

# %% [markdown]
# 场景：**{{ sc.name }}**：每步 {{ sc.samples_per_step|num }} 个样本，平均每个样本 {{ sc.mean_tokens_per_sample|count }} 个真实 token{% if team is not none %}（截断到序列长度后的均值，来自团队的长度文件 `sequence_lengths`）{% endif %}，配置的序列长度（{% if packed %}打包的行长，也是单个样本的截断长度{% else %}补齐长度{% endif %}）为 {{ sc.seq_len|num }}。{% if packed %}批处理方式是 `batching: packed`：样本已经首尾相接地装在一起。{% endif %}下面的数字都按这个场景现算。

# %% [markdown]
# ## 1. 按均值算的账
#
# 定长 padding 时，一步里有 $B$ 个样本，每个占 $S$ 个位置（槽位），一共 $B \cdot S$ 个槽位；其中真实 token 只有 $D = B \cdot \bar{s}$ 个。只要线性层的耗时与槽位数成正比（pad 位置也参与矩阵乘），有效占比、浪费和完美 packing 的提速就都只取决于 $\bar{s}$ 与 $S$ 之比，$B$ 会约掉：

# %%
if packed:  # batching: packed: the slots are the real tokens, nothing to pad
    d.eq(r"\text{slots}", padding.SLOTS["packed"], d.tex_num(pad["slots"]))
    d.eq(r"\text{useful}", r"\frac{D}{D}", d.pct(pad["useful_fraction"]))
else:
    in_batch = {D: padding.tokens_in_batch}  # D = B * s_mean
    d.eq(r"\text{useful}", padding.useful_fraction, padding.useful_fraction.subs(in_batch),
         d.pct(pad["useful_fraction"]))
    d.eq(r"\text{waste}", padding.waste_fraction.subs(in_batch), d.pct(pad["waste_fraction"]))
    d.eq(r"\text{speedup}", padding.packing_speedup, padding.packing_speedup.subs(in_batch),
         d.times(pad["packing_speedup"]))

# %% [markdown]
# {% if packed %}
# **packing 后的槽位账**
#
# | 量 | 值 |
# |---|---|
# | batching | {{ pad.batching }} |
# | 每步槽位（= D） | {{ pad.slots|num }} |
# | 每步真实 token 数 D | {{ sc.tokens_per_step|count }} |
# | 有效占比 | {{ pad.useful_fraction|pct }} |
# | pad 槽位 | {{ pad.waste_fraction|pct }} |
# | 留给 packing 的提速 | 没有：已经 packing |
# | MFU | {{ acc.mfu|pct }} |
#
# 本场景声明 `batching: packed`：数据已经 packing，一步计算的槽位就是 {{ sc.tokens_per_step|count }} 个真实 token，没有 pad 槽位。定长补齐的那笔账（浪费、完美 packing 的提速）在这里不适用：没有可省的槽位，步时（{{ sc.step_time|num(1) }} 秒）和 MFU（{{ acc.mfu|pct }}）都不会因为 packing 再变。要核对这个声明，看日志里每步计入的 token 数是不是 $D$，以及注意力 kernel 是否拿到了 `cu_seqlens`。packing 之后剩下要看的是注意力：它应当按样本（文档）计算（varlen，正比于 $\sum s_i^2$，而不是拼好的整行长度的平方，见第 3 节），同一行里的样本也不能互相看见（第 3、4 节）。
# {% else %}
# **按均值算的 padding 账**
#
# | 量 | 值 |
# |---|---|
# | 每步槽位 B·S | {{ pad.slots|num }} |
# | 每步真实 token 数 D | {{ sc.tokens_per_step|count }} |
# | 有效占比 | {{ pad.useful_fraction|pct }} |
# | 浪费 | {{ pad.waste_fraction|pct }} |
# {% if padded %}
# | 槽位之比 B·S / D（只算带权重的矩阵乘） | {{ pad.packing_speedup|times }} |
# | 单步耗时：现在 → packing 后（单步耗时模型） | {{ sc.step_time|num(1) }} s → {{ pack.step_time|num(1) }} s（{{ pack.gain|times }}） |
# | MFU：现在 → packing 后（单步耗时模型）{% if pack.mfu > 1 %}（超过 100%：不可能）{% endif %} | {{ acc.mfu|pct }} → {{ pack.mfu|pct }} |
# {% else %}
# | 完美 packing 的提速 | 没有：没有 pad 槽位 |
# | MFU（packing 不改变） | {{ acc.mfu|pct }} |
# | 单步耗时（packing 不改变） | {{ sc.step_time|num(1) }} s |
# {% endif %}
#
# {% if beyond_peak %}
# 本场景按均值有 **{{ pad.waste_fraction|pct }}** 的槽位落在 pad 上；但按槽位比例缩短步时，MFU 会从 {{ acc.mfu|pct }} 升到 {{ pad.mfu_after_packing|pct }}，超过 100%，不可能。也就是说，本场景的输入与这笔账的前提矛盾：若每个样本真补齐到 $S$、pad 也全额计算，硬件现在就已超过峰值。要么训练其实没有定长补齐（已经 packing，场景里写 `batching: packed`），要么步时、GPU 数或模型的输入需要核对；这里的提速不能当真。日志里每步计入的 token 数若是 $D$ = {{ sc.tokens_per_step|count }}，说明按真实 token 计数（计算是否也只在真实 token 上做，还要看注意力是否拿到 `cu_seqlens`）；若是 $B \cdot S$ = {{ pad.slots|num }}，就是在补齐。
# {% elif padded %}
# 本场景有 **{{ pad.waste_fraction|pct }}** 的槽位落在 pad 上；如果真在定长补齐，按单步耗时模型，完美 packing 能把每步从 {{ sc.step_time|num(1) }} 秒压到 **{{ pack.step_time|num(1) }} 秒**（{{ pack.gain|times }}），MFU 从 {{ acc.mfu|pct }} 升到 {{ pack.mfu|pct }}。只按槽位等比例缩短（课程的算法）会是 {{ pad.step_time_after_packing|num(1) }} 秒（{{ pad.packing_speedup|times }}）。两者不同的原因：{{ pack_why }}。先确认补齐真实存在：日志里每步计入的 token 数若是 $D$ = {{ sc.tokens_per_step|count }}，说明按真实 token 计数（计算是否也只在真实 token 上做，还要看注意力是否拿到 `cu_seqlens`）；若是 $B \cdot S$ = {{ pad.slots|num }}，就是在补齐。
# {% else %}
# 本场景的平均真实长度等于配置长度（{{ sc.seq_len|num }}）：每个样本都填满 $S$，定长补齐也没有 pad 槽位。这里没有 padding 可去，packing 不会改变步时（{{ sc.step_time|num(1) }} 秒）和 MFU（{{ acc.mfu|pct }}）。要核对的是这个前提：日志里每步计入的 token 数应当正好是 $B \cdot S$ = {{ pad.slots|num }}，一个 batch 的 `attention_mask` 里没有 pad。若每个 $S$ 长的样本其实是几篇文档拼接后切出来的，数据就已经是 packing 了：该查的是注意力是否拿到了 `cu_seqlens`（否则同一行的文档互相看得见，见第 4 节），文档的真实长度也要用 `sequence_lengths` 另给。
# {% endif %}
# {% endif %}

# %% [markdown]
# 这笔账有一个前提：训练真的在做定长补齐。它能从日志和数据上核对：每步计入的 token 数是真实 token 数 $D$ 还是槽位数 $B \cdot S$，注意力是否拿到了 `cu_seqlens`，一个 batch 的 `attention_mask` / `position_ids` 里有没有大片 pad。已经在 packing（场景里写 `batching: packed`），这笔浪费就不存在；确实定长补齐，它全额存在；部分 packing 则介于两者之间。
#
# ## 2. 课程之外：长度是一个分布
#
# 均值够算线性层的浪费，却回答不了两个问题：把样本装进 $S$ 长的行里到底能装多满？注意力的平方项按均值算准不准？两者都要长度的分布。场景给了团队的长度文件（`sequence_lengths`）时，下面直接用文件里的真实长度（截断到 $S$）。没给时（课程场景就是这样），造一个合成的长度分布：Gamma 分布的随机数（固定种子），乘上一个比例系数后四舍五入并截断到 $[1, S]$；比例系数用二分法求，使每一步的 token 总数**恰好**等于场景的 $D$（截断会拉低均值，所以不能直接按均值缩放）。取若干步，让统计量稳定。合成分布的形状是假设（`packing.DEFAULT_SHAPE`），不是测量值：换成团队自己的长度文件会更好。

# %%
n, mean, seq_len = sc.samples_per_step, sc.mean_tokens_per_sample, sc.seq_len
n_sim = packing.samples_for(n)  # samples simulated per step (all of them, up to a limit)
per_step = n / n_sim  # scales a simulated step's attention FLOPs to the scenario's step
# synthetic lengths, the file's one step, or seeded draws from the file (cut at seq_len)
source, steps = packing.simulated_steps(n, mean, seq_len, None if team is None else team.truncated,
                                        team is not None and team.exact_step)
n_steps = len(steps)
lengths = np.concatenate(steps) if team is None else team.truncated
capped = float(np.mean(lengths == seq_len))  # share of samples at the cap S
over_half = float(np.mean(lengths > seq_len / 2))  # share longer than S/2

# %% tags=["remove-input"]
step_tokens = int(steps[0].sum())  # every step holds the same number of tokens
median = float(np.median(lengths))
info = None if team is None else team.summary()

# %% [markdown]
# {% if team is none %}
# **合成的样本长度（固定种子）**
#
# | 合成长度 | 值 |
# |---|---|
# | 步数 × 每步样本数 | {{ n_steps }} × {{ n_sim|num }} |
# | Gamma 形状参数（假设） | {{ packing.DEFAULT_SHAPE|num(1) }} |
# | {% if n_sim == n %}每步 token 数（每一步都相同）{% else %}每个模拟步的 token 数（每一步都相同）{% endif %} | {{ step_tokens|num }} |
# | 平均长度 | {{ lengths.mean()|num(1) }} |
# | 中位长度 | {{ median|num(0) }} |
# | 顶到上限 S 的样本 | {{ capped|pct }} |
# | 长于 S/2 的样本 | {{ over_half|pct }} |
# {% if n_sim < n %}
#
# 本场景每步有 {{ n|num }} 个样本，装箱模拟的耗时随样本数的平方增长，所以每步只模拟 {{ n_sim|num }} 个样本（同样的均值和上限）。下面的比例（有效占比、提速、平方和之比、泄漏比例）直接用于本场景；行数与槽位数按模拟的样本数计，注意力 FLOPs 已按样本数换算回整步。样本越多，装箱越容易把行填满，所以贪心装箱的结果在本场景里只会更好一点。
# {% endif %}
# {% else %}
# **团队的样本长度（sequence_lengths）**
#
# | 团队的长度 | 值 |
# |---|---|
# | 文件里的长度个数 | {{ team.count|num }} |
# | 读法 | {% if team.exact_step %}恰好一整步{% else %}一个分布，按 samples_per_step = {{ n|num }} 缩放{% endif %} |
# | 平均长度（截断到 S） | {{ team.mean|num(1) }} |
# | 中位长度（截断到 S） | {{ median|num(0) }} |
# | 文件里最长的样本 | {{ info.longest|num }} |
# | 长于 S 的样本（被截断） | {{ team.truncated_samples|num }}（{{ (team.truncated_samples / team.count)|pct }}） |
# | 截断掉的 token | {{ team.truncated_tokens|num }} |
# | 顶到上限 S 的样本（截断后） | {{ capped|pct }} |
# | 长于 S/2 的样本 | {{ over_half|pct }} |
# | 下面装箱用的步 | {% if source == "file step" %}文件里的这一步{% else %}{{ n_steps }} × {{ n_sim|num }} 个，从文件中抽取（固定种子）{% endif %} |
#
# {% if team.exact_step %}文件里正好有 samples_per_step = {{ n|num }} 个长度，按**一整步**读：$D$ 就是这一步截断后的长度之和（{{ sc.tokens_per_step|count }}），$\sum s_i^2$ 也是这一步自己的。{% else %}文件里有 {{ team.count|num }} 个长度，不等于 samples_per_step（{{ n|num }}），按**一个分布**读：它的均值和平方均值按每步 {{ n|num }} 个样本缩放到一步（$D = B\bar{s}$ = {{ sc.tokens_per_step|count }}）。{% endif %}{% if source == "file draws" %}下面的装箱模拟从文件中有放回地抽样本（固定种子），{{ n_steps }} 步、每步 {{ n_sim|num }} 个{% if n_sim < n %}（本场景每步的样本太多，装箱只模拟这么多个；比例直接用于本场景，注意力 FLOPs 已按样本数换算回整步）{% endif %}。{% else %}下面的装箱就装这一步。{% endif %}{% if team.truncated_samples %}文件里有 **{{ team.truncated_samples|num }}** 个样本长于 seq_len = {{ seq_len|num }}，被截断到 $S$，一共截掉 {{ team.truncated_tokens|num }} 个 token{% if not team.exact_step %}（按一步 {{ n|num }} 个样本换算，每步约 {{ info.truncated_samples_per_step|num(1) }} 个样本、{{ info.truncated_tokens_per_step|num }} 个 token）{% endif %}。截掉的 token 不参与训练，也不计入 $D$；均值和 $\sum s_i^2$ 都按截断后的长度算。{% else %}文件里没有长于 seq_len = {{ seq_len|num }} 的样本，没有截断。{% endif %}
# {% endif %}

# %% tags=["remove-input"]
d.setup_plots()
fig, ax = plt.subplots()
if team is None:
    ax.hist(lengths, bins=60, color="tab:blue", alpha=0.8)
    ax.axvline(mean, color="tab:orange", linestyle="--", label="mean (scenario)")
    ax.axvline(seq_len, color="tab:red", linestyle=":", label="seq_len (cap)")
    ax.set_title(f"Synthetic sample lengths: {n_steps} steps x {n_sim} samples")
else:
    ax.hist(np.asarray(team.raw), bins=60, color="tab:blue", alpha=0.8)
    ax.axvline(team.mean, color="tab:orange", linestyle="--", label="mean (after the cut at seq_len)")
    ax.axvline(seq_len, color="tab:red", linestyle=":", label="seq_len (longer samples are cut)")
    ax.set_title(f"Team's sample lengths: {team.count:,} in the file, "
                 + ("one step" if team.exact_step else "a distribution"))
ax.axvline(seq_len / 2, color="gray", linestyle="-.", label="seq_len / 2")
ax.set_xlabel("sample length (tokens)" if team is None else "sample length as read (tokens)")
ax.set_ylabel("samples")
ax.legend()
plt.show()

# %% [markdown]
# 图注：横轴是样本长度（token），纵轴是落在每个长度区间里的样本数。

# %% [markdown]
# 把同样的样本按三种方式摆进计算：
#
# - **定长补齐**：每个样本一行，槽位 = 样本数 × $S$；
# - **贪心装箱**：首次适应递减（first-fit decreasing，`packing.greedy_pack`），按长度从大到小，放进第一个还装得下的 $S$ 长的行，槽位 = 行数 × $S$，每行剩下的尾巴仍是 pad；
# - **完美 packing**：槽位 = 真实 token 数，相当于按真实长度做 varlen、不受固定行长约束。
#
# 场景已经是 `batching: packed` 时，账上按完美 packing 记，下面只比较后两种摆法。

# %%
ways = packing.three_ways(steps, seq_len)  # slots and rows per step of the three layouts
ffd, perfect = ways["ffd"], ways["perfect"]
gain = perfect["speedup"] > 1  # some slots hold padding under fixed padding
# the share of perfect packing's gain that greedy first-fit decreasing captures
captured = (ffd["speedup"] - 1) / (perfect["speedup"] - 1) if gain else 1.0

# %% tags=["remove-input"]
over = f"{n_steps} 步的平均" if n_steps > 1 else "一步"
what = {"synthetic": "合成数据", "file step": "团队的这一步",
        "file draws": "从团队长度文件抽出的样本"}[source]
this = "本场景的" + what if source == "synthetic" else what
# rows per step are exercise 2's answer: shown in its solution, not here. One table when the
# three layouts differ in a column as written.
layouts_differ = len({(d.num(v["slots"]), d.pct(v["useful_fraction"]), d.times(v["speedup"]))
                      for v in ways.values()}) > 1
same = d.times(perfect["speedup"]) == d.times(pad["packing_speedup"])
drawn = float(np.mean(np.concatenate(steps)))  # the drawn samples' mean length

# %% [markdown]
# {% if packed %}
# **S 个 token 一行的 packing（{{ over }}）**
#
# | packing 的摆法 | 每步槽位 | 有效占比 |
# |---|---|---|
# | 完美（账上：槽位 = D） | {{ perfect.slots|num }} | {{ perfect.useful_fraction|pct }} |
# | 贪心首次适应递减，整样本 | {{ ffd.slots|num }} | {{ ffd.useful_fraction|pct }} |
#
# 本场景已经 packing，账上按完美 packing 记，没有 packing 收益可拿。长度分布在这里决定的是每行装几个样本，以及注意力的 $\sum s_i^2$（第 3 节）。{% if gain %}{{ what }}按 $S$ 长的行装；若打包器按整个样本贪心装箱（不切样本），行数会不会比 token 总数所需的多、多几行，后面的练习会算{% if ffd.useful_fraction < 1 %}，行尾还留着 {{ (1 - ffd.useful_fraction)|pct }} 的 pad（账外的一点浪费，首尾拼接后按行切开或 varlen 不分行则没有）{% endif %}。{% elif team is none %}按本场景，平均长度等于 $S$（{{ seq_len|num }}），每个样本都恰好 $S$ 长，各占一整行。如果场景里的“样本”指的是拼好的行而不是文档，文档的真实长度就得另给（`sequence_lengths`），第 3、4 节的 $\sum s_i^2$ 和跨样本注意力才有意义。{% else %}文件里的样本截断后都是 $S$ 长，各占一整行。{% endif %}
# {% else %}
# {% if layouts_differ %}
# **三种摆法（{{ over }}）**
#
# | 摆法 | 每步槽位 | 有效占比 | 相对定长补齐的提速 |
# |---|---|---|---|
# | 定长补齐 | {{ ways.fixed.slots|num }} | {{ ways.fixed.useful_fraction|pct }} | {{ ways.fixed.speedup|times }} |
# | 贪心首次适应递减 | {{ ffd.slots|num }} | {{ ffd.useful_fraction|pct }} | {{ ffd.speedup|times }} |
# | 完美 packing | {{ perfect.slots|num }} | {{ perfect.useful_fraction|pct }} | {{ perfect.speedup|times }} |
# {% else %}
# 三种摆法（定长补齐、贪心装箱、完美 packing）在本场景完全相同：每步 {{ ways.fixed.slots|num }} 个槽位，有效占比 {{ ways.fixed.useful_fraction|pct }}，提速 {{ ways.fixed.speedup|times }}。
# {% endif %}
#
# {% if not gain %}{% elif source == "synthetic" and same %}完美 packing 一行与按均值算的账完全一致（{{ perfect.speedup|times }}），这是合成数据的校验。{% elif source == "synthetic" %}完美 packing 一行是 {{ perfect.speedup|times }}，按均值算的账是 {{ pad.packing_speedup|times }}：合成数据每步的 token 数只能是整数（{{ step_tokens|num }} 而不是 {{ (n_sim * mean)|num(2) }}），差别全在这次取整。{% elif source == "file step" %}{% if same %}完美 packing 一行与账上一致（{{ perfect.speedup|times }}）：账上的 $D$ 就是这一步的长度之和。{% else %}完美 packing 一行是 {{ perfect.speedup|times }}，账上是 {{ pad.packing_speedup|times }}。{% endif %}{% else %}完美 packing 一行是 {{ perfect.speedup|times }}，账上是 {{ pad.packing_speedup|times }}（抽出的样本平均长 {{ drawn|num(1) }}，文件的均值是 {{ team.mean|num(1) }}{% if not same %}，两者只差抽样误差）。{% else %}）。{% endif %}{% endif %}{% if gain %}贪心装箱得到 **{{ ffd.speedup|times }}**，拿到了完美 packing 收益的 **{{ captured|pct(0) }}**，剩余浪费 {{ (1 - ffd.useful_fraction)|pct }}。{% if over_half > 0 %}长于 $S/2$ 的样本两两不能同行（本分布中占 {{ over_half|pct }}），每个都要独占一行，这就给每步的行数定了一个下界（后面的练习会把它算出来）；其余的空隙靠短样本填。{% else %}本分布中没有长于 $S/2$ 的样本，行数只取决于短样本把每行填得多满。{% endif %}{% if capped > 0 %}另有 {{ capped|pct }} 的{% if team is none %}合成{% endif %}样本顶到了 $S$（{% if team is none %}合成长度中被截断的长文档；分布形状 `packing.DEFAULT_SHAPE` = {{ packing.DEFAULT_SHAPE|short }} 是假设，均值取场景的 `mean_tokens_per_sample`{% if sc.changed %}，不是团队的长度数据{% endif %}{% elif team.truncated_samples %}含文件中被截断的样本{% else %}文件里本来就是这么长{% endif %}），它们自成一行、没有空隙可填。{% endif %}{% else %}{% if team is none %}合成样本{% else %}文件里的样本（截断后）{% endif %}全都顶到了 $S$，三种摆法的槽位一样多（每步 {{ perfect.slots|num }}）：没有空隙，装箱无从省起，与按均值算的账一致。{% endif %}
# {% endif %}

# %% [markdown]
# ## 3. 注意力项：均值低估了 $\sum s_i^2$
#
# 线性层的 FLOPs 与 token 数成正比，只需要长度之和；注意力核心（$QK^\top$ 与 $AV$）对每个样本按长度的平方计，块对角注意力下一步的注意力 FLOPs 正比于 $\sum_i s_i^2$。用均值代替时，方差被丢掉了：

# %%
n_sym, sigma = sp.symbols("n sigma", positive=True)
sum_sq = sp.expand(n_sym * (s_mean**2 + sigma**2))  # sum of s_i^2 = n (mean^2 + variance)
d.eq(r"\sum_{i=1}^{n} s_i^2", sum_sq,
     sp.Mul(n_sym * s_mean**2, 1 + sigma**2 / s_mean**2, evaluate=False))

# %%
dim, layers = sc.attention_dim, sc.num_full_attention_layers
att_mean = attention_training_flops(mean, dim, layers, n, conv)  # B s_mean^2: the course's reading
if team is None:  # the synthetic lengths' sum(s^2) / (n mean^2), applied to the mean-length figure
    ratio = packing.square_ratio(lengths)
    att_sq = att_mean * ratio
else:  # the account's own sum of squares: the file's, per step
    ratio = acc["attention"]["actual"]["sum_squared_lengths"] / (n * mean**2)
    att_sq = acc["attention"]["actual"]["flops_per_step"]
# packed rows with a plain causal mask: every row counted at S^2
att_rows = attention_training_flops(seq_len, dim, layers, ffd["rows"], conv) * per_step
d.eq(r"\frac{\sum s_i^2}{n \bar{s}^2}", d.num(ratio, 3))

# %% tags=["remove-input"]
actual = acc["attention"]["actual"]
att_padded = acc["attention"]["padded"]["flops_per_step"]
if team is None:
    # The same as summing over the synthetic lengths, whose mean is the scenario's up to rounding.
    assert abs(att_mean / actual["flops_per_step"] - 1) < 1e-9  # the account reads B s_mean^2
    assert abs(att_sq * n_steps / per_step / sum_of_squares_flops(lengths, dim, layers, conv)
               * (float(lengths.mean()) / mean) ** 2 - 1) < 1e-9
else:
    assert abs(att_sq / (sum_of_squares_flops(lengths, dim, layers, conv) * n / team.count) - 1) < 1e-9
    assert abs(att_sq / (att_mean * ratio) - 1) < 1e-9
shared = ffd["rows"] < n_sim  # some packed row holds more than one sample
equal = bool(np.all(lengths == lengths[0]))  # sum(s^2) = n mean^2 exactly
rows_over = att_rows > att_sq * (1 + 1e-9)  # whole rows squared count more than the samples

# %% [markdown]
# **每步的注意力核心 FLOPs（与账上同一口径）**
#
# | 每步的注意力核心 | 增长方式 | FLOPs，按{{ words.convention(conv) }} |
# |---|---|---|
# {% if not packed %}
# | 定长补齐：每个样本都按 S | B · S² | {{ att_padded|sci }} |
# {% endif %}
# | 装箱成行，普通因果掩码（错误） | 行数 · S² | {{ att_rows|sci }} |
# | {% if team is none %}账上的 `actual` 读数：平均长度{% else %}只用平均长度（课程的读法）{% endif %} | B · s̄² | {{ att_mean|sci }} |
# | {% if team is none %}块对角，按真实长度{% else %}块对角，按文件（账上）{% endif %} | Σ s_i² | {{ att_sq|sci }} |
#
# {% if equal %}本场景的{% if team is none %}合成样本{% else %}样本（截断后）{% endif %}全都等长（{{ lengths[0]|int|num }}），$\sum s_i^2$ 恰好等于 $n\bar{s}^2$：按均值算的注意力 FLOPs（{{ att_mean|sci }}）没有少算。分布越散，均值低估得越多。{% elif team is none %}本场景合成分布下 $\sum s_i^2$ 是 $n\bar{s}^2$ 的 **{{ ratio|num(3) }} 倍**：账上按均值算的注意力 FLOPs（{{ att_mean|sci }}）少算了，按真实长度是 {{ att_sq|sci }}，比它多 **{{ (ratio - 1)|pct(1) }}**。分布越散，差得越多；只有所有样本等长时两者才相等。{% else %}团队的长度下，每步 $\sum s_i^2$ = {{ actual.sum_squared_lengths|sci }}，而课程的近似 $B\bar{s}^2$ = {{ (n * mean**2)|sci }}：前者是后者的 **{{ ratio|num(3) }} 倍**。按均值算的注意力 FLOPs（{{ att_mean|sci }}）少算了，真实值 {{ att_sq|sci }} 比它多 **{{ (ratio - 1)|pct(1) }}**（$B\bar{s}^2$ 只有真实值的 {{ (1 / ratio)|pct(1) }}）。差的正是方差那一项，$B\bar{s}^2$ 永远不会高估；账上用的已经是文件的 $\sum s_i^2$。{% endif %}{% if packed and shared %}本场景已经 packing：注意力应当按样本算（varlen / 块对角，`cu_seqlens`），即上表 $\sum s_i^2$ 一行。若拼好的行（这里按上面的贪心装箱成行）交给不带文档掩码的普通因果 kernel，注意力按整行的平方算（{{ att_rows|sci }}，是 $\sum s_i^2$ 的 {{ (att_rows / att_sq)|times }}），既多算，又让样本互相看见（见下一节）。{% elif shared %}反过来，装箱后若仍用整行的普通因果掩码，注意力按行长的平方算（{{ att_rows|sci }}），既多算，又让样本互相看见（见下一节）。{% elif rows_over %}本分布装箱后每行只有一个样本，普通因果掩码不会让样本互相看见；但按整行长度的平方算（{{ att_rows|sci }}），行尾 pad 上的注意力仍被多算。{% else %}本分布下每个样本都独占一整行且填满，普通因果掩码与块对角掩码没有区别。{% endif %}

# %% [markdown]
# 所以只知道均值时，$B\bar{s}^2$ 是注意力的下限估计，要用真实长度的平方和（场景的 `sequence_lengths` 文件，或者从 `cu_seqlens` 直接算）才准；给了长度文件，账上的 `actual` 一行用的就是文件的 $\sum s_i^2$。若定长补齐真实存在，而注意力也在 pad 上整块计算（没有 varlen），packing 还会把注意力从 $B S^2$ 降到 $\sum s_i^2$。下面把这部分也算进 packing 省下的 FLOPs；注意力这一项单独的比例与线性层的比例谁大，留作本节末的练习 1。

# %% tags=["remove-input"]
if padded and not packed:
    linear_padded = acc["model_flops_per_step"] * pad["packing_speedup"]
    flop_speedup_mean = (linear_padded + att_padded) / (acc["model_flops_per_step"] + att_mean)
    flop_speedup_sq = (linear_padded + att_padded) / (acc["model_flops_per_step"] + att_sq)

# %% [markdown]
# {% if packed %}
# 本场景已经 packing（`batching: packed`），这里没有可省的：线性层没有 pad 槽位，注意力在 varlen 下也已按 $\sum s_i^2$ 计。
# {% elif not padded %}
# 本场景没有 pad 槽位（每个样本都填满 $S$），注意力的 $B S^2$ 也就等于 $\sum s_i^2$：线性层和注意力都没有可省的 FLOPs。
# {% else %}
# **算上注意力核心的 packing 收益**
#
# | 完美 packing 省下的 FLOPs（注意力也在 pad 上算时） | FLOPs 之比 |
# |---|---|
# | 只算线性层（账上的做法） | {{ pad.packing_speedup|times }} |
# | 算上注意力，按平均长度 | {{ flop_speedup_mean|times }} |
# | 算上注意力，按 Σ s_i² | {{ flop_speedup_sq|times }} |
#
# 只算线性层（课程的做法）时，packing 前后的 FLOPs 之比是 {{ pad.packing_speedup|times }}；若注意力也在 pad 上整块算，按真实长度的 $\sum s_i^2$ 算是 {{ flop_speedup_sq|times }}。这是 FLOPs 之比，不是步时之比：若补齐时注意力已经按真实长度算（varlen），能省的只有线性层那一份，而且步时里不随槽位变的部分越多，实际提速越小。本场景设的是 `attention_on_padding: {{ sc.attention_on_padding }}`（{% if sc.attention_on_padding == "computed" %}注意力在 pad 上整行计算{% else %}注意力只算真实长度{% endif %}{% if sc.sources.attention_on_padding == "course" %}，这是课程的前提，不是量出来的{% endif %}），第 1 节的单步耗时模型就是按这个设定给出 packing 的答案。
# {% endif %}

# %% [markdown]
# ## 4. 正确的 packing 需要什么
#
# 把几个样本首尾相接放进一行，只是省下槽位；要让训练结果与逐个样本训练等价，还要三件事：
#
# 1. **块对角注意力**：每个 token 只看同一样本内、位置不晚于自己的 token。FlashAttention 的 varlen 接口用 `cu_seqlens`（样本边界的前缀和）表达这一点。
# 2. **位置编号按样本重置**：`position_ids` 在每个样本开头回到 0，RoPE 看到的才是样本内的相对位置。
# 3. **loss mask**：第 $t$ 个 token 的目标是第 $t+1$ 个 token；每个样本最后一个 token 的“下一个”已属于下一个样本（或在行尾之外），这个预测必须从 loss 中去掉。
#
# 用一个很小的例子看清楚：三个样本，长度 3、2、4，拼成一行 9 个 token。

# %%
tiny = [3, 2, 4]
ids = packing.sample_ids(tiny)
pos = packing.position_ids(tiny)  # restarts at 0 in every sample
loss = packing.loss_mask(tiny)  # 0 where the next token belongs to another sample
block = packing.block_causal_mask(tiny)

# %% [markdown]
# {{ ("cu_seqlens = " ~ packing.cu_seqlens(tiny))|code }}
#
# **一行装 {{ tiny|length }} 个样本（长度 {{ tiny|join("、") }}）**
#
# | token | 样本 | 朴素位置 | position_ids（按样本重置） | loss mask |
# |---|---|---|---|---|
# {% for t in range(tiny|sum) %}
# | {{ t }} | {{ "ABC"[ids[t]] }} | {{ t }} | {{ pos[t]|int }} | {{ loss[t]|int }} |
# {% endfor %}
#
# **块对角因果掩码（1 = 可以看见）**
#
# | query \ key |{% for j in range(tiny|sum) %} k{{ j }} |{% endfor %}
# |---|{% for j in range(tiny|sum) %}---|{% endfor %}
# {% for row in block.tolist() %}
# | q{{ loop.index0 }} |{% for x in row %} {{ x }} |{% endfor %}
# {% endfor %}

# %% [markdown]
# 如果忘了块对角、只用整行的普通因果掩码，每个 token 会看到排在它前面的**所有**样本。跨样本的 (query, key) 对数可以直接推出来：整行的对数减去各样本内部的对数。

# %%
l1, l2, l3 = sp.symbols("l_1 l_2 l_3", positive=True)
total = l1 + l2 + l3
cross = sp.expand((total * (total + 1) - sum(x * (x + 1) for x in (l1, l2, l3))) / 2)
d.eq(r"\text{cross-sample pairs}", cross, cross.subs(dict(zip((l1, l2, l3), tiny))))
plain = packing.causal_mask(sum(tiny))
leaks = packing.cross_sample_pairs(tiny)

# %% [markdown]
# 这一行里普通因果掩码允许 {{ plain.sum()|int }} 对，块对角只允许 {{ block.sum()|int }} 对，多出的 **{{ leaks }}** 对全是跨样本的泄漏（占 {{ (leaks / plain.sum())|pct(1) }}）。

# %% tags=["remove-input"]
fig, axes = plt.subplots(1, 2, figsize=(8, 3.8))
view = plain + (plain - block)  # 1 = same sample, 2 = leaks across samples
for ax, grid, title in ((axes[0], view, "Plain causal mask on the packed row"),
                        (axes[1], block, "Block-diagonal causal mask (cu_seqlens)")):
    ax.imshow(grid, cmap="Blues", vmin=0, vmax=2)
    for edge in packing.cu_seqlens(tiny)[1:-1]:
        ax.axhline(edge - 0.5, color="tab:red", linewidth=1)
        ax.axvline(edge - 0.5, color="tab:red", linewidth=1)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.grid(False)
axes[0].text(0.5, -0.28, "dark = attends across samples", transform=axes[0].transAxes,
             ha="center", fontsize=8)
plt.show()

# %% [markdown]
# 图注：横轴是 key 的位置，纵轴是 query 的位置；每个格子是一对 query 和 key，颜色见图题。

# %% [markdown]
# 放到本场景的规模上：把上面的长度（合成的，或团队文件里的）按贪心装箱的结果拿来，看普通因果掩码会放进多少跨样本的注意力对。

# %%
all_bins = [row for step in steps for row in packing.greedy_pack([int(x) for x in step], seq_len)]
share_leak = packing.cross_sample_share(all_bins)  # causal pairs that cross a sample boundary
shared_rows = sum(len(row) > 1 for row in all_bins) / len(all_bins)  # rows with 2+ samples
# Every sample fills S exactly (padded, no pad slot): a sample is then most likely a chunk cut from
# concatenated documents (Megatron's GPT dataset), whose documents share the chunk's causal mask.
chunked_documents = share_leak == 0 and not packed and pad["waste_fraction"] == 0
one_mask = ("每个样本都整整 S 个 token，这样的样本通常是把文档拼接后切出的块（Megatron 的 GPT 数据集就这样做），"
            "块里的几篇文档共用一个因果掩码、彼此看得见；本页的长度里没有文档边界，这种跨文档的注意力算不出来")

# %% [markdown]
# {% if share_leak > 0 %}
# {{ what }}装箱后，**{{ shared_rows|pct(1) }}** 的行里不止一个样本；若只用普通因果掩码，全部行的因果注意力对中有 **{{ share_leak|pct(1) }}** 跨越了样本边界。{% if packed %}本场景已经 packing，这正是剩下要查的：kernel 是否拿到了样本边界（`cu_seqlens`）。{% endif %}这种错误不会让训练崩溃，loss 看上去也正常，模型却在学不存在的跨样本关联，所以三件事都要逐条验证。
# {% elif chunked_documents %}
# {{ this }}装箱后，每一行都只有一个样本，按样本算没有跨样本的注意力对。但{{ one_mask }}。若要按文档隔开，三件事仍要逐条验证。
# {% else %}
# {{ this }}装箱后，每一行都只有一个样本，普通因果掩码在这里碰巧不会跨样本泄漏。但只要有一行装进了两个样本，泄漏就会出现，而且不会让训练崩溃、loss 看上去也正常，所以三件事仍要逐条验证。
# {% endif %}

# %% [markdown]
# ## 课程怎么说，本页算出什么
#
# 课程 06.4 对 padding 与 packing 的说法（外加 06.5 里与长度分布有关的一条），逐条与本页按场景算出的数对照。

# %% tags=["remove-input"]
own = bool(sc.changed)  # a team's scenario: the middle column is the team's figure


def cite(key):
    """The course's figure and section (claim), or just the section for a statement."""
    entry = quoted[key]
    return course.claim(key) if "text" in entry or "range" in entry else f"（课程 {entry['section']}）"


judge = partial(d.judge, own=own)


no_pad = ("已经 packing（batching: packed），没有 pad 槽位" if packed else
          "平均长度等于配置长度，每个样本都填满 S，没有 pad 槽位" if not padded else "")
ratio_text = f"平均长度与配置长度之比 s̄/S = {d.pct(pad['useful_fraction'])}"
lengths_from = "合成长度，分布形状是假设" if team is None else "团队的长度"
lengths_zh = "合成长度" if team is None else "团队的长度"
source_text = {"synthetic": "合成长度分布", "file step": "团队的这一步",
               "file draws": "团队的长度分布"}[source]
# the model's answer (the report's lever), not the slot arithmetic: one answer on every page
gain_pack = pack["gain"] if pack else 1.0
after_mfu = pack["mfu"] if pack else acc["mfu"]
after_step = pack["step_time"] if pack else sc.step_time
greedy_left = 1 - ffd["useful_fraction"]  # pad left in greedy whole-sample rows

# %% tags=["remove-input"]
claim_rows = [
    ["定长补齐时，槽位里 pad 的占比：" + cite("padding_waste"), d.pct(pad["waste_fraction"]),
     judge("padding_waste", pad["waste_fraction"], d.pct(pad["waste_fraction"]),
           no_pad or f"浪费是 1 − s̄/S，{ratio_text}")],
    ["定长补齐时，槽位里真实 token 的占比：" + cite("nb04_useful_fraction"), d.pct(pad["useful_fraction"]),
     judge("nb04_useful_fraction", pad["useful_fraction"], d.pct(pad["useful_fraction"]),
           no_pad or "有效占比就是 s̄/S，随平均长度与配置长度之比变")],
    ["完美 packing 的提速：" + cite("packing_speedup"),
     d.times(gain_pack) if padded else "没有（无 pad 可去）",
     judge("packing_speedup", gain_pack, d.times(gain_pack),
           (no_pad + "，packing 没有提速可拿") if no_pad else pack_why,
           f"。课程的 {d.times(pad['packing_speedup'])} 是槽位之比 S/s̄（{ratio_text}）；按整个样本贪心装箱，"
           f"槽位之比是 {d.times(ffd['speedup'])}（{lengths_from}）" if padded else "", quiet=not padded)],
    ["完美 packing 后的 MFU（6ND 口径）：" + cite("nb04_mfu_after_packing"),
     f"{d.pct(acc['mfu'])} → {d.pct(after_mfu)}" if padded else f"{d.pct(acc['mfu'])}（不变）",
     judge("nb04_mfu_after_packing", after_mfu, d.pct(after_mfu),
           "超过 100%，不可能：输入与“pad 全额计算”的前提矛盾，先核对是否真在补齐" if beyond_peak else
           (no_pad + f"，MFU 仍是 {d.pct(acc['mfu'])}") if no_pad else
           f"MFU {d.pct(acc['mfu'])} 乘以提速 {d.times(gain_pack)}（{pack_why}）",
           f"；{no_pad}，这就是它现在的 MFU"
           if no_pad and course.agrees(after_mfu, "nb04_mfu_after_packing") else "", quiet=not padded)],
    ["完美 packing 后的单步耗时：" + cite("nb04_step_after_packing"),
     f"{d.num(sc.step_time, 1)} → {d.num(after_step, 1)} 秒" if padded
     else f"{d.num(sc.step_time, 1)} 秒（不变）",
     judge("nb04_step_after_packing", after_step, f"{d.num(after_step, 1)} 秒",
           (no_pad + f"，步时仍是 {d.num(sc.step_time, 1)} 秒") if no_pad else pack_why,
           f"；{no_pad}，这就是它现在的步时"
           if no_pad and course.agrees(after_step, "nb04_step_after_packing") else "", quiet=not padded)],
]

# %% tags=["remove-input"]
claim_rows += [
    ["拼行是装箱问题，简单的贪心算法就足够" + cite("nb04_greedy_packing"),
     ((f"每步贪心 {d.num(ffd['rows'], 1)} 行，完美 {d.num(perfect['rows'], 1)} 行" if packed else
       f"贪心 {d.times(ffd['speedup'])}，完美 {d.times(perfect['speedup'])}")
      + f"；贪心的行里 pad 占 {d.pct(greedy_left)}") if gain else "没有空隙可装（样本都顶到 S）",
     d.verdict(greedy_left <= 0.05,
               (f"贪心（first-fit decreasing）拿到完美 packing 收益的 {d.pct(captured, 0)}，" if gain and not packed
                else "") + f"整样本装箱后的行里 pad 占 {d.pct(greedy_left)}"
               + ("（不超过 5%，算够用）" if greedy_left <= 0.05 else "，超过 5%：长样本多时空隙难填，要切样本或换装法")
               + f"；{lengths_from}" if gain else "样本都顶到 S，贪心与完美 packing 一样")],
    ["正确的 packing 要块对角注意力（cu_seqlens）、按样本重置的位置编号、按边界切开的 loss mask"
     + cite("nb04_packing_correctness"),
     f"长度 3、2、4 的一行：普通因果掩码多出 {leaks} 对跨样本",
     d.verdict(True, "第 4 节逐条演示：块对角掩码、重置的 position_ids、每个样本末尾 loss mask 为 0")],
    ["packing 出错时 loss 照样正常，模型学到跨样本的假关联，难以察觉" + cite("nb04_packing_bug_silent"),
     f"普通因果掩码下 {d.pct(share_leak, 1)} 的注意力对跨样本" if share_leak > 0
     else "装箱后每行只有一个样本，没有跨样本的对",
     d.verdict(True, "本页算不出 loss 的样子，只能给出泄漏的规模；跨样本的 (query, key) 对照样进入 softmax，"
               "前向、反向都不报错，只能靠检查掩码和 cu_seqlens 发现" + ("" if share_leak > 0 else f"。{one_mask}" if chunked_documents
                                                          else "。本场景装箱后碰巧没有同行的样本，换一批数据就会泄漏"))],
    ["注意力表的“实际”几行把平均长度代进 seq²（即 B·s̄²）：" + cite("nb04_attention_mean_length"),
     f"Σ s_i² 是 B·s̄² 的 {d.num(ratio, 3)} 倍（{lengths_from}）",
     d.verdict(equal, (f"{'你的场景的' if own else '本场景的'}样本都等长，平方和恰好等于 B·s̄²" if equal else
                       f"均值丢掉了长度的方差：按真实长度算的注意力 FLOPs 是 {d.sci(att_sq)}，比 B·s̄² 的 "
                       f"{d.sci(att_mean)} 多 {d.pct(ratio - 1, 1)}；B·s̄² 只是下限")
               + ("（你的场景的平均长度是 " + d.count(mean) + "）" if own else ""))],
]
d.claims(claim_rows, sc)

# %% [markdown]
# ## 本节要点
#
# {% if packed %}
# - 本场景已经 packing（`batching: packed`）：没有 pad 槽位，定长补齐的浪费与 packing 的提速都不适用。
# - 在{{ source_text }}上按 {{ seq_len|num }} token 的行贪心装箱，{% if shared_rows > 0 %}{{ shared_rows|pct(1) }} 的行里不止一个样本：注意力要按样本算（varlen），不是按整行。{% else %}每行只有一个样本。{% endif %}
# {% else %}
# {% if beyond_peak %}
# - 按均值算：定长补齐时有 **{{ pad.waste_fraction|pct }}** 的槽位是 pad，但本场景按比例 packing 后的 MFU 会是 {{ pad.mfu_after_packing|pct }}，超过 100%：它的输入与“pad 全额计算”的前提矛盾，先核对是否真在补齐。
# {% elif padded %}
# - 按均值算：定长补齐浪费 **{{ pad.waste_fraction|pct }}** 的槽位（槽位之比 {{ pad.packing_speedup|times }}）；按单步耗时模型，完美 packing 让每步 {{ sc.step_time|num(1) }} 秒 → **{{ pack.step_time|num(1) }} 秒**（{{ pack.gain|times }}）。前提是补齐真实存在{% if sc.attention_on_padding == "computed" %}、注意力也在 pad 上整行计算（`attention_on_padding: computed`，课程的前提）{% endif %}，先量再做。
# {% else %}
# - 按均值算：本场景的平均长度等于配置长度，没有 pad 槽位，packing 不改变步时和 MFU；要核对的是 batch 里确实没有 pad，以及每行若由几篇文档拼成，注意力是否拿到了 `cu_seqlens`。
# {% endif %}
# - {% if gain %}在{{ source_text }}上，贪心装箱进 {{ seq_len|num }} token 的行得到 **{{ ffd.speedup|times }}**，约为完美 packing 收益的 {{ captured|pct(0) }}。{% else %}{% if team is none %}合成样本{% else %}文件里的样本{% endif %}全都顶到配置长度，装箱没有可省的槽位。{% endif %}
# {% endif %}
# - {% if team is none %}{% if equal %}注意力按 $\sum s_i^2$ 计；本分布的样本全都等长，均值没有低估它（{{ ratio|num(3) }} 倍）。{% else %}注意力按 $\sum s_i^2$ 计，均值低估了它：本分布下是 **{{ ratio|num(3) }}** 倍。{% endif %}{% else %}注意力按 $\sum s_i^2$ 计：团队的长度下它是 $B\bar{s}^2$ 的 **{{ ratio|num(3) }}** 倍{% if team.truncated_samples %}，文件里 {{ team.truncated_samples|num }} 个样本被截断到 {{ seq_len|num }}。{% else %}。{% endif %}{% endif %}
# - 正确的 packing 要块对角注意力（`cu_seqlens`）、按样本重置的位置编号和边界处的 loss mask；{% if share_leak > 0 %}否则 {{ share_leak|pct(1) }} 的注意力对会跨样本泄漏。{% elif chunked_documents %}{{ this }}装箱后每行只有一个样本，但{{ one_mask }}。{% else %}{{ this }}装箱后碰巧没有同行的样本，但换一批数据就会泄漏。{% endif %}

# %% tags=["remove-input"]
# the exercises' lengths: this run's, or where every sample fills S (nothing to pack: both
# exercises would answer 1x and "as many rows as samples") the course's synthetic lengths, which
# the prompts say
ex_own = gain
if ex_own:
    ex_steps, ex_seq, ex_source_text, ex_lengths_zh = steps, seq_len, source_text, lengths_zh
    ex_n, ex_ffd, ex_over = n, ffd, over
else:
    from costmodel.inputs.scenario import resolve as resolve_course
    course_sc = resolve_course()
    ex_n, ex_seq = course_sc.samples_per_step, course_sc.seq_len
    _, ex_steps = packing.simulated_steps(ex_n, course_sc.mean_tokens_per_sample, ex_seq, None, False)
    ex_source_text, ex_lengths_zh = "课程场景的合成长度", "课程场景的合成长度"
    ex_ffd = packing.three_ways(ex_steps, ex_seq)["ffd"]
    ex_over = f"{len(ex_steps)} 步的平均" if len(ex_steps) > 1 else "一步"
ex_n_sim = packing.samples_for(ex_n)

# %% [markdown] tags=["exercise"]
# ### 练习 1：注意力也在 pad 上算时，packing 省得更多还是更少？
#
# {% if not ex_own %}本场景每个样本都填满 $S$，没有 pad 可省，两道练习都会答成“不变”；这两道题改用课程场景的长度（每步 {{ ex_n|num }} 个样本、平均 {{ course_sc.mean_tokens_per_sample|count }} 个 token、$S$ = {{ ex_seq|num }}，合成分布）。{% endif %}假设定长补齐时注意力也在 pad 上整块计算（没有 varlen）。packing 把线性层的槽位从 $B S$ 降到 $B\bar{s}$，比例是 $S/\bar{s}$；把注意力核心从 $B S^2$ 降到 $\sum s_i^2$，比例是 $B S^2 / \sum s_i^2$。先不看解答，判断这两个比例哪个大，以及结论是否对任何长度分布都成立（提示：每个 $s_i \le S$）；再对照解答，用{% if ex_own %}本场景{% else %}课程场景{% endif %}的长度核对。

# %% tags=["solution"]
s = np.asarray(lengths if ex_own else np.concatenate(ex_steps), dtype=np.float64)  # cut at S
linear_ratio = len(s) * ex_seq / s.sum()  # B S / sum(s_i) = S / s_mean
attention_ratio = len(s) * ex_seq**2 / np.sum(s**2)  # B S^2 / sum(s_i^2)
d.table([["线性层：S / s̄", d.times(linear_ratio)],
         ["注意力核心：B·S² / Σ s_i²", d.times(attention_ratio)]],
        ["完美 packing 省下的 FLOPs", "比例"], f"练习 1（{ex_lengths_zh}）")

# %% [markdown] tags=["solution"]
# 因为每个 $s_i \le S$，有 $s_i^2 \le S\,s_i$，求和得 $\sum s_i^2 \le S \sum s_i = S \cdot B\bar{s}$，于是 $B S^2 / \sum s_i^2 \ge B S^2 / (S B \bar{s}) = S/\bar{s}$：只要注意力也在 pad 上算，它被 packing 省下的比例永远不小于线性层的。两者相等当且仅当每个样本都恰好是 $S$ 长，那时两个比例都是 1，本来就没有 pad。直观地看，补齐把每个样本的注意力都算成最长样本的 $S^2$，而短样本真实的平方比它小得更多。上表是本场景长度下的两个数；数值上也总是第二个不小于第一个。

# %% [markdown] tags=["exercise"]
# ### 练习 2：一步至少要多少行？
#
# {% if not ex_own %}（同练习 1，用课程场景的长度。）{% endif %}把一步的样本按整个样本（不切开）装进 $S$ 长的行。先不看解答，写出行数的两个下界：一个来自 token 总数，一个来自长于 $S/2$ 的样本（为什么两个这样的样本不能同行？）。对本场景的长度，你猜哪个下界更紧？贪心装箱（first-fit decreasing）比它多用几行？

# %% tags=["solution"]
by_tokens = np.mean([np.ceil(step.sum() / ex_seq) for step in ex_steps])  # rows >= ceil(sum s_i / S)
by_long = np.mean([np.sum(step > ex_seq / 2) for step in ex_steps])  # one row per sample > S/2
bound = np.mean([max(np.ceil(step.sum() / ex_seq), np.sum(step > ex_seq / 2)) for step in ex_steps])
tie = bool(np.isclose(by_tokens, by_long))  # the two bounds agree
extra = ex_ffd["rows"] - bound  # rows greedy packing uses beyond the bound
d.table([["token 总数：⌈Σ s_i / S⌉", d.num(by_tokens, 1)],
         ["长于 S/2 的样本", d.num(by_long, 1)],
         ["下界：两者中较大的", d.num(bound, 1)],
         ["贪心首次适应递减", d.num(ex_ffd["rows"], 1)]],
        ["每步 S 长的行", "行数"],
        f"练习 2：{ex_over}，{'每个模拟步' if ex_n_sim < ex_n else '每步'} {d.num(ex_n_sim)} 个样本")

# %% [markdown] tags=["solution"]
# 每行最多装 $S$ 个 token，所以行数不少于 $\lceil \sum s_i / S \rceil$。两个长于 $S/2$ 的样本加起来超过 $S$，放不进同一行，所以每个这样的样本各占一行，行数不少于它们的个数。行数至少是两者中较大的那个；任何整样本的装法都不会低于它（最优装法也未必能达到），贪心的行数与它的差，就是贪心最多可能多用的行。
#
# 按{% if ex_own %}本场景的长度（{{ source_text }}）{% else %}{{ ex_source_text }}{% endif %}，{% if tie %}两个下界一样大{% elif by_tokens > by_long %}token 总数给出的下界更紧{% else %}长于 S/2 的样本给出的下界更紧{% endif %}；贪心装箱{% if extra > 1e-9 %}每步比下界多用 {{ extra|num(1) }} 行（{{ (extra / bound)|pct(1) }}）。{% else %}的行数正好等于下界，已经是最优。{% endif %}
