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
# # 08 优化路径：六个杠杆，谁能相乘
#
# 知道了 MFU 低在哪里，下一步是排优先级。课程按“收益 / 代价”给出六个杠杆：packing、
# 用 fused/chunked 交叉熵腾出显存换掉 full recompute、加大 micro batch、上下文并行（CP）、
# 更好的注意力 kernel、通信重叠。本节给每个杠杆一个按场景算出的预期提速；算不出来的部分写成
# 带出处的**命名假设**，而不是悄悄塞进数字里。最后回答一个常被答错的问题：这些收益能不能相乘。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"recompute": "selective"}

# %%
import sympy as sp

from costmodel.evaluate import layouts
from costmodel.evaluate import gemms
from costmodel.inputs import assumptions
from costmodel.present import display as d
from costmodel.derive import attention, levers, memory, recompute, roofline
from costmodel.inputs import hardware
from costmodel.derive.symbols import S, V, b_micro, bytes_per_element, m

sc, acc = d.load(scenario_file, overrides)
proj = acc["projections"]
gpu = hardware.GPUS[sc["gpu"]]
moe = sc["num_experts"] > 0
d.md(f"场景：**{d.text(sc['name'])}**：{sc['num_gpus']} × {sc['gpu']}，每步 {d.num(sc['step_time'], 1)} 秒，"
     f"MFU {d.pct(acc['mfu'])}，recompute = `{sc['recompute']}`，micro batch = {sc['micro_batch']}，"
     + ("MoE 模型。" if moe else "稠密模型（没有专家并行）。"))
d.table([[name, str(a.value), a.source] for name, a in assumptions.ASSUMPTIONS.items()],
        ["assumption", "value", "source"], "Named assumptions of this notebook (not scenario keys)")

# %% [markdown]
# ## 两种收益
#
# 一步的耗时可以拆成三个因子：算了多少个 token 槽位 × 每个 token 多少 FLOPs ÷ 每秒跑多少 FLOPs。
# 一个杠杆若改变其中一个因子、且作用于整步，它的收益就与别的因子上的收益**相乘**：packing
# 减少槽位，降低 recompute 系数减少每 token 的 FLOPs，更大的 micro batch 提高 GEMM 的速率。
# 另一类杠杆只加速步内的一部分 $f$（注意力 kernel 只管注意力，通信重叠只管暴露在外的通信），
# 它受 Amdahl 定律约束：部分再快，整体也到不了 $1/(1-f)$ 以上。

# %%
d.eq(r"T'", levers.multiplied_step_time)
d.eq(r"\text{speedup}_{\text{part}}", levers.amdahl_speedup)
d.eq(r"\lim_{x \to \infty} \text{speedup}_{\text{part}}", levers.amdahl_limit)

# %% [markdown]
# ## ① 确认并做 packing
#
# 第 04 节算过：若训练确实在定长补齐，完美 packing 按槽位之比提速；若已经在 packing，这一项是零。
# 它减少的是槽位，作用于整步的线性层，属于相乘的一类。

# %%
g_pack = proj["packing"]["speedup"]
packed = acc["padding"]["batching"] == "packed"
padded = not packed and acc["padding"]["slots"] > sc["tokens_per_step"]  # pad slots are computed
hfu_pack = acc["hfu"] * g_pack  # the hardware's rate today if the pad slots are really computed
if packed:
    text = (f"本场景已经在做 packing（`batching: packed`）：每个槽位都是真实 token，这一项是 "
            f"{d.times(g_pack)}，没有可省的。")
elif padded:
    basis = "按长度文件" if sc.lengths is not None else "按均值"
    text = (f"本场景{basis}算的 packing 提速为 **{d.times(g_pack)}**（浪费 "
            f"{d.pct(acc['padding']['waste_fraction'])} 的槽位），每步 {d.num(sc['step_time'], 1)} 秒 → "
            f"{d.num(proj['packing']['step_time'], 1)} 秒。前提是补齐真实存在：先看日志里每步的 token 数。")
    if hfu_pack > 1:
        text += (f"这里这个前提站不住：HFU 只数真实 token，现在是 {d.pct(acc['hfu'])}；若 pad 槽位也真的在算，"
                 f"GPU 现在的硬件利用率就是 {d.pct(hfu_pack)}，超过 100%，不可能。要么其实没有补齐"
                 "（已在 packing 或 varlen），要么 `step_time` 等输入需要核对。")
else:
    text = (f"本场景的平均真实长度等于配置长度，没有 pad 槽位：packing 这一项是 {d.times(g_pack)}，"
            "没有可省的。")
d.md(text)

# %% [markdown]
# ## ② 干掉 logits 的显存，再换掉 full recompute
#
# 语言模型头的输出 logits 是每个 token 一整行词表分数，一个 micro batch 的大小是
# $b \cdot S \cdot V \cdot \beta$。它是训练里最大的单个激活之一。fused / chunked 交叉熵不把整张
# 表落进显存：分成 $c$ 块逐块算 loss 和梯度，峰值只剩 $1/c$。腾出的显存可以用来把 full
# recompute 换成 selective recompute。

# %%
bf16 = 2
logits = acc["logits_bytes"]
d.eq(r"\text{logits}", memory.logits_bytes, d.gb(logits))
d.eq(r"\text{logits}_{\text{chunked}}", memory.chunked_logits_bytes)
chunks = assumptions.assumed("ce_chunks")
values = {S: sc["seq_len"], V: sc["vocab_size"], b_micro: sc["micro_batch"], bytes_per_element: bf16}
rows = []
for c in (1, 2, 4, chunks, 2 * chunks):
    kept = float(memory.chunked_logits_bytes.subs({**values, memory.chunks: c}))
    rows.append([c, d.gb(kept), d.gb(logits - kept), d.pct(kept / gpu.memory_bytes, 1)])
d.table(rows, ["chunks c", "logits kept", "freed", "kept / GPU memory"],
        f"Logits per micro batch (b = {sc['micro_batch']}, BF16) and chunking; "
        f"{sc['gpu']} has {d.gb(gpu.memory_bytes, 0)}")
kept_assumed = logits / chunks
d.md(f"本场景一个 micro batch 的 logits 是 **{d.gb(logits)}**（{sc['gpu']} 显存的 "
     f"{d.pct(logits / gpu.memory_bytes, 1)}）；按假设分 {chunks} 块，峰值降到 {d.gb(kept_assumed)}，"
     f"腾出 **{d.gb(logits - kept_assumed)}**。课程写的是“约 15 GB 压到约 2 GB”：那对应的是"
     f"{'更小的词表（约 15 万）' if sc['vocab_size'] > 160_000 else '约 15 万的词表'}，"
     f"本场景按 `vocab_size` = {d.num(sc['vocab_size'])} 现算。"
     "若交叉熵内部还把 logits 转成 FP32（例如 Hugging Face transformers 的默认损失），峰值还要翻倍，"
     "省下的也更多。fused 交叉熵本身也更快，因为少读写了一张大表，这一部分这里没有计入。")

# %%
f_full = recompute.factor("full")
f_sel = recompute.factor("selective", sc["selective_recompute_fraction"])
g_recompute = proj["selective_recompute"]["speedup"]
d.eq(r"\frac{\text{factor}(\text{full})}{\text{factor}(\text{selective})}",
     sp.Mul(f_full, 1 / f_sel, evaluate=False), f_full / f_sel, d.times(float(f_full / f_sel)))
if sc["recompute"] == "full":
    text = (f"本场景正在用 full recompute（系数 {d.num(proj['selective_recompute']['factor_now'], 3)}），"
            f"换成 selective（假设重算前向的 {d.pct(sc['selective_recompute_fraction'], 0)}，系数 "
            f"{d.num(proj['selective_recompute']['factor_selective'], 3)}）提速 **{d.times(g_recompute)}**，"
            f"每步 → {d.num(proj['selective_recompute']['step_time'], 1)} 秒。课程给出的是 1.21×。")
elif sc["recompute"] == "selective":
    text = ("本场景已经是 selective recompute，这个杠杆已经用过了（提速 "
            f"{d.times(g_recompute)}）；腾出的显存可以留给下面的 micro batch。")
else:
    text = ("本场景没有开 recompute，这个杠杆无从谈起（提速 "
            f"{d.times(g_recompute)}）；腾出的显存可以留给下面的 micro batch。")
d.md(text + " 它减少的是每个 token 的 FLOPs，与 packing 相乘。")

# %% [markdown]
# ## ③ 加大 micro batch
#
# 同一份权重读一次、算更多行，GEMM 的运算强度（FLOP/byte）就提高；低于机器平衡点（峰值 ÷ 带宽）
# 的运算受带宽限制。下表是模型每一种带权重的 GEMM 在 micro batch 为 $b$、$2b$、$4b$ 时的运算强度
# （BF16）。清单来自 `costmodel.evaluate.gemms.model_gemms`，与第 06、07、10 节是同一份；形状的来源
# 写在表下。若模型是 MoE，专家 GEMM 的行数 $m$ 是一个 EP 组汇集到每个专家的平均 token 数，也随
# micro batch 增长。注意力核（QKᵀ、AV）不带权重，它的强度只由每条序列的长度和 head_dim 决定，
# 与 micro batch 无关，不列在这里。
#
# $m$ 变大时强度也不会无限增长：它趋向一个只由 $k$、$n$ 决定的上限。很窄的 GEMM（$n$ 或 $k$ 很小）
# 即使 $m$ 再大也到不了平衡点，加大 micro batch 对它无能为力。

# %%
b = sc["micro_batch"]
sizes = (b, 2 * b, 4 * b)
by_size = {size: gemms.model_gemms(sc.values, size) for size in sizes}
core_rows = [g for g in by_size[b] if not g["weights"]]  # QK^T and AV: not in the table
by_size = {size: [g for g in rows if g["weights"]] for size, rows in by_size.items()}
weight_rows = by_size[b]
ai = {size: {g["key"]: g["intensity"] for g in by_size[size]} for size in sizes}
ai_limit = sp.limit(roofline.gemm_intensity, m, sp.oo)
d.eq(r"\lim_{m \to \infty} AI", ai_limit)
cap = {g["key"]: g["intensity_limit"] for g in weight_rows}  # the list's ceiling, at BF16
balance = acc["machine_balance"]
fmt_ai = lambda v: d.num(v, 0 if v >= 10 else 2)  # noqa: E731
d.table([[g["name"], *[fmt_ai(ai[size][g["key"]]) for size in sizes],
          d.times(ai[sizes[1]][g["key"]] / ai[b][g["key"]]), fmt_ai(cap[g["key"]]), g["bound"]]
         for g in weight_rows],
        ["GEMM (forward)", *[f"AI at b={size}" for size in sizes], "gain b -> 2b", "AI as m -> inf",
         f"bound at b={b}"],
        f"Arithmetic intensity (FLOP/byte) vs machine balance {d.num(balance, 1)} ({sc['gpu']})")
sources = dict.fromkeys(part for g in weight_rows for part in g["source"].split("; "))
d.md("形状的来源：" + "；".join(d.text(source) for source in sources) + "。")

# %%
memory_rows = [g for g in weight_rows if g["bound"] == "memory"]
pushable = [g for g in memory_rows if cap[g["key"]] > balance]  # a larger m can cross the ridge
capped = [g for g in memory_rows if cap[g["key"]] <= balance]  # too narrow: no m crosses it
compute_rows = [g for g in weight_rows if g["bound"] == "compute"]
capped_share = (sum(g["forward_flops_per_token"] for g in capped)
                / gemms.weight_flops_per_token(weight_rows))
listed = lambda rows: "、".join(d.text(g["name"], code=True) for g in rows)  # noqa: E731
capped_list = "、".join(f"{d.text(g['name'], code=True)}（{fmt_ai(cap[g['key']])}）" for g in capped)
lay1 = layouts.layouts(sc["num_gpus"], sc["samples_per_step"], sc["seq_len"], sc["num_experts"])[0]
feasible = lay1.micro_batches(2 * b)
low, high = assumptions.assumed("micro_batch_speedup")
roof = f"在 micro batch = {b} 时，"
if pushable:
    crossed = next((size for size in sizes[1:]
                    if all(ai[size][g["key"]] >= balance for g in pushable)), None)
    roof += (f"{listed(pushable)} 的运算强度低于机器平衡点 {d.num(balance, 1)}，受带宽限制；它们的上限"
             "（m → ∞）高于平衡点，加大 micro batch 能把它们往算力受限的一侧推"
             + (f"（到 micro batch = {crossed} 时全部越过）。" if crossed else
                f"（到 micro batch = {sizes[-1]} 时还没有全部越过）。"))
elif compute_rows:
    lowest = min(compute_rows, key=lambda g: g["intensity"])
    roof += (f"{'除去下面说的窄 GEMM，' if capped else ''}最瘦的带权重 GEMM（{d.text(lowest['name'], code=True)}）"
             f"运算强度也有 {fmt_ai(lowest['intensity'])} FLOP/byte，是机器平衡点 {d.num(balance, 1)} 的 "
             f"{d.num(lowest['intensity'] / balance, 1)} 倍：每个 micro batch 已有 {d.num(b * sc['seq_len'])} 个 token "
             "槽位（m = b·S），这些 GEMM 本来就是算力受限，"
             "加大 micro batch 几乎不改变它们在 roofline 上的位置。")
if capped:
    roof += (f"{capped_list}落在拐点左侧，但强度被自身较窄的 k 或 n 封顶（括号里是 m → ∞ 时的上限，"
             f"都不到平衡点）：加大 micro batch 推不过拐点；{'它' if len(capped) == 1 else '它们'}只占前向"
             f"权重 FLOPs 的{' ' + d.pct(capped_share) if capped_share >= 1e-4 else '不到 0.01%'}。")
below_core = [g for g in core_rows if g["bound"] == "memory"]
if not pushable:
    roof += (("除此之外，" if capped else "") + "真正受带宽限制的是逐元素、"
             f"归一化{'、MoE 的 permute ' if moe else ''}一类算子"
             + (f"，以及本场景的注意力核（最低 {fmt_ai(min(g['intensity'] for g in below_core))} FLOP/byte）"
                if below_core else "")
             + "，它们的强度与 micro batch 无关。"
             "所以这里的收益若有，来自别处（每次 kernel 启动做更多活、更少的固定开销），只能量。")
d.md(roof + f" 课程给的区间是 {d.times(low)}–{d.times(high)}（命名假设，不是推导）。"
     f"可行性：CP = 1 时每个 DP rank 分到 {d.num(lay1.samples_per_rank, 1)} 个样本，micro batch 从 {b} 到 "
     f"{2 * b} {'可以整除' if feasible else '不能整除，需先调整 global batch 或并行方式'}；"
     f"logits 也随之翻倍到 {d.gb(2 * logits)}，这正是先做 ② 的原因。")
g_micro = low if feasible else 1.0

# %% [markdown]
# ## ④ 上下文并行（CP）的整除约束
#
# CP 把每条序列切到几张卡上，缓解长序列的显存压力，是结构性的改动，而不是一个提速系数。
# 它有整除约束：没有 TP、PP 时 $DP = \text{GPUs} / CP$；global batch 要能平分到每个 DP rank；
# 负载均衡的 CP 把序列切成 $2 \cdot CP$ 段，序列长度要能整除；课程的设定里专家并行组取自 DP，
# EP 要整除 DP，专家数也要能平分到 EP 个 rank 上。

# %%
ep = assumptions.assumed("expert_parallel")
lays = layouts.layouts(sc["num_gpus"], sc["samples_per_step"], sc["seq_len"], sc["num_experts"])
yes = lambda ok: "yes" if ok else "no"
d.table([[lay.cp, lay.dp, d.num(lay.samples_per_rank, 2), yes(lay.batch_divides), yes(lay.seq_divides),
          ", ".join(map(str, lay.expert_parallel)) if moe else "- (dense)",
          yes(lay.allows(ep)) if moe else "-"] for lay in lays],
        ["CP", "DP", "samples / DP rank", "batch divides", "seq_len / (2 CP)", "EP options",
         f"EP = {ep} ok"], f"Context parallelism on {sc['num_gpus']} GPUs (no TP or PP)")
pairs = layouts.valid_pairs(sc["num_gpus"], sc["samples_per_step"], sc["seq_len"], sc["num_experts"])
usable_cp = sorted({cp for cp, _ in pairs})
if moe:
    cps_with_ep = [lay.cp for lay in lays if lay.allows(ep)]
    two = next((lay for lay in lays if lay.cp == 2), None)
    text = (f"合法的 (CP, EP) 组合共 {len(pairs)} 个：{', '.join(f'({c}, {e})' for c, e in pairs)}。"
            if pairs else "没有一个 (CP, EP) 组合满足全部整除约束。")
    text += (f"在 EP = {ep} 的假设下，能用的 CP 只有 {', '.join(map(str, cps_with_ep)) or '（没有）'}。")
    if two is not None:
        if two.allows(5):
            five = "在本场景可行。"
        elif two.dp % 5:
            five = "在本场景不行：5 不整除 DP。"
        elif sc["num_experts"] % 5:
            five = f"在本场景不行：它整除 DP，但 {sc['num_experts']} 个专家不能平分到 5 个 rank 上。"
        else:
            five = "在本场景也不行：CP = 2 本身不满足 batch 或序列长度的整除约束。"
        text += (f"CP = 2 时 DP = {two.dp}，EP = {ep} {'仍然可行' if two.allows(ep) else '失效'}"
                 f"（课程的项目里正是 CP = 2 → DP = 20 → EP = 8 失效）。课程提到的 EP = 5 " + five)
else:
    text = (f"稠密模型没有专家并行，约束只剩 batch 与序列长度的整除：可用的 CP 为 "
            f"{', '.join(map(str, usable_cp)) or '（没有）'}。")
d.md(text)

# %% [markdown]
# ## ⑤ 更好的注意力 kernel
#
# 注意力 kernel 的杠杆就是注意力在整步里的份额。账里有两种读法（第 05 节细讲）：按真实长度
# （$\sum s_i^2$：有长度文件时取文件，否则取均长 $B \bar{s}^2$）和按补齐长度（$B S^2$）；第 04 节说明了
# 均长读法是下限（$\sum s_i^2 \ge n \bar{s}^2$）。份额是账里的模型 FLOPs 之比：注意力按场景的
# `attention_flops` 口径数（全方阵，或 causal 只数半个方阵），分母是 6ND 加注意力，模型若有线性注意力层，
# 也加上它。这里把 FLOPs 份额当作时间份额，这也是假设：注意力 kernel 的效率通常低于大 GEMM，
# 它的时间份额多半更大。

# %%
att = acc["attention"]
share_actual = att["actual"]["share"]
share_padded = att["padded"]["share"]
square = {"full": "全方阵 s×s，课程和 PaLM 的口径",
          "causal": "causal 只数半个方阵，Megatron-LM 的口径"}[att["attention_flops"]]
if sc.lengths is None:
    actual_label, actual_text = "mean length, B s_mean^2", f"实际均长 {d.count(sc['mean_tokens_per_sample'])}"
else:
    actual_label, actual_text = "real lengths (lengths file)", "长度文件里的真实长度（Σs_i²）"
k_att = assumptions.assumed("attention_kernel_speedup")
g_att = levers.amdahl(share_actual, k_att)
d.table([[label, d.pct(f), d.times(levers.amdahl(f, k_att)), d.times(levers.amdahl_bound(f))]
         for label, f in ((actual_label + (", now (packed)" if packed else " (after packing)"),
                           share_actual),
                          ("padded length, B S^2" + (" (if padded)" if packed else ""), share_padded))],
        ["attention share of FLOPs", "share f", f"kernel {d.times(k_att, 1)} faster", "bound 1/(1-f)"],
        f"Attention kernel: leverage = attention share ({att['convention']})")
text = (f"按{actual_text}，注意力（{square}）占 **{d.pct(share_actual, 1)}**：kernel 快 "
        f"{d.times(k_att, 1)}（假设）整步快 **{d.times(g_att)}**，"
        + (f"注意力完全免费也只到 {d.times(levers.amdahl_bound(share_actual))}。"
           if share_actual < 1 else "注意力在浮点精度下就是整步，它若完全免费，提速没有上限。")
        + "份额越大，这个杠杆越长；课程对自己的场景给出的是 32–73%（全方阵口径）。")
linear = acc["linear_attention"]
if linear is not None and linear["share"] is None:
    text += (f"模型还有 {linear['layers']} 层线性注意力（gated DeltaNet），缺少它的头宽，"
             "它的核没有算进分母，上面的份额因此偏大。")
elif linear is not None:
    text += (f"模型还有 {linear['layers']} 层线性注意力（gated DeltaNet），它的核另占 "
             f"{d.pct(linear['share'], 1)}（已算进分母）；它用的是另一种 kernel，不在这个杠杆里。")
if att["attention_kernel"] == "flash":
    hw_att = att["actual"]["hardware_flops_per_step"]
    hw_share = hw_att / (acc["hardware_flops_per_step"] + hw_att
                         + ((linear or {}).get("hardware_flops_per_step") or 0))
    text += (f"本场景的 kernel 是 flash（反向重算分数矩阵，硬件 FLOPs 是前向的 "
             f"{d.num(float(1 + attention.KERNEL_BACKWARD_OVER_FORWARD['flash']), 1)} 倍，模型 FLOPs 仍记 "
             f"{d.num(float(1 + attention.BACKWARD_OVER_FORWARD))} 倍）：按硬件 FLOPs 算，注意力占 "
             f"{d.pct(hw_share, 1)}，比上面的份额{'大' if hw_share > share_actual else '不小'}，"
             "若时间随硬件 FLOPs 走，这个杠杆还要更长一些。")
d.md(text)

# %% [markdown]
# ## ⑥ 通信重叠
#
# 能省的最多是暴露在外的通信时间。课程测得它不到一步的 3%（命名假设）。有意思的是，前面的
# 相乘型杠杆把计算压短之后，通信的份额会变大：

# %%
comm = assumptions.assumed("communication_share")
g_comm_bound = levers.amdahl_bound(comm)
d.eq(r"f'", levers.share_after)
multiplicative = [("packing", g_pack), ("selective\nrecompute", g_recompute),
                  ("micro batch x2\n(assumed)", g_micro)]
g_all = 1.0
for _, g in multiplicative:
    g_all *= g
comm_after = levers.untouched_share_after(comm, g_all)
d.md(f"通信份额 {d.pct(comm, 0)} 时，重叠最多提速 **{d.times(g_comm_bound, 3)}**。若前三个相乘型杠杆合计 "
     f"{d.times(g_all)} 而通信不变，它的份额会升到 {d.pct(comm_after, 1)}：排到后面时它才值得做。")

# %% [markdown]
# ## 排序，以及哪些收益能相乘

# %%
valid_text = f"{len(pairs)} valid (CP, EP) pairs" if moe else f"CP in {usable_cp}"
d.table([
    ["1", "packing", "multiplies", d.times(g_pack),
     "already packed" if packed else "computed: B S / D (if padding is real)"],
    ["2", "fused/chunked CE -> selective recompute", "multiplies", d.times(g_recompute),
     "computed: recompute factor ratio"],
    ["3", f"micro batch {b} -> {2 * b}", "multiplies",
     f"{d.times(low)}–{d.times(high)}" if feasible else "not divisible", "assumption (course)"],
    ["4", "context parallelism", "structural", "-", valid_text],
    ["5", "attention kernel", "share-bounded",
     f"{d.times(g_att)} (<= {d.times(levers.amdahl_bound(share_actual))})",
     "share computed, kernel gain assumed"],
    ["6", "communication overlap", "share-bounded", f"<= {d.times(g_comm_bound, 3)}",
     "assumption (course)"],
], ["rank", "lever", "kind", "projected speedup", "basis"], "The six levers, course order")

# %%
import matplotlib.pyplot as plt

steps = levers.waterfall(sc["step_time"], multiplicative)
final = steps[-1]["end"]
d.setup_plots()
fig, ax = plt.subplots()
names = ["step time\n(scenario)", *[s["lever"] for s in steps], "after\nlevers"]
ax.bar(names[0], sc["step_time"], color="gray")
for s in steps:
    ax.bar(s["lever"], s["saved"], bottom=s["end"], color="tab:green")
    ax.text(s["lever"], s["start"], f"/{s['speedup']:.2f}", ha="center", va="bottom", fontsize=9)
ax.bar(names[-1], final, color="tab:blue")
ax.text(names[0], sc["step_time"], f"{sc['step_time']:.1f} s", ha="center", va="bottom", fontsize=9)
ax.text(names[-1], final, f"{final:.1f} s", ha="center", va="bottom", fontsize=9)
ax.set_title("Step time waterfall through the multiplicative levers")
ax.set_ylabel("seconds per step")
ax.set_xlabel("lever (applied left to right)")
ax.set_ylim(0, sc["step_time"] * 1.12)
ax.tick_params(axis="x", labelsize=8)
plt.show()

# %%
g_added = 1 + sum(g - 1 for _, g in multiplicative)
factor_after = proj["selective_recompute"]["factor_selective" if g_recompute > 1 else "factor_now"]
hfu_all = acc["mfu"] * g_all * factor_after  # hardware FLOPs rate after the three levers
g_two = g_pack * g_recompute
d.md(f"三个相乘型杠杆：每步 {d.num(sc['step_time'], 1)} 秒 → **{d.num(final, 1)} 秒**，合计 "
     f"**{d.times(g_all)}**，MFU {d.pct(acc['mfu'])} → {d.pct(acc['mfu'] * g_all)}。"
     f"若误把收益相加（1 + Σ(g−1)），得到的是 {d.times(g_added)}。只算前两项（packing × selective recompute）"
     f"是 {d.times(g_two)}，每步 {d.num(proj['packing_and_selective_recompute']['step_time'], 1)} 秒。"
     f"注意力 kernel 和通信重叠不在图里：它们只作用于一部分时间，而且前面的杠杆会改变那部分的份额，"
     f"要在新的份额上重新按 Amdahl 定律算。"
     + (f"注意：按这些倍数，HFU 会到 {d.pct(hfu_all)}，超过 100%，不可能：本场景的单步里没有这么多可省的"
        "时间，至少有一个杠杆的前提（补齐真实存在、micro batch 的假设收益）不成立，或场景的输入需要核对。"
        if hfu_all > 1 else ""))

# %% [markdown]
# ## 先量，再改
#
# 每个数字都依赖一个先要量出来的事实：是否真在补齐（决定 ① 是满额还是零），logits 和激活到底
# 占多少显存（决定 ② ③ 是否可行），真实的注意力宽度、层数和长度分布（决定 ⑤ 的杠杆）。这些
# 一天内都能量出来；量完再排，免得花两周优化一个只占几个百分点的部分。
#
# ## 本节要点

# %%
d.md("\n".join([
    f"- 相乘型：packing **{d.times(g_pack)}**、selective recompute **{d.times(g_recompute)}**、"
    f"micro batch（假设）{d.times(g_micro)}；合计 **{d.times(g_all)}**，每步 "
    f"{d.num(sc['step_time'], 1)} 秒 → {d.num(final, 1)} 秒。",
    f"- logits 每个 micro batch {d.gb(logits)}；分 {chunks} 块只留 {d.gb(kept_assumed)}，腾出的显存是"
    + ("换掉 full recompute、加大 micro batch 的前提。" if sc["recompute"] == "full"
       else "加大 micro batch 的前提。"),
    f"- 受份额约束：注意力 kernel 的杠杆是注意力份额 {d.pct(share_actual, 1)}（上限 "
    f"{d.times(levers.amdahl_bound(share_actual))}），通信重叠最多 {d.times(g_comm_bound, 3)}。",
    (f"- CP 受整除约束：EP = {ep}（假设）时能用的 CP 只有 "
     f"{', '.join(str(lay.cp) for lay in lays if lay.allows(ep)) or '（没有）'}。" if moe else
     f"- CP 受整除约束：本场景可用的 CP 为 {', '.join(map(str, usable_cp)) or '（没有）'}。"),
]))
