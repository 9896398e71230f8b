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
# 带出处的**命名假设**，而不是悄悄塞进数字里。课程假设的值如今都是场景的键（下表标明每个值来自场景、
# 课程还是由别的键推出），团队可以换成自己的实测值。讲完六个杠杆，再看**本次运行**：显存放不放得下、
# 通信占多少、按提速排好的杠杆先做哪个。最后回答一个常被答错的问题：这些收益能不能相乘。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"recompute": "selective"}

# %%
import sympy as sp

from costmodel.evaluate import gemms, layouts, run
from costmodel.inputs import assumptions
from costmodel.present import display as d
from costmodel.derive import attention, levers, memory, recompute, roofline
from costmodel.inputs import hardware
from costmodel.derive.symbols import S, V, b_micro, bytes_per_element, m

sc, acc = d.load(scenario_file, overrides)
proj = acc["projections"]
gpu = hardware.GPUS[sc["gpu"]]
moe = sc["num_experts"] > 0
par = acc["parallel"]
source = {key: a["source"] for key, a in acc["assumptions"].items()}


def origin(key):
    """Where the value of `key` comes from, with the key to set when it is the course's."""
    if source.get(key) == "course":
        return f"按课程假设；设置 `{key}` 可改为你的实际值"
    if source.get(key) == "derived":
        return f"由其他键推出；设置 `{key}` 可直接给定"
    return f"场景的 `{key}`"


def keys(names):
    """Names as code, joined for prose: `a`、`b`."""
    return "、".join(f"`{name}`" for name in names)


def shown(key, value):
    if value is None:
        return "null (GPU table)" if key.endswith("bandwidth") else "null"
    if key.endswith("bandwidth"):
        return f"{value / 1e9:,.0f} GB/s"
    return d.pct(value) if key == "communication_share" else str(value)


d.md(f"场景：**{d.text(sc['name'])}**：{sc['num_gpus']} × {sc['gpu']}（TP {par['tp']} × PP {par['pp']} × "
     f"CP {par['cp']} × DP {par['dp']}，EP {par['ep']}），每步 {d.num(sc['step_time'], 1)} 秒，"
     f"MFU {d.pct(acc['mfu'])}，recompute = `{sc['recompute']}`，attention kernel = `{sc['attention_kernel']}`，"
     f"micro batch = {sc['micro_batch']}，" + ("MoE 模型。" if moe else "稠密模型（没有专家并行）。"))
low, high = assumptions.assumed("micro_batch_speedup")
d.table([[key, shown(key, a["value"]), a["source"]] for key, a in acc["assumptions"].items()]
        + [["micro_batch_speedup (not a key)", f"{d.times(low)}-{d.times(high)}", "course"]],
        ["key", "value", "source"],
        "Values the course assumed, now scenario keys: scenario = the team gave it, course = the "
        "course's assumption (set the key to replace it), derived = computed from other keys")

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
chunks = sc["ce_chunks"]
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
     f"{d.pct(logits / gpu.memory_bytes, 1)}）；分 {chunks} 块（{origin('ce_chunks')}），峰值降到 {d.gb(kept_assumed)}，"
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
            f"换成 selective（重算前向的 {d.pct(sc['selective_recompute_fraction'], 0)}，"
            f"{origin('selective_recompute_fraction')}；系数 "
            f"{d.num(proj['selective_recompute']['factor_selective'], 3)}）提速 **{d.times(g_recompute)}**，"
            f"每步 → {d.num(proj['selective_recompute']['step_time'], 1)} 秒。课程给出的是 1.21×。"
            "前提是显存放得下：下文“本次运行”一节按本场景的显存回答。")
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
per_rank = sc["samples_per_step"] / par["dp"]  # samples of one DP rank per step
feasible = float(per_rank / (2 * b)).is_integer()
by_lever = {a["lever"]: a for a in acc["advice"]}
mem_double = run.memory(sc.values, micro_batch=2 * b)
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
d.md(roof + f" 课程给的区间是 {d.times(low)}–{d.times(high)}（命名假设，不是推导）；按本场景 GEMM 的屋顶线算，"
     f"micro batch 翻倍只让带权重的 GEMM 快 {d.times(by_lever['micro_batch']['speedup'], 3)}。"
     f"可行性：DP = {par['dp']} 时每个 DP rank 每步分到 {d.count(per_rank)} 个样本，micro batch 从 {b} 到 "
     f"{2 * b} {'可以整除' if feasible else '不能整除，需先调整 global batch 或并行方式'}；"
     f"logits 也随之翻倍到 {d.gb(2 * logits)}，这是课程先做 ② 的原因。按模型，micro batch = {2 * b} 时负载最重的卡要 "
     f"{d.gb(mem_double['total'])}，{sc['gpu']} 有 {d.gb(mem_double['capacity'], 0)}："
     + ("放得下。" if mem_double["fits"] else "放不下。"))

# %% [markdown]
# ## ④ 上下文并行（CP）的整除约束
#
# CP 把每条序列切到几张卡上，缓解长序列的显存压力，是结构性的改动，而不是一个提速系数。
# 它有整除约束：$DP = \text{GPUs} / (TP \cdot PP \cdot CP)$（下表保留场景的 TP 和 PP，只改 CP）；
# global batch 要能平分到每个 DP rank；
# 负载均衡的 CP 把序列切成 $2 \cdot CP$ 段，序列长度要能整除；课程的设定里专家并行组取自 DP，
# EP 要整除 DP，专家数也要能平分到 EP 个 rank 上。

# %%
ep = sc["expert_parallel"]
if not moe:
    ep_text = "稠密模型，EP = 1"
elif source.get("expert_parallel") == "derived":
    ep_text = "课程的 EP 调整到能整除专家数和 DP 的最大值；设置 `expert_parallel` 可直接给定"
else:
    ep_text = origin("expert_parallel")
groups = sc["num_gpus"] // (par["tp"] * par["pp"])  # GPUs / (TP x PP): what CP x DP share
lays = layouts.layouts(groups, sc["samples_per_step"], sc["seq_len"], sc["num_experts"])
yes = lambda ok: "yes" if ok else "no"
d.table([[lay.cp, lay.dp, d.num(lay.samples_per_rank, 2), yes(lay.batch_divides), yes(lay.seq_divides),
          ", ".join(map(str, lay.expert_parallel)) if moe else "- (dense)",
          yes(lay.allows(ep)) if moe else "-"] for lay in lays],
        ["CP", "DP", "samples / DP rank", "batch divides", "seq_len / (2 CP)", "EP options",
         f"EP = {ep} ok"],
        f"Context parallelism on {sc['num_gpus']} GPUs with TP {par['tp']} and PP {par['pp']} kept "
        f"(CP x DP = {groups})")
pairs = layouts.valid_pairs(groups, sc["samples_per_step"], sc["seq_len"], sc["num_experts"])
usable_cp = sorted({cp for cp, _ in pairs})
if moe:
    cps_with_ep = [lay.cp for lay in lays if lay.allows(ep)]
    two = next((lay for lay in lays if lay.cp == 2), None)
    text = (f"合法的 (CP, EP) 组合共 {len(pairs)} 个：{', '.join(f'({c}, {e})' for c, e in pairs)}。"
            if pairs else "没有一个 (CP, EP) 组合满足全部整除约束。")
    text += (f"在 EP = {ep}（{ep_text}）下，能用的 CP 只有 {', '.join(map(str, cps_with_ep)) or '（没有）'}。")
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
k_att = sc["attention_kernel_speedup"]
g_att = levers.amdahl(share_actual, k_att)
d.table([[label, d.pct(f), d.times(levers.amdahl(f, k_att)), d.times(levers.amdahl_bound(f))]
         for label, f in ((actual_label + (", now (packed)" if packed else " (after packing)"),
                           share_actual),
                          ("padded length, B S^2" + (" (if padded)" if packed else ""), share_padded))],
        ["attention share of FLOPs", "share f", f"kernel {d.times(k_att, 1)} faster", "bound 1/(1-f)"],
        f"Attention kernel: leverage = attention share ({att['convention']})")
text = (f"按{actual_text}，注意力（{square}）占 **{d.pct(share_actual, 1)}**：kernel 快 "
        f"{d.times(k_att, 1)}（{origin('attention_kernel_speedup')}）整步快 **{d.times(g_att)}**，"
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
# 能省的最多是暴露在外的通信时间。课程测得它不到一步的 3%。本节用的份额是账里的 `share_used`：
# 团队在场景里给了实测的 `communication_share` 就用实测值，否则用按并行布局估出的通信时间
# （一个上界，下文“本次运行”一节细讲）。有意思的是，别的杠杆把计算压短之后，通信的份额会变大：

# %%
comm = acc["communication"]
comm_share = comm["share_used"]
if comm["basis"] == "measured":
    comm_basis = "团队实测，场景的 `communication_share`"
else:
    comm_basis = ("按并行布局的估计，是上界：没有任何重叠、链路跑满峰值；"
                  "设置 `communication_share` 可改为你的实测值")
overlap = by_lever["communication_overlap"]
g_comm_bound = overlap["speedup"]  # 1 / (1 - exposed share): Amdahl's bound on what overlap saves
exposed = 1 - 1 / g_comm_bound  # at most the step less the compute at the GPU's peak
busy = acc["attention"]["actual"]["hfu_with_attention"]  # the step's share the compute needs at peak
d.eq(r"f'", levers.share_after)
combined = acc["advice_combined"]
others = [by_lever[name] for name in combined["levers"] if name != "communication_overlap"]
g_others = 1.0
for lever in others:
    g_others *= lever["speedup"]
comm_after = levers.untouched_share_after(exposed, g_others)
comm_rank = [a["lever"] for a in acc["advice"]].index("communication_overlap") + 1
text = f"通信份额 {d.pct(comm_share, 1)}（{comm_basis}）"
if exposed < comm_share - 1e-9:
    text += (f"。但 GPU 就算跑在峰值，算完这一步也要 {d.pct(busy, 1)} 的时间（含注意力的 HFU），所以暴露在外的通信"
             f"最多 {d.pct(exposed, 1)}，其余的已经和计算重叠")
text += f"：重叠最多提速 **{d.times(g_comm_bound, 3)}**。"
if comm_share == 0:
    text += ("暴露在外的通信为 0，重叠没有可省的，别的杠杆压短计算也不会让它变大。" if comm["basis"] == "measured"
             else "本场景没有集合通信，这个杠杆不存在。")
elif g_others > 1:
    text += (f"若其余可行的杠杆（{keys([a['lever'] for a in others])}）合计 {d.times(g_others)} "
             f"而暴露的通信不变，它的份额会升到 {d.pct(comm_after, 1)}，重叠的上限也随之升到 "
             f"{d.times(levers.amdahl_bound(comm_after), 3)}。")
else:
    text += "本场景没有别的可行杠杆能压短计算，通信的份额不会因此变大。"
text += f"在本次运行的杠杆排序里，通信重叠排第 {comm_rank}（共 {len(acc['advice'])} 个，见下文）。"
d.md(text)

# %% [markdown]
# ## 课程的排序

# %%
valid_text = f"{len(pairs)} valid (CP, EP) pairs" if moe else f"CP in {usable_cp}"


def star(key):
    """A key as the tables show it: * when its value is the course's assumption."""
    if source.get(key) == "course":
        return key + "*"
    return key + (" (estimate)" if key == "communication_share" and source.get(key) == "derived" else "")


d.table([
    ["1", "packing", "multiplies", d.times(g_pack),
     "already packed" if packed else "computed: B S / D (if padding is real)"],
    ["2", "fused/chunked CE -> selective recompute", "multiplies", d.times(g_recompute),
     "computed: recompute factor ratio"],
    ["3", f"micro batch {b} -> {2 * b}", "multiplies",
     f"{d.times(low)}–{d.times(high)}" if feasible else "not divisible",
     f"assumption (course); GEMM roofline: {d.times(by_lever['micro_batch']['speedup'], 3)}"],
    ["4", "context parallelism", "structural", "-", valid_text],
    ["5", "attention kernel", "share-bounded",
     f"{d.times(g_att)} (<= {d.times(levers.amdahl_bound(share_actual))})",
     f"share computed, kernel gain {star('attention_kernel_speedup')}"],
    ["6", "communication overlap", "share-bounded", f"<= {d.times(g_comm_bound, 3)}",
     "measured share" if comm["basis"] == "measured" else "estimated share (upper bound)"],
], ["rank", "lever", "kind", "projected speedup", "basis"],
    "The six levers, course order (* the course's assumed value)")

# %% [markdown]
# ## 本次运行：放得下吗、通信多少、先做什么
#
# 上面按课程的顺序讲；一个团队要排的是自己这次运行的顺序。它取决于三件事：显存放不放得下
# （recompute 和 micro batch 的杠杆都要显存）、通信占多少（重叠这个杠杆有多长）、每个杠杆按本场景算出的
# 提速。账里三样都有：`acc["memory"]` 是负载最重的那张卡的显存，`acc["communication"]` 是一步里每个集合
# 通信的字节和秒数，`acc["advice"]` 是按提速排好的杠杆。
#
# ### 显存
#
# 负载最重的那张卡（有流水线时是第一段或最后一段）上有：权重、梯度和优化器状态（按 ZeRO stage 在数据
# 并行组里切分）；各层为反向保存的张量，乘以 1F1B 同时在途的 micro batch 数（full recompute 只存每层的
# 输入，外加反向时重建的一层）；以及 logits（BF16，fused 交叉熵不留 FP32 副本）。eager 注意力要把每个头的
# $s \times s$ 分数矩阵存下来，flash 不存。下图把本场景和几个杠杆需要的设置并排画出，虚线是显卡的显存；
# 其他设置都按 `costmodel.evaluate.run.memory` 重算。

# %%
import matplotlib.pyplot as plt

mem = acc["memory"]
alt = {}
if sc["attention_kernel"] != "flash":
    alt["flash"] = ("flash\nkernel", run.memory({**sc.values, "attention_kernel": "flash"}))
less = {"full": ("selective", "none"), "selective": ("none",), "none": ()}[sc["recompute"]]
for policy, label in (("selective", "selective\nrecompute"), ("none", "recompute\noff")):
    if policy in less:  # the recompute levers: less recomputation than now
        alt[policy] = (label, run.memory(sc.values, recompute=policy))
if sc["recompute"] == "full":
    alt["selective_ce"] = ("selective +\nchunked CE",
                           run.memory(sc.values, recompute="selective", logits_chunks=chunks))
alt["micro"] = (f"micro batch\nx2 ({2 * b})", mem_double)
alt["chunked"] = (f"chunked CE\n({chunks} chunks)", run.memory(sc.values, logits_chunks=chunks))
cases = [("scenario", mem), *alt.values()]
parts = ("weights", "gradients", "optimizer", "activations", "logits")
capacity = mem["capacity"] / 1e9
top = 1.15 * max(capacity, min(max(case["total"] for _, case in cases) / 1e9, 3 * capacity))
d.setup_plots()
fig, ax = plt.subplots()
labels = [label for label, _ in cases]
bottom = [0.0] * len(cases)
for part in parts:
    heights = [case[part] / 1e9 for _, case in cases]
    ax.bar(labels, heights, bottom=bottom, label=part)
    bottom = [low_ + h for low_, h in zip(bottom, heights)]
ax.axhline(capacity, color="black", linestyle="--", linewidth=1, label=f"capacity ({capacity:,.0f} GB)")
for label, case in cases:
    total = case["total"] / 1e9
    if total <= 0.9 * top:
        ax.text(label, total, f"{total:,.0f} GB", ha="center", va="bottom", fontsize=8)
    else:  # the bar runs off the axis: its total inside the bar's top
        ax.text(label, 0.97 * top, f"{total:,.0f} GB" + ("" if total <= top else "\n(off scale)"),
                ha="center", va="top", fontsize=8, bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
ax.set_ylim(0, top)
ax.set_title(f"Memory of the most loaded GPU ({sc['gpu']})")
ax.set_ylabel("GB per GPU")
ax.tick_params(axis="x", labelsize=8)
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
plt.show()


# %%
def verdict(case):
    if case["fits"]:
        return f"{d.gb(case['total'])}，放得下（余 {d.gb(case['headroom'])}）"
    return f"{d.gb(case['total'])}，放不下（超出 {d.gb(-case['headroom'])}）"


states = mem["weights"] + mem["gradients"] + mem["optimizer"]
course_memory_keys = [key for key in ("zero_stage", "grad_bytes") if source.get(key) == "course"]
text = (f"按模型，本场景负载最重的那张卡要 **{verdict(mem)}**（{sc['gpu']} 有 {d.gb(mem['capacity'], 0)}）："
        f"权重、梯度和优化器状态 {d.gb(states)}（ZeRO stage {sc['zero_stage']}，梯度 {sc['grad_bytes']} "
        f"字节/元素），激活 {d.gb(mem['activations'])}（recompute = `{mem['recompute']}`，同时在途 "
        f"{mem['in_flight']} 个 micro batch），logits {d.gb(mem['logits'])}。")
if course_memory_keys:
    text += ("其中 " + "、".join(f"`{key}`" for key in course_memory_keys) + " 是课程的假设；设置"
             + ("它" if len(course_memory_keys) == 1 else "它们") + "可改为你的实际设置。")
if not mem["fits"]:
    check = ("若这套设置确实在跑，说明场景里有键与实际设置不同（例如 `zero_stage`、并行方式、`micro_batch`），"
             "或者实际的做法省下了这里没有算到的显存：本模型按 Hugging Face 实现在 BF16 下为反向保存的张量计数，"
             "FP8 存激活、融合的 MoE permute kernel、只重算部分模块（例如只重算 RMSNorm 和 MLA 的上投影）、"
             "CPU offload 都不在其中（`acc[\"memory\"][\"convention\"]`）。")
    if "flash" in alt and alt["flash"][1]["fits"]:
        flash = alt["flash"][1]
        text += (f"放不下的原因是注意力 kernel：`{sc['attention_kernel']}` 为反向存下 s×s 的分数矩阵等，激活比 "
                 f"flash 多 {d.gb(mem['activations'] - flash['activations'])}；其他不变、换成 flash 要 "
                 f"{verdict(flash)}。若这套训练确实在跑，它用的多半不是 `{sc['attention_kernel']}`：把场景的 "
                 "`attention_kernel` 设成实际的 kernel。")
    elif "flash" in alt:
        text += f"换成 flash kernel 也要 {verdict(alt['flash'][1])}。" + check
    else:
        text += check
d.md(text)

if sc["recompute"] == "full":
    sel, sel_ce = alt["selective"][1], alt["selective_ce"][1]
    g_sel = by_lever["selective_recompute"]["speedup"]
    if sel["fits"]:
        answer = f"**能**：selective recompute 要 {verdict(sel)}，可以换，提速 {d.times(g_sel)}。"
    elif sel_ce["fits"]:
        answer = (f"单独换**不能**（{verdict(sel)}）；先用分块交叉熵（{chunks} 块）腾出 logits 的显存，"
                  f"就能：{verdict(sel_ce)}。下面的排序只看单独换，"
                  "所以那里记为不可行。")
    else:
        answer = (f"**不能**：selective recompute 要 {verdict(sel)}；先用分块交叉熵（{chunks} 块）也要 "
                  f"{d.gb(sel_ce['total'])}。它的 {d.times(g_sel)} 在本场景拿不到，除非先从别处省出显存"
                  f"（更大的 TP、PP 或 CP{'，更高的 ZeRO stage' if sc['zero_stage'] < 3 else ''}）。")
    answer = "课程说“显存允许就把 full recompute 换成 selective”。按本场景的显存，" + answer
elif sc["recompute"] == "selective":
    answer = f"本场景已经是 selective recompute；再关掉 recompute 要 {verdict(alt['none'][1])}。"
else:
    answer = "本场景没有开 recompute，“换成 selective”这一问不存在：没有重算可省。"
more = [answer]
if "none" in alt and sc["recompute"] == "full":
    more.append(f"完全关掉 recompute 要 {verdict(alt['none'][1])}。")
more.append(f"micro batch 从 {b} 加到 {2 * b} 要 {verdict(mem_double)}。")
chunked = alt["chunked"][1]
more.append(f"分块交叉熵（{chunks} 块，{origin('ce_chunks')}）腾出 {d.gb(mem['total'] - chunked['total'])}，"
            f"总计 {verdict(chunked)}：它省的是显存，不是时间。")
d.md("".join(more))

# %% [markdown]
# ### 通信
#
# 每个集合通信按它的组是否落在一个节点内取带宽：节点内走 NVLink，跨节点的组同时用 NVLink 和网络
# （`placement_rule` 写明了 rank 怎样排到节点上）；秒数是每卡收发的字节 ÷ 带宽。合计是**上界**：
# 假设没有任何重叠、每次传输都跑满链路峰值。团队实测了暴露在外的通信（`communication_share`）时，
# 图里把实测值画在估计旁边。

# %%
collectives = comm["collectives"]
step = sc["step_time"]
colour = {"intra-node": "tab:blue", "inter-node": "tab:orange"}
bars = [(c["name"], c["seconds"], colour.get(c["placement"], "tab:gray")) for c in collectives]
bars.append(("total (estimate,\nno overlap)", comm["seconds"], "tab:red"))
if comm["basis"] == "measured":
    bars.append(("measured exposed\n(communication_share)", comm_share * step, "tab:green"))
if comm["bubble_fraction"] > 0:
    bars.append(("pipeline bubble\n(idle, not communication)", comm["bubble_fraction"] * step, "tab:gray"))
fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(bars) + 1.4))
ax.barh([name for name, _, _ in bars], [sec for _, sec, _ in bars], color=[c for _, _, c in bars])
for name, sec, _ in bars:
    part = 100 * sec / step
    ax.text(sec, name, f" {sec:,.2f} s ({part:.{1 if part >= 1 else 2}f}%)", va="center", fontsize=8)
ax.invert_yaxis()
ax.set_xlim(0, 1.45 * max([sec for _, sec, _ in bars] + [1e-9]))
ax.set_title(f"Communication per step (step {step:,.1f} s; % of the step)")
ax.set_xlabel("seconds per step")
ax.tick_params(axis="y", labelsize=8)
handles = [plt.Rectangle((0, 0), 1, 1, color=colour[k]) for k in colour]
ax.legend(handles, ["intra-node (NVLink)", "inter-node (network)"], fontsize=8, loc="upper left",
          bbox_to_anchor=(1.0, 1.0))
plt.show()

# %%
names = {"intra-node": "节点内", "inter-node": "跨节点"}
text = (f"按并行布局（TP {par['tp']} × PP {par['pp']} × CP {par['cp']} × DP {par['dp']}，EP {par['ep']}"
        f"{'，sequence parallel' if par['sp'] else ''}），一步的集合通信每卡收发 {d.gb(comm['bytes_per_gpu'])}，"
        f"估计 {d.num(comm['seconds'], 2)} 秒，占一步的 {d.pct(comm['share'], 1)}。这是上界：没有任何重叠。")
if collectives:
    top_c = max(collectives, key=lambda c: c["seconds"])
    text += (f"最大的一项是 {d.text(top_c['name'], code=True)}（{d.num(top_c['seconds'], 2)} 秒，"
             f"{top_c['group_size']} 卡一组，{names.get(top_c['placement'], top_c['placement'])}）。")
else:
    text += "本场景没有集合通信。"
course_links = [key for key in ("gpus_per_node", "intra_node_bandwidth", "inter_node_bandwidth")
                if source.get(key) == "course"]
if course_links:
    text += ("其中 " + "、".join(f"`{key}`" for key in course_links) + " 用的是课程的默认值（带宽为 null 时取 GPU "
             "表的值）；设置这些键可改为你的实际值。")
if comm["basis"] == "measured":
    text += f"团队实测的暴露通信占一步的 **{d.pct(comm_share, 1)}**（场景的 `communication_share`），本节的结论用实测值。"
    if comm_share > comm["share"]:
        text += ("实测高于估计的上界：估计没有算到的开销（延迟、小消息、等待慢的 rank）或口径不同，以实测为准。")
    elif comm_share < comm["share"]:
        text += "实测低于估计的上界：有一部分通信已被计算掩盖。"
else:
    text += ("场景没有给实测的 `communication_share`，本节的结论用这个估计；它是上界，真实暴露在外的通信只会更少。"
             "设置 `communication_share` 可改为你的实测值。")
if comm["bubble_fraction"] > 0:
    text += (f"另外，流水线气泡占一步的 {d.pct(comm['bubble_fraction'], 1)}（1F1B，{par['pp']} 段，每条流水线每步 "
             f"{d.count(par['micro_batches'])} 个 micro batch）：那是空等，不是通信，由 `pipeline_bubble` 这个杠杆处理。")
d.md(text)

# %% [markdown]
# ### 杠杆，按本次运行排序
#
# `acc["advice"]` 给每个杠杆一个按本场景算出的提速、做完后的单步时间、是否可行（显存放得下、batch 能
# 整除、层数能切），以及它依赖的场景键；带 * 的键用的是课程的假设值，换成你的实测值，排序可能会变。

# %%
ranked = acc["advice"]
no_gain = lambda a: a["speedup"] < 1.0005  # noqa: E731  (shown as 1.00x)
d.table([[i, a["lever"], d.times(a["speedup"], 3), f"{a['step_time']:,.1f} s",
          "yes" if a["feasible"] else ("no gain" if no_gain(a) else "no"),
          ", ".join(star(key) for key in a["rests_on"]), a["note"]]
         for i, a in enumerate(ranked, start=1)],
        ["#", "lever", "speedup", "step time", "feasible", "rests on (* course assumption)", "note"],
        f"Levers ranked by speedup for this run (step {sc['step_time']:,.1f} s now)")
chosen = [by_lever[name] for name in combined["levers"]]
cap_text = (f"各杠杆连乘是 {d.times(combined['product'])}，但账里把合计封顶在 {d.times(combined['speedup'])}："
            "再快，GPU 就要超过峰值算力（按今天的硬件 FLOPs，含注意力）。"
            if combined.get("capped") else "")
blocked = [a for a in ranked if not a["feasible"] and not no_gain(a)]
first = ranked[0]
text = (f"按提速排，第一是 `{first['lever']}`（{d.times(first['speedup'])}，"
        + ("可行）。" if first["feasible"] else ("没有收益）。" if no_gain(first) else "在本场景不可行）。")))
if chosen:
    text += (f"可行且能一起做的杠杆是 {keys([a['lever'] for a in chosen])}，合计 "
             f"**{d.times(combined['speedup'])}**，每步 {d.num(sc['step_time'], 1)} 秒 → "
             f"{d.num(combined['step_time'], 1)} 秒（`acc[\"advice_combined\"]`"
             + ("；selective recompute 与关掉 recompute 只取其一）。"
                if {"selective_recompute", "recompute_off"} & set(combined["levers"]) else "）。"))
    text += cap_text
    if "communication_overlap" in combined["levers"] and comm["basis"] != "measured":
        text += ("通信重叠的提速按估计的通信份额算，而那是上界，所以这一项也只是上限；"
                 "把实测值写进 `communication_share` 再排。")
else:
    text += "没有一个杠杆在本场景既可行又有收益。"
if blocked:
    text += ("有收益但在本场景不可行的：" + "、".join(f"`{a['lever']}`（{d.times(a['speedup'])}）" for a in blocked)
             + "，原因见表里的 note。")
leaning = sorted({key for a in chosen for key in a["rests_on"] if source.get(key) == "course"})
if leaning:
    text += ("可行杠杆的提速依赖课程的假设值 " + "、".join(f"`{key}`" for key in leaning)
             + f"：设置{'这个键' if len(leaning) == 1 else '这些键'}可改为你的实测值。")
if not mem["fits"]:
    text += ("注意：按模型，本场景现在的设置就放不下（见上）；先把场景改成实际的设置再看排序，"
             "依赖显存的杠杆是否可行可能随之改变。")
d.md(text)

# %% [markdown]
# ### 瀑布图：按排序依次做，收益相乘
#
# 下图把可行的杠杆按上表的顺序依次作用在单步时间上：每个杠杆除以它的提速，所以收益相乘，终点是
# `acc["advice_combined"]`。

# %%
plan = [(a["lever"], a["speedup"]) for a in chosen]
steps = levers.waterfall(sc["step_time"], plan)
final = combined["step_time"]
fig, ax = plt.subplots()
label = lambda name: name.replace("_", "\n")  # noqa: E731
names = ["step time\n(scenario)", *[label(s["lever"]) for s in steps], "after\nlevers"]
ax.bar(names[0], sc["step_time"], color="gray")
for s in steps:
    ax.bar(label(s["lever"]), s["saved"], bottom=s["end"], color="tab:green")
    ax.text(label(s["lever"]), s["start"], f"/{s['speedup']:.2f}", ha="center", va="bottom", fontsize=9)
ax.bar(names[-1], final, color="tab:blue")
ax.text(names[0], sc["step_time"], f"{sc['step_time']:.1f} s", ha="center", va="bottom", fontsize=9)
ax.text(names[-1], final, f"{final:.1f} s" + ("\n(capped at peak)" if combined.get("capped") else ""),
        ha="center", va="bottom", fontsize=9)
ax.set_title("Step time waterfall through this run's feasible levers (ranked)")
ax.set_ylabel("seconds per step")
ax.set_xlabel("lever (applied left to right)")
ax.set_ylim(0, sc["step_time"] * 1.12)
ax.tick_params(axis="x", labelsize=8)
plt.show()

# %%
g_all = combined["speedup"]
g_added = 1 + sum(g - 1 for _, g in plan)  # the levers' gains added, the wrong way
g_rc = 1.0
for a in chosen:
    if a["lever"] in ("selective_recompute", "recompute_off"):
        g_rc *= a["speedup"]
hfu_all = acc["hfu"] * g_all / g_rc  # the hardware's FLOP rate after the levers
bounded = [a["lever"] for a in chosen
           if a["lever"] in ("attention_kernel", "communication_overlap", "load_balance", "pipeline_bubble")]
g_two = g_pack * g_recompute
text = (f"可行的杠杆依次做完：每步 {d.num(sc['step_time'], 1)} 秒 → **{d.num(final, 1)} 秒**，合计 "
        f"**{d.times(g_all)}**，MFU {d.pct(acc['mfu'])} → {d.pct(acc['mfu'] * g_all)}。"
        + (f"若误把收益相加（1 + Σ(g−1)），得到的是 {d.times(g_added)}。" if len(plan) > 1 else "")
        + ("最后一根柱子比各杠杆连乘的终点高：合计封顶于峰值算力（见上）。" if combined.get("capped") else ""))
if bounded:
    text += ("其中 " + "、".join(f"`{name}`" for name in bounded) + " 只作用于一步的一部分（Amdahl），提速按"
             "今天的份额算；前面的杠杆会改变那部分的份额，所以连乘只是估计，做完前面的要在新的份额上重算。")
sel_fits = sc["recompute"] != "full" or alt["selective"][1]["fits"]
text += (f"作为对照，课程的组合 packing × selective recompute 是 {d.times(g_two)}，每步 "
         f"{d.num(proj['packing_and_selective_recompute']['step_time'], 1)} 秒"
         + ("。" if sel_fits else "，但本场景的显存放不下 selective recompute，这个数拿不到。"))
if hfu_all > 1:
    text += (f"注意：按这些倍数，HFU 会到 {d.pct(hfu_all)}，超过 100%，不可能：本场景的单步里没有这么多可省的"
             "时间，至少有一个杠杆的前提（补齐真实存在、假设的 kernel 提速）不成立，或场景的输入需要核对。")
d.md(text)

# %% [markdown]
# ## 先量，再改
#
# 每个数字都依赖一个先要量出来的事实：是否真在补齐（决定 ① 是满额还是零），logits 和激活到底
# 占多少显存（决定 ② ③ 是否可行），真实的注意力宽度、层数和长度分布（决定 ⑤ 的杠杆），暴露在外的
# 通信占多少（决定 ⑥；量到了就写进 `communication_share`）。这些一天内都能量出来；量完再排，免得花
# 两周优化一个只占几个百分点的部分。
#
# ## 本节要点

# %%
d.md("\n".join([
    f"- 相乘型：packing **{d.times(g_pack)}**、selective recompute **{d.times(g_recompute)}**"
    + ("" if sel_fits else "（本场景显存放不下）")
    + f"、micro batch 翻倍（按 GEMM 屋顶线）{d.times(by_lever['micro_batch']['speedup'])}。",
    f"- 显存：本场景负载最重的卡要 {verdict(mem)}。" + (
        f"selective recompute 要 {verdict(alt['selective'][1])}。" if sc["recompute"] == "full" else ""),
    f"- logits 每个 micro batch {d.gb(logits)}；分 {chunks} 块只留 {d.gb(kept_assumed)}，腾出的显存可以用来"
    + ("换掉 full recompute、加大 micro batch。" if sc["recompute"] == "full" else "加大 micro batch。"),
    f"- 受份额约束：注意力 kernel 的杠杆是注意力份额 {d.pct(share_actual, 1)}（上限 "
    f"{d.times(levers.amdahl_bound(share_actual))}），通信重叠最多 {d.times(g_comm_bound, 3)}"
    f"（通信份额 {d.pct(comm_share, 1)}，{'实测' if comm['basis'] == 'measured' else '估计的上界'}）。",
    f"- 本次运行：排第一的是 `{first['lever']}`；可行的杠杆合计 {d.times(g_all)}"
    f"{'（连乘后封顶于峰值算力）' if combined.get('capped') else ''}，每步 "
    f"{d.num(sc['step_time'], 1)} 秒 → {d.num(final, 1)} 秒。",
    (f"- CP 受整除约束：EP = {ep} 时能用的 CP 只有 "
     f"{', '.join(str(lay.cp) for lay in lays if lay.allows(ep)) or '（没有）'}。" if moe else
     f"- CP 受整除约束：本场景可用的 CP 为 {', '.join(map(str, usable_cp)) or '（没有）'}。"),
]))
