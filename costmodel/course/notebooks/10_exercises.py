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
# # 10 思考题：两道练习的完整解答
#
# 课程这一节最后留了两道思考题。这里按前面各节的方法把它们完整算一遍，数字全部来自当前场景：
#
# 1. 假设 packing 做成了（完美 packing），重算一遍账：单步耗时、集群吞吐、MFU，以及整个训练要跑多久。
# 2. packing 和 selective recompute 同时做：两者的收益是相乘还是相加，合起来单步多快，
#    之后的瓶颈会落在哪里。
#
# 课程没有给出的输入（训练现在跑多久、通信占多少时间）如今是场景的键：`training_hours`（课程的
# “跑一夜”读成的小时数）和 `communication_share`（团队实测的通信份额；不给时用账里按并行布局估出的
# 份额）。用到它们的地方都写明值从哪里来；值是课程的假设时，写明该设置哪个键换成你的实际值。
# 最后，按本次运行排好的杠杆（`acc["advice"]`）回答“先做什么”：包括 selective recompute 在显存里放不放得下。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %%
import sympy as sp

from costmodel.evaluate import gemms
from costmodel.evaluate.run import memory as gpu_memory
from costmodel.present import display as d
from costmodel.derive import exercises as x
from costmodel.derive import levers, padding, recompute, roofline
from costmodel.derive.symbols import D, T, m

sc, acc = d.load(scenario_file, overrides)
pad, proj = acc["padding"], acc["projections"]
source = {key: a["source"] for key, a in acc["assumptions"].items()}
by_lever = {a["lever"]: a for a in acc["advice"]}


def origin(key):
    """Where the value of `key` comes from, with the key to set when it is the course's."""
    if source.get(key) == "course":
        return f"按课程假设；设置 `{key}` 可改为你的实际值"
    return f"场景的 `{key}`"


d.md(f"场景：**{d.text(sc['name'])}**。现在每步 {sc['step_time']:g} s，MFU {d.pct(acc['mfu'])}，"
     f"HFU {d.pct(acc['hfu'])}，recompute = {sc['recompute']}。")

# %% [markdown]
# ## 思考题 1：packing 做成之后的账
#
# 完美 packing 把样本首尾相接地装进定长的序列里，不再有 pad token。按课程的模型，单步耗时正比于
# 算过的 token 槽位数：定长补齐时每步算 B·S 个槽位，packing 之后只算 D 个真实 token，
# 提速就是两者之比。前提是现在**确实**在做定长 padding；如果已经开了 packing 或 varlen，
# 这份收益不存在（见第 04 节）。

# %%
g_pack = pad["packing_speedup"]
t_pack = pad["step_time_after_packing"]
tok_pack = sc["tokens_per_step"] / t_pack
d.eq(r"g_{\mathrm{pack}}", padding.packing_speedup,
     rf"\frac{{{d.num(pad['slots']).replace(',', '{,}')}}}"
     rf"{{{d.count(sc['tokens_per_step']).replace(',', '{,}')}}}", f"{g_pack:.3f}")
d.eq(r"T'", padding.step_time_after_packing, rf"{t_pack:.1f}\ \mathrm{{s}}")
d.eq(r"\tau'", D / sp.Symbol("T'"), rf"{d.num(tok_pack).replace(',', '{,}')}\ \mathrm{{tok/s}}")
d.eq(r"\mathrm{MFU}'", padding.mfu_after_packing, d.pct(pad["mfu_after_packing"]))

# %%
hfu_pack = acc["hfu"] * g_pack
rows = [
    ("(a) 单步耗时", f"{sc['step_time']:.1f} s", f"{t_pack:.1f} s"),
    ("(b) 集群吞吐（真实 token）", f"{d.num(acc['tokens_per_s'])} tok/s", f"{d.num(tok_pack)} tok/s"),
    ("    单卡吞吐", f"{d.num(acc['tokens_per_s_per_gpu'], 1)} tok/s",
     f"{d.num(tok_pack / sc['num_gpus'], 1)} tok/s"),
    ("(c) MFU（6ND 口径）", d.pct(acc["mfu"]), d.pct(pad["mfu_after_packing"])),
    ("    HFU", d.pct(acc["hfu"]), d.pct(hfu_pack)),
]
d.table(rows, ["量", "现在", "完美 packing 之后"], "Exercise 1 (a)-(c): the account after perfect packing")
packed = pad["batching"] == "packed"
padded = not packed and pad["slots"] > sc["tokens_per_step"]  # some slots hold padding
if padded:
    text = (f"每步要算的槽位从 {d.num(pad['slots'])} 降到 {d.count(sc['tokens_per_step'])}，"
            f"提速 **{d.times(g_pack)}**：单步从 {sc['step_time']:g} s 变成 **{t_pack:.1f} s**，"
            f"集群吞吐从 {d.num(acc['tokens_per_s'])} 升到 **{d.num(tok_pack)} tok/s**，"
            f"MFU 从 {d.pct(acc['mfu'])} 升到 **{d.pct(pad['mfu_after_packing'])}**。"
            "注意 MFU 的分子（6ND）没有变：变的只是耗时。pad token 上的运算本来就不计入 MFU，"
            "它们只是把时间拉长了。")
    if hfu_pack > 1:
        text += (f"但这里 HFU 会到 {d.pct(hfu_pack)}，超过 100%，不可能：HFU 只数真实 token，若 pad 槽位"
                 "现在也真的在算，GPU 现在就已经超过峰值了。所以本场景的“定长补齐”前提站不住"
                 "（也许已在 packing 或 varlen），或 `step_time` 等输入需要核对；上表的“之后”一列不能当真。")
elif packed:
    text = (f"本场景已经在做 packing（`batching: packed`）：每步的 {d.num(pad['slots'])} 个槽位全是真实 "
            f"token，没有 pad 可省。完美 packing 的提速是 {d.times(g_pack)}，单步仍是 {sc['step_time']:g} s，"
            f"MFU 仍是 {d.pct(acc['mfu'])}；下面 (d) 的训练时长也不变。")
else:
    text = (f"本场景的平均真实长度等于配置长度：每步的 {d.num(pad['slots'])} 个槽位全是真实 token，"
            f"没有 pad 可省。完美 packing 的提速是 {d.times(g_pack)}，单步仍是 {sc['step_time']:g} s，"
            f"MFU 仍是 {d.pct(acc['mfu'])}；下面 (d) 的训练时长也不变。")
d.md(text)

# %% [markdown]
# ### (d) 整个训练要跑多久
#
# 课程只说“2 个 epoch 跑一夜”，没有给数据集大小，也没有给现在的墙钟时间。场景的 `training_hours`
# 键把“一夜”读成一个具体的小时数；课程场景里它是课程的假设，换成你们日志里的真实时长即可。

# %%
current_run_hours = sc["training_hours"]  # the course's "overnight" unless the scenario sets it
epochs = 2  # the course's run: two epochs

# %%
run = x.run_after(current_run_hours, sc["step_time"], sc["tokens_per_step"], g_pack)
d.eq(r"H'", x.run_hours_after.subs(x.g, sp.Symbol(r"g_{\mathrm{pack}}")),
     rf"\frac{{{current_run_hours:g}\ \mathrm{{h}}}}{{{g_pack:.3f}}}",
     rf"{run['hours_after']:.1f}\ \mathrm{{h}}")
samples_per_epoch = run["steps"] * sc["samples_per_step"] / epochs
d.md(f"步数不变，墙钟时间就按单步耗时等比缩短：现在要 **{current_run_hours:g} 小时**"
     f"（{origin('training_hours')}），"
     + (f"packing 之后约 **{run['hours_after']:.1f} 小时**，省下 "
        f"{current_run_hours - run['hours_after']:.1f} 小时。" if padded else
        "没有 pad 时 packing 不缩短单步，训练时长不变。")
     + f"这个时长同时意味着：整个训练约 {d.num(run['steps'])} 步、{d.sci(run['tokens'])} 个真实 token，"
     f"每个 epoch 约 {d.num(samples_per_epoch)} 个样本；如果这与你们的数据量对不上，"
     "说明 `training_hours` 该改了。")

# %% [markdown]
# 课程方法之外的一点提醒：上面的提速只看槽位数，也就是只看与参数成正比的那部分运算。
# 注意力核（6ND 漏掉的 s² 项）在定长补齐时每条序列按 S² 算，packing 并配合块对角注意力后只按
# 每个样本自己的长度算（$\sum s_i^2 \le S \cdot D$），降得不比槽位数少。把它也放进耗时，提速只会更大，
# 不会更小。注意力的 FLOPs 取自账本，按场景的 `attention_flops` 口径数（全方阵，或 causal 只数半个方阵）；
# 模型若有线性注意力层，它的核与 token 数成正比，按槽位一起缩短。

# %%
att = acc["attention"]
linear = acc["linear_attention"]
f_lin = (linear or {}).get("flops_per_step") or 0.0
square = {"full": "全方阵 s×s，课程的口径",
          "causal": "causal 只数半个方阵，Megatron-LM 的口径"}[att["attention_flops"]]
if sc.lengths is None:
    actual_text = f"平均长度 {d.count(sc['mean_tokens_per_sample'])}，Σs² 取 B·s̄²"
elif sc.lengths.exact_step:
    actual_text = "长度文件里这一步的真实长度，Σs_i²"
else:
    actual_text = "长度文件的分布，Σs_i² 取均方长度 × 每步样本数"
if padded:
    before = (acc["model_flops_per_step"] + f_lin) * g_pack + att["padded"]["flops_per_step"]
    after_packing = acc["model_flops_per_step"] + f_lin + att["actual"]["flops_per_step"]
    g_with_attention = before / after_packing
    text = ("若耗时正比于“权重矩阵乘 FLOPs（6ND）+ 注意力核 FLOPs"
            + (" + 线性注意力核 FLOPs" if f_lin else "")
            + f"”，注意力按{' ' if square[0].isascii() else ''}{square}，模型 FLOPs 记前向 × 3；"
            f"packing 前每条序列按 S = {d.num(sc['seq_len'])}，"
            f"packing 后按{actual_text}。这样算，提速是 **{d.times(g_with_attention)}**，而不是只看槽位的 "
            f"{d.times(g_pack)}。")
    if sc.lengths is None:
        text += "平均长度会低估 Σs²（第 04 节），所以这个数偏乐观；真实收益介于两者之间，要实测才知道。"
    else:
        text += "耗时是否真的正比于 FLOPs（注意力 kernel 的效率通常低于大 GEMM），要实测才知道。"
    if linear is not None and linear["flops_per_step"] is None:
        text += f"模型的 {linear['layers']} 层线性注意力缺少头宽，它的核没有计入。"
elif packed:
    g_with_attention = 1.0
    text = ("本场景已经在做 packing：注意力本来就按每个样本自己的长度算（Σs_i²），没有 pad 可省，"
            f"把它放进耗时也还是 {d.times(g_with_attention)}。")
else:
    g_with_attention = 1.0
    text = ("本场景没有 pad：每个样本都是满长 S，注意力核在 packing 前后一样，"
            f"把它放进耗时也还是 {d.times(g_with_attention)}。")
d.md(text)

# %% [markdown]
# ## 思考题 2：packing + selective recompute
#
# ### (a) 相乘还是相加
#
# 单步的计算时间可以写成“算多少个槽位 × 每个槽位硬件要做多少 FLOPs ÷ 实际算力”。packing 改的是
# 第一个因子（B·S → D），recompute 策略改的是第二个（系数 f：full 的 4/3 → selective 的 f_new）。
# 两个因子各自缩小，乘积就按两者之积缩小，所以收益**相乘**。SymPy 直接从这个式子推出来：

# %%
slots_symbol, factor_symbol = sp.Symbol(r"\mathrm{slots}"), sp.Symbol("f")
d.eq(r"C(\mathrm{slots}, f)", x.compute_time(slots_symbol, factor_symbol))
d.eq(r"\frac{C(BS,\ f_{now})}{C(D,\ f_{new})}", x.combined_speedup_derived,
     r"g_{\mathrm{pack}} \cdot g_{\mathrm{rc}}")
d.eq(r"g_1 g_2 - \left(1 + (g_1 - 1) + (g_2 - 1)\right)",
     sp.factor(x.combined_multiply - x.combined_add))

# %%
f_now = recompute.factor(sc["recompute"], sc["selective_recompute_fraction"])
f_sel = recompute.factor("selective", sc["selective_recompute_fraction"])
g_rc = proj["selective_recompute"]["speedup"]
g_both = proj["packing_and_selective_recompute"]["speedup"]
g_add = float(x.combined_add.subs({x.g_1: g_pack, x.g_2: g_rc}))
d.eq(r"g_{\mathrm{rc}}", sp.Symbol(r"f_{now}") / sp.Symbol(r"f_{new}"),
     rf"\frac{{{sp.latex(f_now)}}}{{{sp.latex(f_sel)}}}", f"{g_rc:.3f}")
d.table([
    ("packing", d.times(g_pack, 3)),
    ("selective recompute", d.times(g_rc, 3)),
    ("相乘（正确）", d.times(g_both, 3)),
    ("相加（错误）", d.times(g_add, 3)),
], ["组合", "提速"], "Exercise 2 (a): combining the two speedups")

# %%
if sc["recompute"] == "full":
    rc_text = (f"本场景是 full recompute（系数 {f_now}）；腾出显存后换成 selective（重算前向的 "
               f"{d.pct(sc['selective_recompute_fraction'], 0)}，{origin('selective_recompute_fraction')}；"
               f"系数 {f_sel}），提速 {d.times(g_rc)}。")
elif sc["recompute"] == "selective":
    rc_text = (f"本场景已经是 selective recompute（系数 {f_now}），换成 selective 没有新的收益："
               f"这一项是 {d.times(g_rc)}，组合后只剩 packing 的收益。")
else:
    rc_text = ("本场景没有开 recompute（系数 1），selective recompute 只会多做运算，不会提速："
               f"这一项记为 {d.times(g_rc)}，组合后只剩 packing 的收益。")
if g_rc > 1 and g_pack > 1:
    combine_text = (f" 两者相乘得 **{d.times(g_both)}**；把收益相加（1 + {g_pack - 1:.2f} + "
                    f"{g_rc - 1:.2f}）只有 {d.times(g_add)}，少算的正是两份收益的交叉项 (g₁−1)(g₂−1)："
                    "packing 之后剩下的每个槽位，仍然享受 recompute 省下的那部分。")
else:
    combine_text = (f" 有一项是 1×，交叉项 (g₁−1)(g₂−1) 为零，相乘与相加都得 {d.times(g_both)}；"
                    "两项都大于 1 时，相加会少算这个交叉项。")
d.md(rc_text + combine_text
     + "相加只在两项改动各自砍掉互不相干的一段时间时才对（比如一项省通信、一项省计算）。")

# %% [markdown]
# ### (b) 合起来单步多快

# %%
t_both = proj["packing_and_selective_recompute"]["step_time"]
mfu_both = proj["packing_and_selective_recompute"]["mfu"]
hfu_both = mfu_both * float(f_sel if sc["recompute"] == "full" else f_now)
d.eq(r"T''", T / sp.Symbol(r"g_{\mathrm{pack}} g_{\mathrm{rc}}"),
     rf"\frac{{{sc['step_time']:g}\ \mathrm{{s}}}}{{{g_both:.3f}}}", rf"{t_both:.1f}\ \mathrm{{s}}")
d.md((f"单步从 {sc['step_time']:g} s 变成 **{t_both:.1f} s**，MFU 变成 **{d.pct(mfu_both)}**"
      f"（HFU {d.pct(hfu_both)}），按前面的 {current_run_hours:g} 小时，训练缩到约 "
      f"**{current_run_hours / g_both:.1f} 小时**。" if g_both > 1 else
      f"两项都没有收益：单步仍是 {sc['step_time']:g} s，MFU 仍是 {d.pct(mfu_both)}"
      f"（HFU {d.pct(hfu_both)}），训练仍约 {current_run_hours:g} 小时。")
     + (f"HFU 与只做 packing 时相同（{d.pct(hfu_pack)}）：selective recompute 的提速全部来自"
        "少做的重算，硬件的忙碌程度没有变。" if g_rc > 1 else "")
     + ("HFU 超过 100% 是不可能的：本场景的单步里没有这么多可省的时间，这两项收益至少有一项的前提"
        "不成立，或场景的输入需要核对。" if hfu_both > 1 else "")
     + "这里假设整个单步都随之缩短；下一小节去掉这个假设。")
if sc["recompute"] == "full":
    mem_sel = gpu_memory(sc.values, recompute="selective")
    where = (f"负载最重的卡要 {d.gb(mem_sel['total'])}，{sc['gpu']} 有 {d.gb(mem_sel['capacity'], 0)}；"
             "第 08 节细讲")
    d.md(f"这道题默认 selective recompute 做得成。按账里的显存模型，它在本场景**放得下**（{where}）。"
         if mem_sel["fits"] else
         f"这道题默认 selective recompute 做得成；但按账里的显存模型，它在本场景**放不下**（{where}）："
         f"上面的 {d.times(g_both)} 只是题目的答案，本次运行拿不到其中 selective recompute 的那 {d.times(g_rc)}。")

# %% [markdown]
# ### (c) 下一个瓶颈
#
# 两条线索：一是不随计算缩短的那部分时间（主要是没被计算掩盖的通信）占比会怎么变；
# 二是屋顶线（roofline）：模型的矩阵乘在当前 micro batch 下，运算强度与 GPU 的平衡点比如何。
#
# 第一条需要一个数：没被计算掩盖的通信占单步的比例。课程说它的项目里不到 3%。场景的
# `communication_share` 键放团队自己的实测值；不给时，用账里按并行布局估出的通信时间（第 08 节），
# 那是上界：假设没有任何重叠。

# %%
comm = acc["communication"]
# measured if the scenario gives it, else the layout's estimate; the exposed part is at most what
# compute at the GPU's peak leaves of the step (the overlap lever of acc["advice"] caps it so)
comm_share = 1 - 1 / by_lever["communication_overlap"]["speedup"]
capped_comm = comm_share < comm["share_used"] - 1e-9
if comm["basis"] == "measured":
    comm_basis = "团队实测，场景的 `communication_share`"
else:
    comm_basis = "按并行布局的估计，是上界：没有任何重叠"
if capped_comm:
    comm_basis += "，并以峰值算力算完这一步后剩下的时间为上限"
if comm["basis"] != "measured":
    comm_basis += "；设置 `communication_share` 可改为你的实测值"
text = f"本节用的通信份额：**{d.pct(comm_share, 1)}**（{comm_basis}）。"
if capped_comm:
    text += (f"账里的份额是 {d.pct(comm['share_used'], 1)}，但 GPU 就算跑在峰值，算完这一步也要 "
             f"{d.pct(acc['attention']['actual']['hfu_with_attention'], 1)} 的时间（含注意力的 HFU），"
             f"所以暴露在外的最多是上面的 {d.pct(comm_share, 1)}，其余的已经和计算重叠。")
d.md(text)

# %%
d.eq(r"T'", x.step_time_with_fixed_part)
d.eq(r"c'", x.fixed_share_after)
stages = [("现在", 1.0), ("packing", g_pack), ("packing + selective recompute", g_both)]
stage_rows = []
for label, g in stages:
    fixed = x.with_fixed_part(sc["step_time"], comm_share, g)
    stage_rows.append((label, d.times(g), f"{sc['step_time'] / g:.1f} s", f"{fixed['step_time']:.1f} s",
                       d.times(fixed["speedup"]), d.pct(fixed["fixed_share"], 1)))
d.table(stage_rows, ["阶段", "计算提速", "单步（全部缩短）", "单步（通信不变）", "实际提速", "通信占比"],
        f"Communication held fixed at {d.pct(comm_share, 1)} of today's step ({comm['basis']})")
after = x.with_fixed_part(sc["step_time"], comm_share, g_both)
bound_after = levers.amdahl_bound(after["fixed_share"])  # overlap hiding all of it, after the two
done = ("packing", "selective_recompute", "recompute_off")
others = [a for a in acc["advice"]
          if a["feasible"] and a["lever"] not in (*done, "communication_overlap")]
best_other = max(others, key=lambda a: a["speedup"], default=None)
comm_first = comm_share > 0 and (best_other is None or bound_after >= best_other["speedup"])
no_comm = ("团队实测的暴露通信为 0：通信已全部藏在计算后面" if comm["basis"] == "measured"
           else "本场景没有集合通信")
if comm_share == 0:
    comm_verdict = no_comm + "，它不会成为瓶颈。"
elif best_other is None:
    comm_verdict = (f"此时把通信完全藏到计算后面最多再快 {d.times(bound_after, 3)}；"
                    "除此之外没有别的可行杠杆，通信重叠是剩下唯一的一项。")
elif comm_first:
    comm_verdict = (f"此时把通信完全藏到计算后面最多再快 {d.times(bound_after, 3)}，不短于其余可行杠杆里最长的 "
                    f"`{best_other['lever']}`（{d.times(best_other['speedup'], 3)}，按今天的份额）："
                    "通信重叠是下一个值得做的"
                    + ("。" if comm["basis"] == "measured" else "（按估计的上界；实测的份额可能更小，先量）。"))
else:
    comm_verdict = (f"此时把通信完全藏到计算后面最多再快 {d.times(bound_after, 3)}，短于 "
                    f"`{best_other['lever']}`（{d.times(best_other['speedup'], 3)}，按今天的份额）："
                    "通信还不是下一个瓶颈。")
if comm_share == 0:
    d.md(comm_verdict)
elif g_both > 1:
    d.md(f"通信时间（{comm_share * sc['step_time']:.1f} s，{comm_basis}）不随计算缩短：计算提速 "
         f"{d.times(g_both)} 之后，它的占比从 {d.pct(comm_share, 1)} 升到 **{d.pct(after['fixed_share'], 1)}**，"
         f"实际提速也从 {d.times(g_both)} 降到 {d.times(after['speedup'])}（Amdahl 定律）。" + comm_verdict)
else:
    d.md(f"本场景的两项改动都没有收益，计算时间不变，通信（{comm_share * sc['step_time']:.1f} s，{comm_basis}）"
         f"的占比仍是 {d.pct(comm_share, 1)}。只有计算先被压短，不随之缩短的通信占比才会上升（Amdahl 定律）。"
         + comm_verdict)

# %%
import matplotlib.pyplot as plt

d.setup_plots()
speedups = [1 + 0.05 * i for i in range(81)]
shares = [100 * x.with_fixed_part(1.0, comm_share, g)["fixed_share"] for g in speedups]
fig, ax = plt.subplots()
ax.plot(speedups, shares, color="tab:blue", label="fixed communication")
for label, g in stages[1:]:
    share = 100 * x.with_fixed_part(1.0, comm_share, g)["fixed_share"]
    ax.plot([g], [share], "o", label={"packing": "packing",
                                      "packing + selective recompute": "packing + selective"}[label])
ax.set_title("Share of a fixed communication time as compute speeds up")
ax.set_xlabel("compute speedup (x)")
ax.set_ylabel("communication share of the step (%)")
ax.legend(loc="upper left")
plt.show()

# %% [markdown]
# 第二条线索：屋顶线。一个 (m×k)(k×n) 的矩阵乘读两个输入、写一个输出，运算强度是
# FLOPs 除以搬运的字节数；低于 GPU 的平衡点（峰值 ÷ 显存带宽）就受带宽限制，高于它才有机会跑满算力。
# 下表是模型在当前 micro batch 下的全部矩阵乘，与第 06、07、08 节是同一份清单
# （`costmodel.evaluate.gemms.model_gemms`）：带权重的每种一行，$m$ 是每个 micro batch 的 token 数
# （micro batch × 序列长度；packing 之后每条序列仍是这么多槽位，只是都装满了真实 token）；若模型是 MoE，
# 专家 GEMM 的 $m$ 是一个 EP 组汇集到每个专家的 token 数。最后两行是注意力核 QKᵀ 和 AV
# （一个头、一条序列，不带权重），它们的强度与 micro batch 无关。
#
# $m$ 变大，强度也只趋向一个由 $k$、$n$ 决定的上限：很窄的 GEMM 加大 micro batch 也跨不过拐点。

# %%
gemm_rows = gemms.model_gemms(sc.values)
balance = acc["machine_balance"]
ai_limit = sp.limit(roofline.gemm_intensity, m, sp.oo)
d.eq(r"AI", roofline.gemm_intensity)
d.eq(r"\lim_{m \to \infty} AI", ai_limit)
d.table([(g["name"], d.num(g["m"]), d.num(g["k"]), d.num(g["n"]), f"{g['intensity']:.0f}",
          f"{g['intensity'] / balance:.1f}", g["bound"], "yes" if g["weights"] else "no",
          g["source"]) for g in gemm_rows],
        ["GEMM", "m", "k", "n", "AI (FLOP/byte)", "AI / balance", "bound", "weights", "shape from"],
        f"GEMMs at micro batch {sc['micro_batch']} on {sc['gpu']} "
        f"(machine balance {balance:.1f} FLOP/byte, BF16)")

# %%
moe = sc["num_experts"] > 0
weight_rows = [g for g in gemm_rows if g["weights"]]
core_rows = [g for g in gemm_rows if not g["weights"]]  # QK^T and AV: no weights
cap = {g["key"]: g["intensity_limit"] for g in weight_rows}  # the list's ceiling, BF16
pushable = [g for g in weight_rows if g["bound"] == "memory" and cap[g["key"]] > balance]
capped = [g for g in weight_rows if g["bound"] == "memory" and cap[g["key"]] <= balance]
below_core = [g for g in core_rows if g["bound"] == "memory"]
compute_rows = [g for g in gemm_rows if g["bound"] == "compute"]
lowest = min(compute_rows, key=lambda g: g["intensity"]) if compute_rows else None
capped_share = (sum(g["forward_flops_per_token"] for g in capped)
                / gemms.weight_flops_per_token(weight_rows))
listed = lambda rows: "、".join(d.text(g["name"], code=True) for g in rows)  # noqa: E731
kernels = "瘦的专家 GEMM、长序列的注意力核" if moe else "长序列的注意力核"
head = f"{sc['gpu']} 的平衡点是 {balance:.1f} FLOP/byte；在 micro batch = {sc['micro_batch']} 时，"
capped_list = "、".join(f"{d.text(g['name'], code=True)}（{cap[g['key']]:.{0 if cap[g['key']] >= 10 else 2}f}）"
                        for g in capped)
capped_text = (f"{capped_list}落在拐点左侧，但强度被自身较窄的 k 或 n 封顶（括号里是 m → ∞ 时的上限，"
               f"都不到平衡点）：加大 micro batch 推不过拐点；{'它' if len(capped) == 1 else '它们'}只占前向"
               f"权重 FLOPs 的{' ' + d.pct(capped_share) if capped_share >= 1e-4 else '不到 0.01%'}。"
               if capped else "")
if not pushable and not below_core and lowest is not None:
    roof = (head + ("除去下面说的窄 GEMM，" if capped else "表中") + f"所有矩阵乘都在拐点右侧，最低的 "
            f"{d.text(lowest['name'], code=True)} 也有 {lowest['intensity']:.0f}，是平衡点的 "
            f"{lowest['intensity'] / balance:.1f} 倍。" + capped_text
            + "也就是说，这些 GEMM 慢不是因为显存带宽：屋顶线只给上限，剩下的差距来自 kernel 自身的效率"
            f"（{kernels}），以及不产生 FLOPs 的访存型操作（"
            + ("MoE 的 permute/unpermute、" if moe else "") + "norm、激活函数）。"
            "加大 micro batch 在这里主要是让小矩阵乘更“胖”、kernel 更高效，而不是跨过拐点。")
else:
    roof = head
    if pushable:
        roof += (f"{listed(pushable)} 落在拐点左侧，受显存带宽限制；它们的 m 随 micro batch 增大，"
                 "上限（m → ∞）高于平衡点，加大 micro batch 能把它们推过拐点。")
    else:
        roof += ("带权重的矩阵乘" + ("除去下面说的窄 GEMM " if capped else "")
                 + "都在拐点右侧，加大 micro batch 不是为了跨过拐点。")
    roof += capped_text
    if below_core:
        core_ai = min(g["intensity"] for g in below_core)
        roof += (f"注意力核（{listed(below_core)}）"
                 f"{'最低' if len({round(g['intensity']) for g in below_core}) > 1 else ''}只有 "
                 f"{core_ai:.{0 if core_ai >= 10 else 2}f} FLOP/byte，在拐点左侧："
                 "它的运算强度由 head_dim 决定，与 micro batch 无关，要靠 FlashAttention 这类把分数矩阵"
                 "留在片上的融合 kernel 来提高。")
notes = []
if core_rows and not below_core:
    notes.append("注意力核两行按“分数矩阵写回显存”计算；FlashAttention 把它留在片上，实际运算强度更高"
                 + ("（本场景的 `attention_kernel` 正是 flash）。" if sc["attention_kernel"] == "flash" else "。"))
att_share = att["actual"]["share"]
lin_share = (linear or {}).get("share")
# the largest weight GEMM kind, as a share of all FLOPs (its part of 6ND)
matmul_share = 1 - att_share - (lin_share or 0)
largest = max(weight_rows, key=lambda g: g["forward_flops_per_token"])
largest_share = (matmul_share * largest["forward_flops_per_token"]
                 / gemms.weight_flops_per_token(weight_rows))
where = "packing 之后" if padded else ("本场景已在 packing，" if packed else "")
d.md(" ".join([roof, *notes])
     + f" 另一方面，{where}注意力核占全部运算的 **{d.pct(att_share, 0)}**（按{actual_text}；{square}"
     + (f"；线性注意力核另占 {d.pct(lin_share, 1)}" if lin_share else "")
     + "），而它不在 6ND 里"
     + ("：它比任何一种带权重的 GEMM 都大，MFU 的提升空间有一部分要靠注意力 kernel 本身。"
        if att_share > largest_share else "；它比最大的一种带权重 GEMM 小，不是这里的大头。"))

# %%
basis_short = "实测" if comm["basis"] == "measured" else "估计的上界"
if comm_share == 0:
    comm_note = no_comm
elif g_both <= 1:
    comm_note = (f"计算没有缩短，通信占比不变（{d.pct(comm_share, 1)}，{basis_short}）"
                 + ("，通信重叠是下一个值得做的" if comm_first else "，还不是下一个瓶颈"))
else:
    comm_note = (f"通信占比 {d.pct(comm_share, 1)} → {d.pct(after['fixed_share'], 1)}（{basis_short}），"
                 f"升到原来的 {after['fixed_share'] / comm_share:.1f} 倍，"
                 + ("通信重叠是下一个值得做的" if comm_first else "还不是下一个瓶颈"))
narrow = (f"（窄 GEMM 除外，但{'它' if len(capped) == 1 else '它们'}的 FLOPs 不到 1%）"
          if capped and capped_share < 0.01
          else "（窄 GEMM 除外）" if capped else "")
if pushable:
    gemm_note = "部分带权重的 GEMM 受带宽限制，加大 micro batch 是下一步"
elif below_core:
    gemm_note = (f"带权重的 GEMM 不受带宽限制{narrow}；按屋顶线落在拐点左侧的是注意力核，"
                 "要靠融合的注意力 kernel")
else:
    gemm_note = f"GEMM 不受带宽限制{narrow}，瓶颈转到 kernel 效率（{kernels}）和访存型操作"
if att_share > largest_share:
    att_note = (f"注意力核占全部运算的 {d.pct(att_share, 0)}，比最大的一种带权重 GEMM（"
                f"{d.text(largest['name'], code=True)}，约 {d.pct(largest_share, 0)}）还大，是计算里最大的单项")
else:
    att_note = (f"注意力核占全部运算的 {d.pct(att_share, 0)}，不是最大的单项（"
                f"{d.text(largest['name'], code=True)} 约占 {d.pct(largest_share, 0)}）")
d.md(f"**(c) 的回答**：{comm_note}；"
     f"{gemm_note}；{att_note}。"
     "具体先做哪一项，仍然要先量：profile 一步，看时间花在哪类 kernel 上。")

# %% [markdown]
# ### 本次运行：剩下的杠杆怎么排
#
# 账里按本次运行排好了每个杠杆（`acc["advice"]`，与第 08 节同一份）：按本场景算出的提速、是否可行（显存
# 放得下、batch 能整除）、依赖哪些场景键。去掉这道题已经做的两项（recompute 的两个杠杆只取其一），剩下的
# 按提速排如下；提速都按今天的份额算，带 * 的键用的是课程的假设值。

# %%
rest = [a for a in acc["advice"] if a["lever"] not in done]


def star(key):
    if source.get(key) == "course":
        return key + "*"
    return key + (" (estimate)" if key == "communication_share" and source.get(key) == "derived" else "")


d.table([[a["lever"], d.times(a["speedup"], 3), "yes" if a["feasible"] else "no",
          ", ".join(star(key) for key in a["rests_on"]), a["note"]] for a in rest],
        ["lever", "speedup (today's shares)", "feasible", "rests on (* course assumption)", "note"],
        "The other levers of this run, ranked (acc['advice'])")
combined = acc["advice_combined"]
plan = "、".join(f"`{name}`" for name in combined["levers"])
text = (f"本次运行实际可行、能一起做的杠杆是 {plan}，合计 **{d.times(combined['speedup'])}**，每步 "
        f"{sc['step_time']:g} s → {combined['step_time']:.1f} s（`acc[\"advice_combined\"]`）。"
        + (f"各杠杆连乘是 {d.times(combined['product'])}，账里把合计封顶：再快，GPU 就要超过峰值算力"
           "（按今天的硬件 FLOPs，含注意力）。" if combined.get("capped") else "")
        if combined["levers"] else "本次运行没有一个杠杆既可行又有收益。")
if combined["levers"]:
    in_plan = [name for name in ("packing", "selective_recompute") if name in combined["levers"]]
    text += ("它包含这道题的两项。" if len(in_plan) == 2 else
             ("它包含这道题里的 " + "、".join(f"`{name}`" for name in in_plan) + "，不含另一项（不可行或没有收益）。")
             if in_plan else "这道题的两项都不在其中（不可行或没有收益）。")
leaning = sorted({key for name in combined["levers"] for key in by_lever[name]["rests_on"]
                  if source.get(key) == "course"})
if leaning:
    text += ("其中的提速依赖课程的假设值 " + "、".join(f"`{key}`" for key in leaning)
             + f"：设置{'这个键' if len(leaning) == 1 else '这些键'}可改为你的实测值。")
d.md(text)

# %% [markdown]
# ## 本节要点

# %%
d.md("\n".join(f"- {p}" for p in [
    (f"完美 packing：{d.times(g_pack)}，单步 {sc['step_time']:g} s → {t_pack:.1f} s，"
     f"吞吐 {d.num(tok_pack)} tok/s，MFU {d.pct(acc['mfu'])} → {d.pct(pad['mfu_after_packing'])}"
     f"{'（HFU 会超过 100%，不可能：补齐的前提站不住，见上文）' if hfu_pack > 1 else ''}。"
     if padded else f"完美 packing：本场景{'已在 packing' if packed else '没有 pad'}，{d.times(g_pack)}，"
     f"单步仍是 {sc['step_time']:g} s。"),
    f"现在训练跑 {current_run_hours:g} 小时（{origin('training_hours')}），packing 后约 {run['hours_after']:.1f} 小时，"
    f"两项都做约 {current_run_hours / g_both:.1f} 小时。",
    f"packing × selective recompute = {d.times(g_pack)} × {d.times(g_rc)} = **{d.times(g_both)}**"
    f"（相加得 {d.times(g_add)}），单步 {t_both:.1f} s，MFU {d.pct(mfu_both)}"
    f"{'（HFU 会超过 100%，不可能，见上文）' if hfu_both > 1 else ''}。",
    f"固定 {d.pct(comm_share, 1)} 的通信（{basis_short}）在提速后占 {d.pct(after['fixed_share'], 1)}，"
    f"实际提速 {d.times(after['speedup'])}。",
    (f"本次运行可行的杠杆（{plan}）合计 {d.times(combined['speedup'])}"
     f"{'（连乘后封顶于峰值算力）' if combined.get('capped') else ''}，每步 {combined['step_time']:.1f} s。"
     if combined["levers"] else "本次运行没有既可行又有收益的杠杆。"),
    f"{sc['gpu']} 平衡点 {balance:.1f} FLOP/byte；"
    + (f"算力受限的 GEMM 里强度最低的是 {d.text(lowest['name'], code=True)}，"
       f"{lowest['intensity']:.0f} FLOP/byte" if lowest else "没有算力受限的 GEMM")
    + (f"；受带宽限制的：{listed(pushable + capped + below_core)}。" if pushable or capped or below_core
       else "；没有受带宽限制的 GEMM。"),
]))
