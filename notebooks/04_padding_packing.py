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
from costmodel.evaluate import packing
from costmodel.present import display as d

sc, acc = d.load(scenario_file, overrides)
pad = acc["padding"]
packed = pad["batching"] == "packed"  # the run already packs: no padding slots
padded = pad["slots"] > sc.tokens_per_step  # some slots hold padding
# Scaling the step time by the slots would push MFU past 100%: the inputs contradict the premise
# that every slot costs as much as a real token (the run cannot be padding them all).
beyond_peak = padded and pad["mfu_after_packing"] > 1
team = sc.lengths  # the team's lengths file (sequence_lengths), or None
conv = attention.convention_of(sc.attention_flops, "eager")  # the account's model count
quoted = course.figures()
d.md(f"场景：**{d.text(sc.name)}**：每步 {d.num(sc.samples_per_step)} 个样本，平均每个样本 "
     f"{d.count(sc.mean_tokens_per_sample)} 个真实 token"
     + ("（截断到序列长度后的均值，来自团队的长度文件 `sequence_lengths`）" if team is not None else "")
     + "，配置的序列长度（" + ("打包的行长，也是单个样本的截断长度" if packed else "补齐长度")
     + f"）为 {d.num(sc.seq_len)}。"
     + ("批处理方式是 `batching: packed`：样本已经首尾相接地装在一起。" if packed else "")
     + "下面的数字都按这个场景现算。")

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

# %% tags=["remove-input"]
if packed:
    d.table([
        ["batching", pad["batching"]],
        ["slots per step (= D)", d.num(pad["slots"])],
        ["real tokens per step D", d.count(sc.tokens_per_step)],
        ["useful fraction", d.pct(pad["useful_fraction"])],
        ["padding slots", d.pct(pad["waste_fraction"])],
        ["speedup left to packing", "none: already packed"],
        ["MFU", d.pct(acc["mfu"])],
    ], ["quantity", "value"], "Slot account of a packed run")
    d.md(f"本场景声明 `batching: packed`：数据已经 packing，一步计算的槽位就是 {d.count(sc.tokens_per_step)} "
         "个真实 token，没有 pad 槽位。定长补齐的那笔账（浪费、完美 packing 的提速）在这里不适用：没有可省的槽位，"
         f"步时（{d.num(sc.step_time, 1)} 秒）和 MFU（{d.pct(acc['mfu'])}）都不会因为 packing 再变。"
         "要核对这个声明，看日志里每步计入的 token 数是不是 $D$，以及注意力 kernel 是否拿到了 `cu_seqlens`。"
         "packing 之后剩下要看的是注意力：它应当按样本（文档）计算（varlen，正比于 $\\sum s_i^2$，而不是拼好的"
         "整行长度的平方，见第 3 节），同一行里的样本也不能互相看见（第 3、4 节）。")
else:
    rows = [
        ["slots per step B·S", d.num(pad["slots"])],
        ["real tokens per step D", d.count(sc.tokens_per_step)],
        ["useful fraction", d.pct(pad["useful_fraction"])],
        ["waste", d.pct(pad["waste_fraction"])],
    ]
    if padded:
        rows += [
            ["perfect-packing speedup", d.times(pad["packing_speedup"])],
            ["MFU now -> after packing" + (" (over 100%: impossible)" if beyond_peak else ""),
             f"{d.pct(acc['mfu'])} -> {d.pct(pad['mfu_after_packing'])}"],
            ["step time now -> after packing",
             f"{d.num(sc.step_time, 1)} s -> {d.num(pad['step_time_after_packing'], 1)} s"],
        ]
    else:
        rows += [
            ["perfect-packing speedup", "none: no pad slots"],
            ["MFU (unchanged by packing)", d.pct(acc["mfu"])],
            ["step time (unchanged by packing)", f"{d.num(sc.step_time, 1)} s"],
        ]
    d.table(rows, ["quantity", "value"], "Padding account (mean length)")
    logs = (f"日志里每步计入的 token 数若是 $D$ = {d.count(sc.tokens_per_step)}，说明按真实 token 计数（计算是否也只在"
            f"真实 token 上做，还要看注意力是否拿到 `cu_seqlens`）；若是 $B \\cdot S$ = {d.num(pad['slots'])}，"
            "就是在补齐。")
    if beyond_peak:
        gain = (f"本场景按均值有 **{d.pct(pad['waste_fraction'])}** 的槽位落在 pad 上；但按槽位比例缩短步时，"
                f"MFU 会从 {d.pct(acc['mfu'])} 升到 {d.pct(pad['mfu_after_packing'])}，超过 100%，不可能。"
                "也就是说，本场景的输入与这笔账的前提矛盾：若每个样本真补齐到 $S$、pad 也全额计算，硬件现在"
                "就已超过峰值。要么训练其实没有定长补齐（已经 packing，场景里写 `batching: packed`），"
                "要么步时、GPU 数或模型的输入需要核对；这里的提速不能当真。" + logs)
    elif padded:
        gain = (f"本场景有 **{d.pct(pad['waste_fraction'])}** 的槽位落在 pad 上；如果真在定长补齐，完美 "
                f"packing 能把每步从 {d.num(sc.step_time, 1)} 秒压到 "
                f"**{d.num(pad['step_time_after_packing'], 1)} 秒**"
                f"（{d.times(pad['packing_speedup'])}），MFU 从 {d.pct(acc['mfu'])} 升到 "
                f"{d.pct(pad['mfu_after_packing'])}。先确认补齐真实存在：" + logs)
    else:
        gain = (f"本场景的平均真实长度等于配置长度（{d.num(sc.seq_len)}）：每个样本都填满 $S$，定长补齐也没有"
                f" pad 槽位。这里没有 padding 可去，packing 不会改变步时（{d.num(sc.step_time, 1)} 秒）和 MFU"
                f"（{d.pct(acc['mfu'])}）。要核对的是这个前提：日志里每步计入的 token 数应当正好是 $B \\cdot S$ = "
                f"{d.num(pad['slots'])}，一个 batch 的 `attention_mask` 里没有 pad。若每个 $S$ 长的样本其实是几篇"
                "文档拼接后切出来的，数据就已经是 packing 了：该查的是注意力是否拿到了 `cu_seqlens`（否则同一行的"
                "文档互相看得见，见第 4 节），文档的真实长度也要用 `sequence_lengths` 另给。")
    d.md(gain)

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
if team is None:
    d.table([
        ["steps x samples per step", f"{n_steps} x {d.num(n_sim)}"],
        ["gamma shape (assumption)", d.num(packing.DEFAULT_SHAPE, 1)],
        ["tokens per step (every step)" if n_sim == n else "tokens per simulated step (every step)",
         d.num(int(steps[0].sum()))],
        ["mean length", d.num(float(lengths.mean()), 1)],
        ["median length", d.num(float(np.median(lengths)), 0)],
        ["samples at the cap S", d.pct(capped)],
        ["samples longer than S/2", d.pct(over_half)],
    ], ["synthetic lengths", "value"], "Synthetic sample lengths (seeded)")
    if n_sim < n:
        d.md(f"本场景每步有 {d.num(n)} 个样本，装箱模拟的耗时随样本数的平方增长，所以每步只模拟 "
             f"{d.num(n_sim)} 个样本（同样的均值和上限）。下面的比例（有效占比、提速、平方和之比、"
             "泄漏比例）直接用于本场景；行数与槽位数按模拟的样本数计，注意力 FLOPs 已按样本数换算回整步。"
             "样本越多，装箱越容易把行填满，所以贪心装箱的结果在本场景里只会更好一点。")
else:
    info = team.summary()
    d.table([
        ["lengths in the file", d.num(team.count)],
        ["reading", info["reading"]],
        ["mean length (cut at S)", d.num(team.mean, 1)],
        ["median length (cut at S)", d.num(float(np.median(lengths)), 0)],
        ["longest in the file", d.num(info["longest"])],
        ["samples longer than S (truncated)",
         f"{d.num(team.truncated_samples)} ({d.pct(team.truncated_samples / team.count)})"],
        ["tokens cut off by truncation", d.num(team.truncated_tokens)],
        ["samples at the cap S (after the cut)", d.pct(capped)],
        ["samples longer than S/2", d.pct(over_half)],
        ["steps packed below", "the file's one step" if source == "file step"
         else f"{n_steps} x {d.num(n_sim)} drawn from the file (seeded)"],
    ], ["team's lengths", "value"], "The team's sample lengths (sequence_lengths)")
    if team.exact_step:
        reading = (f"文件里正好有 samples_per_step = {d.num(n)} 个长度，按**一整步**读：$D$ 就是这一步截断后"
                   f"的长度之和（{d.count(sc.tokens_per_step)}），$\\sum s_i^2$ 也是这一步自己的。")
    else:
        reading = (f"文件里有 {d.num(team.count)} 个长度，不等于 samples_per_step（{d.num(n)}），按**一个分布**"
                   f"读：它的均值和平方均值按每步 {d.num(n)} 个样本缩放到一步"
                   f"（$D = B\\bar{{s}}$ = {d.count(sc.tokens_per_step)}）。")
    if source == "file draws":
        reading += (f"下面的装箱模拟从文件中有放回地抽样本（固定种子），{n_steps} 步、每步 {d.num(n_sim)} 个"
                    + ("（本场景每步的样本太多，装箱只模拟这么多个；比例直接用于本场景，注意力 FLOPs 已按样本数"
                       "换算回整步）" if n_sim < n else "") + "。")
    else:
        reading += "下面的装箱就装这一步。"
    if team.truncated_samples:
        cut = (f"文件里有 **{d.num(team.truncated_samples)}** 个样本长于 seq_len = {d.num(seq_len)}，被截断到 $S$，"
               f"一共截掉 {d.num(team.truncated_tokens)} 个 token")
        if not team.exact_step:
            cut += (f"（按一步 {d.num(n)} 个样本换算，每步约 {d.num(info['truncated_samples_per_step'], 1)} 个"
                    f"样本、{d.num(info['truncated_tokens_per_step'])} 个 token）")
        cut += "。截掉的 token 不参与训练，也不计入 $D$；均值和 $\\sum s_i^2$ 都按截断后的长度算。"
    else:
        cut = f"文件里没有长于 seq_len = {d.num(seq_len)} 的样本，没有截断。"
    d.md(reading + cut)

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
over = f"averaged over {n_steps} steps" if n_steps > 1 else "one step"
what = {"synthetic": "合成数据", "file step": "团队的这一步",
        "file draws": "从团队长度文件抽出的样本"}[source]
this = "本场景的" + what if source == "synthetic" else what
if packed:
    # rows per step are exercise 2's answer: shown in its solution, not here
    d.table([[label, d.num(v["slots"]), d.pct(v["useful_fraction"])]
             for label, v in (("perfect (the account: slots = D)", perfect),
                              ("greedy first-fit decreasing, whole samples", ffd))],
            ["packed layout", "slots per step", "useful fraction"],
            f"Packed rows of S tokens, {over}")
    if gain:
        rows_note = (f"{what}按 $S$ 长的行装；若打包器按整个样本贪心装箱（不切样本），行数会不会比 token 总数所需的多、"
                     "多几行，后面的练习会算"
                     + (f"，行尾还留着 {d.pct(1 - ffd['useful_fraction'])} 的 pad（账外的一点浪费，"
                        "首尾拼接后按行切开或 varlen 不分行则没有）" if ffd["useful_fraction"] < 1 else "")
                     + "。")
    elif team is None:
        rows_note = (f"按本场景，平均长度等于 $S$（{d.num(seq_len)}），每个样本都恰好 $S$ 长，各占一整行。"
                     "如果场景里的“样本”指的是拼好的行而不是文档，文档的真实长度就得另给"
                     "（`sequence_lengths`），第 3、4 节的 $\\sum s_i^2$ 和跨样本注意力才有意义。")
    else:
        rows_note = "文件里的样本截断后都是 $S$ 长，各占一整行。"
    d.md("本场景已经 packing，账上按完美 packing 记，没有 packing 收益可拿。"
         "长度分布在这里决定的是每行装几个样本，以及注意力的 $\\sum s_i^2$（第 3 节）。" + rows_note)
else:
    labels = {"fixed": "fixed padding", "ffd": "greedy first-fit decreasing", "perfect": "perfect"}
    # rows per step are exercise 2's answer: shown in its solution, not here
    layout_rows = [[labels[k], d.num(v["slots"]), d.pct(v["useful_fraction"]), d.times(v["speedup"])]
                   for k, v in ways.items()]
    if len({tuple(row[1:]) for row in layout_rows}) > 1:
        d.table(layout_rows, ["layout", "slots per step", "useful fraction", "speedup vs fixed"],
                f"Three layouts, {over}")
    else:  # every sample fills its row: the three layouts are one
        d.md(f"三种摆法（定长补齐、贪心装箱、完美 packing）在本场景完全相同：每步 {layout_rows[0][1]} 个槽位，"
             f"有效占比 {layout_rows[0][2]}，提速 {layout_rows[0][3]}。")
    same = d.times(perfect["speedup"]) == d.times(pad["packing_speedup"])
    if not gain:
        check = ""
    elif source == "synthetic" and same:
        check = (f"完美 packing 一行与按均值算的账完全一致（{d.times(perfect['speedup'])}），"
                 "这是合成数据的校验。")
    elif source == "synthetic":
        check = (f"完美 packing 一行是 {d.times(perfect['speedup'])}，按均值算的账是 "
                 f"{d.times(pad['packing_speedup'])}：合成数据每步的 token 数只能是整数"
                 f"（{d.num(int(steps[0].sum()))} 而不是 {d.num(n_sim * mean, 2)}），差别全在这次取整。")
    elif source == "file step":
        check = (f"完美 packing 一行与账上一致（{d.times(perfect['speedup'])}）：账上的 $D$ 就是这一步的长度之和。"
                 if same else
                 f"完美 packing 一行是 {d.times(perfect['speedup'])}，账上是 {d.times(pad['packing_speedup'])}。")
    else:
        drawn = float(np.mean(np.concatenate(steps)))
        check = (f"完美 packing 一行是 {d.times(perfect['speedup'])}，账上是 {d.times(pad['packing_speedup'])}"
                 f"（抽出的样本平均长 {d.num(drawn, 1)}，文件的均值是 {d.num(team.mean, 1)}"
                 + ("，两者只差抽样误差）。" if not same else "）。"))
    if gain:
        at_cap = ((f"合成长度中被截断的长文档；分布形状 `packing.DEFAULT_SHAPE` = {packing.DEFAULT_SHAPE:g} 是假设，"
                   "均值取场景的 `mean_tokens_per_sample`" + ("，不是团队的长度数据" if sc.changed else ""))
                  if team is None else
                  "含文件中被截断的样本" if team.truncated_samples else "文件里本来就是这么长")
        layout = (f"贪心装箱得到 **{d.times(ffd['speedup'])}**，拿到了完美 packing 收益的 **{d.pct(captured, 0)}**，"
                  f"剩余浪费 {d.pct(1 - ffd['useful_fraction'])}。"
                  + (f"长于 $S/2$ 的样本两两不能同行（本分布中占 {d.pct(over_half)}），每个都要独占一行，"
                     "这就给每步的行数定了一个下界（后面的练习会把它算出来）；其余的空隙靠短样本填。"
                     if over_half > 0 else
                     "本分布中没有长于 $S/2$ 的样本，行数只取决于短样本把每行填得多满。")
                  + (f"另有 {d.pct(capped)} 的{'合成' if team is None else ''}样本顶到了 $S$（{at_cap}），它们自成一行、没有空隙可填。"
                     if capped > 0 else ""))
    else:
        layout = (("合成样本" if team is None else "文件里的样本（截断后）")
                  + f"全都顶到了 $S$，三种摆法的槽位一样多（每步 {d.num(perfect['slots'])}）：没有空隙，"
                  "装箱无从省起，与按均值算的账一致。")
    d.md(check + layout)

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
rows = [] if packed else [["padded: every sample at S", "B · S²", d.sci(att_padded)]]
rows += [
    ["packed rows, plain causal mask (wrong)", "rows · S²", d.sci(att_rows)],
    ["account 'actual': mean length" if team is None else "mean length only (course's reading)",
     "B · s̄²", d.sci(att_mean)],
    ["block-diagonal over real lengths" if team is None else "block-diagonal, the file (account)",
     "Σ s_i²", d.sci(att_sq)],
]
d.table(rows, ["attention core per step", "grows as", f"FLOPs ({conv} convention)"],
        "Attention-core FLOPs per step (same convention as the account)")
equal = bool(np.all(lengths == lengths[0]))  # sum(s^2) = n mean^2 exactly
if equal:
    spread = (f"本场景的{'合成样本' if team is None else '样本（截断后）'}全都等长（{d.num(int(lengths[0]))}），"
              "$\\sum s_i^2$ 恰好等于 $n\\bar{s}^2$："
              f"按均值算的注意力 FLOPs（{d.sci(att_mean)}）没有少算。分布越散，均值低估得越多。")
elif team is None:
    spread = (f"本场景合成分布下 $\\sum s_i^2$ 是 $n\\bar{{s}}^2$ 的 **{d.num(ratio, 3)} 倍**：账上按均值算的注意力 "
              f"FLOPs（{d.sci(att_mean)}）少算了，按真实长度是 {d.sci(att_sq)}，比它多 **{d.pct(ratio - 1, 1)}**。"
              "分布越散，差得越多；只有所有样本等长时两者才相等。")
else:
    spread = (f"团队的长度下，每步 $\\sum s_i^2$ = {d.sci(actual['sum_squared_lengths'])}，而课程的近似 "
              f"$B\\bar{{s}}^2$ = {d.sci(n * mean**2)}：前者是后者的 **{d.num(ratio, 3)} 倍**。按均值算的注意力 "
              f"FLOPs（{d.sci(att_mean)}）少算了，真实值 {d.sci(att_sq)} 比它多 **{d.pct(ratio - 1, 1)}**"
              f"（$B\\bar{{s}}^2$ 只有真实值的 {d.pct(1 / ratio, 1)}）。差的正是方差那一项，"
              "$B\\bar{s}^2$ 永远不会高估；账上用的已经是文件的 $\\sum s_i^2$。")
if packed and shared:
    rows_text = ("本场景已经 packing：注意力应当按样本算（varlen / 块对角，`cu_seqlens`），即上表 $\\sum s_i^2$ "
                 f"一行。若拼好的行（这里按上面的贪心装箱成行）交给不带文档掩码的普通因果 kernel，注意力按整行的平方算"
                 f"（{d.sci(att_rows)}，是 $\\sum s_i^2$ 的 {d.times(att_rows / att_sq)}），既多算，又让样本互相看见"
                 "（见下一节）。")
elif shared:
    rows_text = (f"反过来，装箱后若仍用整行的普通因果掩码，注意力按行长的平方算（{d.sci(att_rows)}），"
                 "既多算，又让样本互相看见（见下一节）。")
elif att_rows > att_sq * (1 + 1e-9):
    rows_text = (f"本分布装箱后每行只有一个样本，普通因果掩码不会让样本互相看见；但按整行长度的平方算"
                 f"（{d.sci(att_rows)}），行尾 pad 上的注意力仍被多算。")
else:
    rows_text = "本分布下每个样本都独占一整行且填满，普通因果掩码与块对角掩码没有区别。"
d.md(spread + rows_text)

# %% [markdown]
# 所以只知道均值时，$B\bar{s}^2$ 是注意力的下限估计，要用真实长度的平方和（场景的 `sequence_lengths` 文件，或者从 `cu_seqlens` 直接算）才准；给了长度文件，账上的“actual”一行用的就是文件的 $\sum s_i^2$。若定长补齐真实存在，而注意力也在 pad 上整块计算（没有 varlen），packing 还会把注意力从 $B S^2$ 降到 $\sum s_i^2$。下面把这部分也算进 packing 省下的 FLOPs；注意力这一项单独的比例与线性层的比例谁大，留作本节末的练习 1。

# %% tags=["remove-input"]
if packed:
    d.md("本场景已经 packing（`batching: packed`），这里没有可省的：线性层没有 pad 槽位，注意力在 varlen "
         "下也已按 $\\sum s_i^2$ 计。")
elif not padded:
    d.md("本场景没有 pad 槽位（每个样本都填满 $S$），注意力的 $B S^2$ 也就等于 $\\sum s_i^2$：线性层和注意力"
         "都没有可省的 FLOPs。")
else:
    linear_padded = acc["model_flops_per_step"] * pad["packing_speedup"]
    flop_speedup_mean = (linear_padded + att_padded) / (acc["model_flops_per_step"] + att_mean)
    flop_speedup_sq = (linear_padded + att_padded) / (acc["model_flops_per_step"] + att_sq)
    d.table([
        ["linear layers only (the account)", d.times(pad["packing_speedup"])],
        ["with attention, mean length", d.times(flop_speedup_mean)],
        ["with attention, Σ s_i²", d.times(flop_speedup_sq)],
    ], ["FLOPs removed by perfect packing, if attention also ran on pads", "FLOP ratio"],
        "Packing gain counting the attention core")
    d.md(f"只算线性层（课程的做法）时，packing 前后的 FLOPs 之比是 {d.times(pad['packing_speedup'])}；若注意力也在 pad "
         f"上整块算，按真实长度的 $\\sum s_i^2$ 算是 {d.times(flop_speedup_sq)}。这是 FLOPs 之比，不是步时之比："
         "若补齐时注意力已经按真实长度算（varlen），能省的只有线性层那一份，而且步时里不随槽位变的部分越多，"
         "实际提速越小。")

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
d.md(f"`cu_seqlens = {packing.cu_seqlens(tiny)}`")
d.table([[t, "ABC"[ids[t]], t, pos[t], loss[t]] for t in range(sum(tiny))],
        ["token", "sample", "naive position", "position_ids (reset)", "loss mask"],
        "A packed row of 3 samples (lengths 3, 2, 4)")
block = packing.block_causal_mask(tiny)
d.table([[f"q{i}", *row] for i, row in enumerate(block.tolist())],
        ["query \\ key", *[f"k{j}" for j in range(sum(tiny))]],
        "Block-diagonal causal mask (1 = may attend)")

# %% [markdown]
# 如果忘了块对角、只用整行的普通因果掩码，每个 token 会看到排在它前面的**所有**样本。跨样本的 (query, key) 对数可以直接推出来：整行的对数减去各样本内部的对数。

# %%
l1, l2, l3 = sp.symbols("l_1 l_2 l_3", positive=True)
total = l1 + l2 + l3
cross = sp.expand((total * (total + 1) - sum(x * (x + 1) for x in (l1, l2, l3))) / 2)
d.eq(r"\text{cross-sample pairs}", cross, cross.subs(dict(zip((l1, l2, l3), tiny))))
plain = packing.causal_mask(sum(tiny))
leaks = packing.cross_sample_pairs(tiny)

# %% tags=["remove-input"]
d.md(f"这一行里普通因果掩码允许 {int(plain.sum())} 对，块对角只允许 {int(block.sum())} 对，"
     f"多出的 **{leaks}** 对全是跨样本的泄漏（占 {d.pct(leaks / plain.sum(), 1)}）。")

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
# 放到本场景的规模上：把上面的长度（合成的，或团队文件里的）按贪心装箱的结果拿来，看普通因果掩码会放进多少跨样本的注意力对。

# %%
all_bins = [row for step in steps for row in packing.greedy_pack([int(x) for x in step], seq_len)]
share_leak = packing.cross_sample_share(all_bins)  # causal pairs that cross a sample boundary
shared_rows = sum(len(row) > 1 for row in all_bins) / len(all_bins)  # rows with 2+ samples

# %% tags=["remove-input"]
if share_leak > 0:
    d.md(f"{what}装箱后，**{d.pct(shared_rows, 1)}** 的行里不止一个样本；若只用普通因果掩码，全部行的"
         f"因果注意力对中有 **{d.pct(share_leak, 1)}** 跨越了样本边界。"
         + ("本场景已经 packing，这正是剩下要查的：kernel 是否拿到了样本边界（`cu_seqlens`）。" if packed else "")
         + "这种错误不会让训练崩溃，loss 看上去也正常，模型却在学不存在的跨样本关联，所以三件事都要逐条验证。")
else:
    d.md(f"{this}装箱后，每一行都只有一个样本，普通因果掩码在这里碰巧不会跨样本泄漏。"
         "但只要有一行装进了两个样本，泄漏就会出现，而且不会让训练崩溃、loss 看上去也正常，"
         "所以三件事仍要逐条验证。")

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
lengths_en = "synthetic lengths" if team is None else "the team's lengths"
after_mfu, after_step = pad["mfu_after_packing"], pad["step_time_after_packing"]
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
     d.times(pad["packing_speedup"]) if padded else "没有（无 pad 可去）",
     judge("packing_speedup", pad["packing_speedup"], d.times(pad["packing_speedup"]),
           (no_pad + "，packing 没有提速可拿") if no_pad else f"提速是 S/s̄，{ratio_text}",
           f"。这是完美 packing、只算线性层槽位的上限；按整个样本贪心装箱是 {d.times(ffd['speedup'])}"
           f"（{lengths_from}）" if padded else "", quiet=not padded)],
    ["完美 packing 后的 MFU（6ND 口径）：" + cite("nb04_mfu_after_packing"),
     f"{d.pct(acc['mfu'])} → {d.pct(after_mfu)}" if padded else f"{d.pct(acc['mfu'])}（不变）",
     judge("nb04_mfu_after_packing", after_mfu, d.pct(after_mfu),
           "超过 100%，不可能：输入与“pad 全额计算”的前提矛盾，先核对是否真在补齐" if beyond_peak else
           (no_pad + f"，MFU 仍是 {d.pct(acc['mfu'])}") if no_pad else
           f"MFU {d.pct(acc['mfu'])} 乘以提速 {d.times(pad['packing_speedup'])}",
           f"；{no_pad}，这就是它现在的 MFU"
           if no_pad and course.agrees(after_mfu, "nb04_mfu_after_packing") else "", quiet=not padded)],
    ["完美 packing 后的单步耗时：" + cite("nb04_step_after_packing"),
     f"{d.num(sc.step_time, 1)} → {d.num(after_step, 3)} 秒" if padded
     else f"{d.num(sc.step_time, 1)} 秒（不变）",
     judge("nb04_step_after_packing", after_step, f"{d.num(after_step, 3 if padded else 1)} 秒",
           (no_pad + f"，步时仍是 {d.num(sc.step_time, 1)} 秒") if no_pad else
           f"步时 {d.num(sc.step_time, 1)} 秒除以提速 {d.times(pad['packing_speedup'])}",
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
               "前向、反向都不报错，只能靠检查掩码和 cu_seqlens 发现" + ("" if share_leak > 0 else "。本场景装箱后碰巧没有同行的样本，换一批数据就会泄漏"))],
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

# %% tags=["remove-input"]
source_text = {"synthetic": "合成长度分布", "file step": "团队的这一步",
               "file draws": "团队的长度分布"}[source]
if packed:
    first = "- 本场景已经 packing（`batching: packed`）：没有 pad 槽位，定长补齐的浪费与 packing 的提速都不适用。"
    second = ((f"- 在{source_text}上按 {d.num(seq_len)} token 的行贪心装箱，{d.pct(shared_rows, 1)} 的行里不止一个样本："
               "注意力要按样本算（varlen），不是按整行。") if shared_rows > 0 else
              f"- 在{source_text}上按 {d.num(seq_len)} token 的行贪心装箱，每行只有一个样本。")
elif beyond_peak:
    first = (f"- 按均值算：定长补齐时有 **{d.pct(pad['waste_fraction'])}** 的槽位是 pad，但本场景按比例 packing 后的 "
             f"MFU 会是 {d.pct(pad['mfu_after_packing'])}，超过 100%：它的输入与“pad 全额计算”的前提矛盾，"
             "先核对是否真在补齐。")
elif padded:
    first = (f"- 按均值算：定长补齐浪费 **{d.pct(pad['waste_fraction'])}** 的槽位，完美 packing 提速 "
             f"**{d.times(pad['packing_speedup'])}**（每步 {d.num(sc.step_time, 1)} 秒 → "
             f"{d.num(pad['step_time_after_packing'], 1)} 秒），前提是补齐真实存在，先量再做。")
else:
    first = ("- 按均值算：本场景的平均长度等于配置长度，没有 pad 槽位，packing 不改变步时和 MFU；要核对的是 batch 里"
             "确实没有 pad，以及每行若由几篇文档拼成，注意力是否拿到了 `cu_seqlens`。")
if not packed:
    second = ((f"- 在{source_text}上，贪心装箱进 {d.num(seq_len)} token 的行得到 **{d.times(ffd['speedup'])}**，"
               f"约为完美 packing 收益的 {d.pct(captured, 0)}。") if gain else
              f"- {'合成样本' if team is None else '文件里的样本'}全都顶到配置长度，装箱没有可省的槽位。")
third = ((f"- 注意力按 $\\sum s_i^2$ 计；本分布的样本全都等长，均值没有低估它（{d.num(ratio, 3)} 倍）。" if equal else
          f"- 注意力按 $\\sum s_i^2$ 计，均值低估了它：本分布下是 **{d.num(ratio, 3)}** 倍。") if team is None else
         f"- 注意力按 $\\sum s_i^2$ 计：团队的长度下它是 $B\\bar{{s}}^2$ 的 **{d.num(ratio, 3)}** 倍"
         + (f"，文件里 {d.num(team.truncated_samples)} 个样本被截断到 {d.num(seq_len)}。" if team.truncated_samples
            else "。"))
d.md("\n".join([
    first,
    second,
    third,
    "- 正确的 packing 要块对角注意力（`cu_seqlens`）、按样本重置的位置编号和边界处的 loss mask；"
    + (f"否则 {d.pct(share_leak, 1)} 的注意力对会跨样本泄漏。" if share_leak > 0 else
       f"{this}装箱后碰巧没有同行的样本，但换一批数据就会泄漏。"),
]))

# %% [markdown] tags=["exercise"]
# ### 练习 1：注意力也在 pad 上算时，packing 省得更多还是更少？
#
# 假设定长补齐时注意力也在 pad 上整块计算（没有 varlen）。packing 把线性层的槽位从 $B S$ 降到 $B\bar{s}$，比例是 $S/\bar{s}$；把注意力核心从 $B S^2$ 降到 $\sum s_i^2$，比例是 $B S^2 / \sum s_i^2$。先不看解答，判断这两个比例哪个大，以及结论是否对任何长度分布都成立（提示：每个 $s_i \le S$）；再对照解答，用本场景的长度核对。

# %% tags=["solution"]
s = np.asarray(lengths, dtype=np.float64)  # the lengths used above (cut at S)
linear_ratio = len(s) * seq_len / s.sum()  # B S / sum(s_i) = S / s_mean
attention_ratio = len(s) * seq_len**2 / np.sum(s**2)  # B S^2 / sum(s_i^2)
d.table([["linear layers: S / s̄", d.times(linear_ratio)],
         ["attention core: B·S² / Σ s_i²", d.times(attention_ratio)]],
        ["FLOPs removed by perfect packing", "ratio"], f"Exercise 1, {lengths_en}")

# %% [markdown] tags=["solution"]
# 因为每个 $s_i \le S$，有 $s_i^2 \le S\,s_i$，求和得 $\sum s_i^2 \le S \sum s_i = S \cdot B\bar{s}$，于是 $B S^2 / \sum s_i^2 \ge B S^2 / (S B \bar{s}) = S/\bar{s}$：只要注意力也在 pad 上算，它被 packing 省下的比例永远不小于线性层的。两者相等当且仅当每个样本都恰好是 $S$ 长，那时两个比例都是 1，本来就没有 pad。直观地看，补齐把每个样本的注意力都算成最长样本的 $S^2$，而短样本真实的平方比它小得更多。上表是本场景长度下的两个数；数值上也总是第二个不小于第一个。

# %% [markdown] tags=["exercise"]
# ### 练习 2：一步至少要多少行？
#
# 把一步的样本按整个样本（不切开）装进 $S$ 长的行。先不看解答，写出行数的两个下界：一个来自 token 总数，一个来自长于 $S/2$ 的样本（为什么两个这样的样本不能同行？）。对本场景的长度，你猜哪个下界更紧？贪心装箱（first-fit decreasing）比它多用几行？

# %% tags=["solution"]
by_tokens = np.mean([np.ceil(step.sum() / seq_len) for step in steps])  # rows >= ceil(sum s_i / S)
by_long = np.mean([np.sum(step > seq_len / 2) for step in steps])  # one row per sample > S/2
bound = np.mean([max(np.ceil(step.sum() / seq_len), np.sum(step > seq_len / 2)) for step in steps])
d.table([["tokens: ⌈Σ s_i / S⌉", d.num(by_tokens, 1)],
         ["samples longer than S/2", d.num(by_long, 1)],
         ["lower bound: the larger of the two", d.num(bound, 1)],
         ["greedy first-fit decreasing", d.num(ffd["rows"], 1)]],
        ["rows of S per step", "rows"], f"Exercise 2: {over}, {d.num(n_sim)} samples per "
        + ("simulated step" if n_sim < n else "step"))

# %% [markdown] tags=["solution"]
# 每行最多装 $S$ 个 token，所以行数不少于 $\lceil \sum s_i / S \rceil$。两个长于 $S/2$ 的样本加起来超过 $S$，放不进同一行，所以每个这样的样本各占一行，行数不少于它们的个数。行数至少是两者中较大的那个；任何整样本的装法都不会低于它（最优装法也未必能达到），贪心的行数与它的差，就是贪心最多可能多用的行。

# %% tags=["solution", "remove-input"]
tighter = ("两个下界一样大" if np.isclose(by_tokens, by_long) else
           "token 总数给出的下界更紧" if by_tokens > by_long else "长于 S/2 的样本给出的下界更紧")
extra = ffd["rows"] - bound
d.md(f"按本场景的长度（{source_text}），{tighter}；贪心装箱"
     + (f"每步比下界多用 {d.num(extra, 1)} 行（{d.pct(extra / bound, 1)}）。" if extra > 1e-9
        else "的行数正好等于下界，已经是最优。"))
