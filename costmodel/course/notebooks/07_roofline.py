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
# # 07 Roofline：这张卡、这些算子，最多能跑多快
#
# 一个算子能跑多快，取决于两样东西谁先用完：算力（每秒多少 FLOPs）和显存带宽（每秒多少字节）。
# roofline 把这件事画成一张图：横轴是算子的运算强度（每字节 HBM 流量做多少 FLOPs），
# 纵轴是能达到的算力；左边是一条随强度上升的斜线（带宽限制），右边是一条水平线（峰值算力），
# 两者的拐点就是机器平衡点。本节推导运算强度，比较各种 GPU 的平衡点，把课程模型的真实算子放到图上，
# 最后回到课程的"典型 MFU"表，看本场景的 MFU 落在哪里。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"gpu": "H100-SXM"}

# %%
import sympy as sp

from costmodel import course
from costmodel.evaluate import gemms
from costmodel.present import display as d
from costmodel.derive import roofline
from costmodel.inputs import hardware
from costmodel.derive.symbols import k_dim, m, n

sc, acc = d.load(scenario_file, overrides)
is_moe = sc["num_experts"] > 0
balance = acc["machine_balance"]
d.md(f"场景：**{d.text(sc['name'])}**（{sc['num_gpus']} × {sc['gpu']}，峰值 {d.tflops(sc['peak_flops'])}，"
     f"HBM 带宽 {d.num(sc['hbm_bandwidth'] / 1e12, 2)} TB/s，机器平衡点 **{d.num(balance, 1)} FLOP/byte**）。")

# %% [markdown]
# ## 1. 运算强度：从一个矩阵乘推出来
#
# (m × k)(k × n) 的矩阵乘做 2mnk 次浮点运算；若两个输入各从 HBM 读一次、输出写一次，
# 每个元素 β 字节（BF16 为 2），流量是 β(mk + kn + mn)。两者相除就是运算强度。
# 机器平衡点是峰值除以带宽；能达到的算力是峰值与"强度 × 带宽"中较小的那个。

# %%
x = sp.Symbol("x", positive=True)
d.eq(r"\mathrm{AI}", roofline.gemm_intensity)
d.eq(r"\mathrm{balance}", roofline.machine_balance)
d.eq(r"P_{\text{attainable}}", roofline.attainable)
d.eq(r"\mathrm{AI}\big|_{m=n=k=x}", sp.simplify(roofline.gemm_intensity.subs({m: x, n: x, k_dim: x})))
d.eq(r"\lim_{x\to\infty}\mathrm{AI}\big|_{n=k=x}",
     sp.limit(roofline.gemm_intensity.subs({n: x, k_dim: x}), x, sp.oo))

# %% [markdown]
# 两个极限说明了一切：方阵乘的强度随边长线性增长，很容易越过平衡点；而一边很窄（m 行很少，
# 比如 micro batch 小、专家分到的 token 少）的矩阵乘，强度封顶在 2m/β，即 BF16 下约等于 m。
# 权重再大也没用，行数决定了上限。

# %% [markdown]
# ## 2. 机器平衡点：H20 与 H100
#
# 平衡点越高，算子需要越高的运算强度才能喂饱这张卡。下表是 `costmodel.inputs.hardware` 里每张卡的
# 稠密 BF16 峰值、HBM 带宽和平衡点（都不含稀疏加速）。

# %%
h100 = hardware.GPUS["H100-SXM"]
h20 = hardware.GPUS["H20"]
rows = [(g.name, d.num(g.bf16_flops / 1e12, 1), d.num(g.hbm_bandwidth / 1e12, 3), d.num(g.balance, 1),
         d.times(g.balance / h100.balance, 3), g.source)
        for g in sorted(hardware.GPUS.values(), key=lambda g: g.balance)]
d.table(rows, ["GPU", "BF16 TFLOP/s", "HBM TB/s", "平衡点 FLOP/byte", "相对 H100-SXM", "来源"],
        "各 GPU 的机器平衡点（按平衡点从低到高）")
ratio = sp.nsimplify(h20.balance / h100.balance, rational=True)
d.eq(r"\frac{\mathrm{balance}_{H20}}{\mathrm{balance}_{H100}}",
     rf"\frac{{{h20.balance:.1f}}}{{{h100.balance:.1f}}}", f"{float(ratio):.4f}",
     rf"\frac{{1}}{{{1 / float(ratio):.2f}}}")

# %%
table_balance = hardware.GPUS[sc["gpu"]].balance
d.md(f"H20 的平衡点只有 H100 的 {d.pct(h20.balance / h100.balance, 1)}，约 1/{1 / float(ratio):.0f}："
     f"它的带宽是 H100 的 {d.pct(h20.hbm_bandwidth / h100.hbm_bandwidth, 0)}，"
     f"算力却只有 H100 的 {d.pct(h20.bf16_flops / h100.bf16_flops, 0)}。同一个算子，在 H100 上受带宽限制，"
     "在 H20 上可能早已受算力限制。课程说 H20 是\"弱算力卡\"，指的正是这一点。"
     + (f"本场景的 GPU 是 {sc['gpu']}，平衡点 {d.num(balance, 1)} FLOP/byte。"
        if abs(balance - table_balance) < 1e-9 else
        f"本场景的 GPU 是 {sc['gpu']}，但峰值或带宽被场景改写了，平衡点按场景算是 {d.num(balance, 1)} FLOP/byte"
        f"（表中为 {d.num(table_balance, 1)}）。"))

# %% [markdown]
# ## 3. 把模型的真实算子放到 roofline 上
#
# 取本场景模型（课程场景下即 Qwen3.6-35B-A3B）的**全部**矩阵乘，在 micro batch 1 和 4 下各算一次运算强度。
# 这张 GEMM 表与 06、08、10 用的是同一份（`costmodel.evaluate.gemms.model_gemms`，命令行 `costmodel gemms`），
# 宽度来自模型的真实 config（场景没有 config、结构键也不是课程模型时，由场景的键构造，假设写在来源里）：
#
# - **注意力投影**：标准注意力把 Q、K、V 融合成一个 GEMM，n = (query 头数，有输出门时 × 2 + 2 × KV 头数) × head_dim；
#   GQA 的 KV 头比 query 头少，n 也就比 3 × hidden 小。MLA（如 DeepSeek-V3）换成 q_a / q_b、kv_a / kv_b
#   几个低秩投影。然后是注意力输出投影。
# - **gated DeltaNet 线性注意力层**的输入、输出投影（模型有这种层时；层内的递推本身不是 GEMM，不在表里，见 05）。
# - **FFN**：稠密层的 gate + up 与 down；MoE 层的 router、一个路由专家的 gate + up 与 down
#   （行数是 EP 组汇集之后的，见 06）、共享专家，以及共享专家那个只有 1 列输出的 gate。
# - 计入 MTP 层时的 **MTP 投影**，以及 **lm_head**。
# - **注意力核心**：每个头的 QKᵀ [S, d_h] × [d_h, S] 与 A·V [S, S] × [S, d_v]，两边都是激活、没有权重，
#   与 micro batch 无关。
#
# 表中"前向 FLOPs 占比"是每一行在每个 token 的前向 FLOPs（表内全部 GEMM）里所占的份额，层数和 top-k
# 次数都已乘上；注意力核心按场景的 `attention_flops` 计（causal 只算 s × s 的一半）。
# "受限于"对照本场景 GPU 的平衡点；可达峰值按 min(峰值, 强度 × 带宽) 计算。

# %%
BATCHES = (1, 4)
ZH = {"qkv": "Q/K/V 融合投影", "q_a": "MLA q_a", "q_b": "MLA q_b", "q": "MLA q", "kv_a": "MLA kv_a",
      "kv_b": "MLA kv_b", "attention_output": "注意力输出投影", "linear_in": "线性注意力输入投影",
      "linear_out": "线性注意力输出投影", "dense_gate_up": "稠密 FFN gate + up", "dense_down": "稠密 FFN down",
      "router": "router", "expert_gate_up": "路由专家 gate + up", "expert_down": "路由专家 down",
      "shared_gate_up": "共享专家 gate + up", "shared_down": "共享专家 down",
      "shared_expert_gate": "共享专家的 gate（1 列）", "mtp_projection": "MTP 投影", "lm_head": "lm_head",
      "attention_scores": "每头的 QKᵀ", "attention_values": "每头的 A·V"}
BOUND = {"compute": "算力", "memory": "带宽"}


def op_label(op):
    return ZH.get(op["key"], op["name"])


def share_text(x):
    """A share of the forward FLOPs; tiny ones stay visible."""
    return d.pct(x, 2) if x >= 1e-4 or x == 0 else "< 0.01%"


roofs = [(g.name, g.bf16_flops, g.hbm_bandwidth) for g in (h20, h100)]
if (sc["gpu"], sc["peak_flops"], sc["hbm_bandwidth"]) not in roofs:  # another GPU, or changed figures
    roofs = [r for r in roofs if r[0] != sc["gpu"]] + [
        (sc["gpu"] + ("" if sc["gpu"] not in ("H20", "H100-SXM") else " (scenario)"), sc["peak_flops"],
         sc["hbm_bandwidth"])]
listed = {b: gemms.model_gemms(sc.values, b) for b in BATCHES}
# A row of zero width (a projection whose widths the scenario does not give) is left out.
ops = {b: [op for op in listed[b] if op["k"] and op["n"]] for b in BATCHES}
empty = [op["key"] for op in listed[BATCHES[0]] if not (op["k"] and op["n"])]
first = ops[BATCHES[0]]
assert all([op["key"] for op in ops[b]] == [op["key"] for op in first] for b in BATCHES)
packed = sc["batching"] == "packed"
# Packed: a token attends within its document, over sum(s_i^2) / D positions rather than S.
core_scale = sc["sum_squared_lengths"] / sc["tokens_per_step"] / sc["seq_len"] if packed else 1.0
fwd = {op["key"]: op["forward_flops_per_token"] * (1 if op["weights"] else core_scale) for op in first}
fwd_total = sum(fwd.values())
rows = []
for i, op in enumerate(first):
    row = [op_label(op), f"[{d.num(op['m'])}, {d.num(op['k'])}] × [{d.num(op['k'])}, {d.num(op['n'])}]",
           f"{op['layers']}" + (f" × {op['uses_per_token']}" if op["uses_per_token"] != 1 else ""),
           share_text(fwd[op["key"]] / fwd_total)]
    row += [d.num(ops[b][i]["intensity"], 1) for b in BATCHES] + [BOUND[op["bound"]]]
    row += [d.pct(roofline.attainable_flops(op["intensity"], peak, bw) / peak, 0) for _, peak, bw in roofs]
    rows.append(row)
d.table(rows, ["算子", f"形状（micro batch {BATCHES[0]}）", "层数 × 次数", "前向 FLOPs 占比"]
        + [f"强度 mb={b}" for b in BATCHES] + [f"受限于（{sc['gpu']}，mb={BATCHES[0]}）"]
        + [f"{name} 可达峰值（mb={BATCHES[0]}）" for name, _, _ in roofs],
        "本场景模型的全部矩阵乘：运算强度（FLOP/byte）与 roofline 允许的峰值比例（注意力核心的 FLOPs："
        + ("完整的 s × s" if sc["attention_flops"] == "full" else "causal，只算 s × s 的一半") + "）")
by_key = {op["key"]: op for op in first}
notes = []
if "qkv" in by_key:
    qkv = by_key["qkv"]
    notes.append(f"融合 Q/K/V 的 n = {d.num(qkv['n'])}，是 hidden（{d.num(qkv['k'])}）的 "
                 f"{d.num(qkv['n'] / qkv['k'], 2)} 倍；库里这一行写明了头数：{d.text(qkv['name'])}。")
if packed:
    notes.append(f"本场景把样本打包（packed）：注意力按文档计算，一个 token 平均只与 Σs²/D = "
                 f"{d.num(sc['sum_squared_lengths'] / sc['tokens_per_step'])} 个位置做注意力（Σs² 取自 {d.text(sc['sum_squared_lengths_from'], code=True)}），"
                 f"不是 S = {d.num(sc['seq_len'])}；表中注意力核心两行的 FLOPs 占比已按此折算，形状和强度仍按一条 S 长的序列列出"
                 "（文档更短时强度略低，上限仍是 d_h）。")
notes.append("注意力核心两行的强度按 s × s 的分数矩阵经 HBM 写出再读回计算（不融合的写法）"
             + ("；本场景的 attention_kernel 是 flash，分数块留在片上，这两行实际的 HBM 流量更少、强度更高，"
                "表中对它们的\"受限于\"判断偏保守。" if sc["attention_kernel"] == "flash" else "。"))
if empty:
    notes.append("库的 GEMM 表里 " + "、".join(empty) + " 的宽度为 0（场景没有给出这些投影的宽度），表中略去。")
source_parts = list(dict.fromkeys(part for op in first for part in op["source"].split("; ")
                                  if not part.startswith("rows of")))
notes.append("形状来源（库的原话）：" + d.text("; ".join(source_parts), code=True) + "。")
d.md("".join(notes))

# %%
import matplotlib.pyplot as plt
import numpy as np

d.setup_plots()
fig, ax = plt.subplots(figsize=(9, 5))
ai_grid = np.geomspace(0.5, 2e4, 300)
palette = plt.get_cmap("tab20").colors
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
for j, (name, peak, bw) in enumerate(roofs):
    ax.plot(ai_grid, np.minimum(peak, ai_grid * bw) / 1e12, color="black",
            ls=["-", "--", ":"][j], lw=1.2, label=f"{name} roof (balance {peak / bw:.0f})")
for i, op in enumerate(first):
    color = palette[i % len(palette)]
    for b in BATCHES:
        ai = ops[b][i]["intensity"]
        is_first = b == BATCHES[0]
        for name, peak, bw in roofs:
            ax.plot([ai], [roofline.attainable_flops(ai, peak, bw) / 1e12], "o" if is_first else "^",
                    color=color, ms=6 if is_first else 10, mfc=color if is_first else "none", mew=1.4,
                    zorder=4 if is_first else 3,
                    label=op["key"] if is_first and name == roofs[0][0] else None)
ax.plot([], [], "o", color="grey", ms=6, label=f"filled circle: mb={BATCHES[0]}")
ax.plot([], [], "^", color="grey", ms=10, mfc="none", mew=1.4, label=f"open triangle: mb={BATCHES[-1]}")
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("arithmetic intensity (FLOP/byte, BF16)")
ax.set_ylabel("attainable TFLOP/s")
ax.set_title("Roofline: every GEMM of the scenario model on " + " and ".join(name for name, _, _ in roofs))
ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
plt.show()

# %%
text = []
for name, peak, bw in roofs:
    below = [op_label(op) for op in first if op["intensity"] < peak / bw]
    if below:
        text.append(f"在 {name} 上，micro batch {BATCHES[0]} 时低于平衡点的是：" + "、".join(below))
    else:
        text.append(f"在 {name} 上，micro batch {BATCHES[0]} 时表里的 {len(first)} 个矩阵乘全都高于平衡点")
memory = [op for op in first if op["bound"] == "memory"]
memory_share = sum(fwd[op["key"]] for op in memory) / fwd_total
near = [op for op in first if op["bound"] == "compute" and op["intensity"] < 2 * balance]
weights_compute = [op for op in first if op["weights"] and op["bound"] == "compute"]
claim = (f"课程说 micro batch = 1 时很多算子的运算强度会掉到平衡点附近甚至以下。按这张表，在 {sc['gpu']}（平衡点 "
         f"{d.num(balance, 1)}）上 micro batch {BATCHES[0]} 时，{len(first)} 个矩阵乘里受带宽限制的"
         + (f"有 {len(memory)} 个（{'、'.join(op_label(op) for op in memory)}，FLOPs 占比 "
            f"{share_text(memory_share)}）" if memory else "一个也没有")
         + "；把\"附近\"算作平衡点的 2 倍以内，"
         + (f"另有 {len(near)} 个（{'、'.join(op_label(op) for op in near)}）" if near else "没有一个落在这个范围"))
if weights_compute:
    lowest = min(weights_compute, key=lambda op: op["intensity"])
    claim += (f"；受算力限制的权重 GEMM 中强度最低的是「{op_label(lowest)}」，{d.num(lowest['intensity'], 1)}，"
              f"是平衡点的 {d.times(lowest['intensity'] / balance, 1)}")
if memory_share >= 0.5:
    claim += "。所以就本模型的矩阵乘而言，课程这句话成立：大半的 FLOPs 落在带宽限制一侧。"
elif not memory and not near:
    claim += ("。所以就本模型的矩阵乘而言，课程这句话不成立：在这张卡上它们都在平衡点的 2 倍以上；"
              "这句话更适合描述表外那些没有权重复用的算子。")
else:
    claim += (f"。所以就本模型的矩阵乘而言，课程这句话只对上面列出的 {len(memory) + len(near)} 个成立"
              f"（FLOPs 占比合计 {share_text(sum(fwd[op['key']] for op in memory + near) / fwd_total)}）；"
              "这句话更适合描述表外那些没有权重复用的算子。")
if "shared_expert_gate" in by_key:
    gate = by_key["shared_expert_gate"]
    lowest_balance = min(g.balance for g in hardware.GPUS.values())
    claim += (f"共享专家的 gate 是 [M, {d.num(gate['k'])}] × [{d.num(gate['k'])}, 1]：输出只有 1 列，实际是矩阵-向量乘，"
              f"强度 {d.num(gate['intensity'], 1)} FLOP/byte，"
              + ("低于表中每一张 GPU 的平衡点、与 micro batch 无关，是**受带宽限制**的；"
                 if gate["intensity"] < lowest_balance else f"在 {sc['gpu']} 上受{BOUND[gate['bound']]}限制；")
              + f"它的 FLOPs 占比只有 {share_text(fwd['shared_expert_gate'] / fwd_total)}，耗时却是把 M × hidden 的激活再读一遍。")
d.md("；".join(text) + "。" + claim
     + "同一组算子，平衡点低的卡上更容易受算力限制，平衡点高的卡上更容易受带宽限制。"
     f"micro batch 从 {BATCHES[0]} 到 {BATCHES[-1]} 只移动权重矩阵乘的点，而且行数已大时移动得很少（见 06）；"
     "注意力核心的强度被每头宽度封顶，不随 micro batch 变。图上看不到的是没有权重复用的算子"
     "（norm、激活、残差加" + ("、MoE 的 permute" if is_moe else "")
     + "）：它们的强度在 1 FLOP/byte 上下，在任何一张卡上都受带宽限制。"
     "roofline 只给出上限：一个算子在平衡点之上，只说明带宽不是瓶颈，并不保证它真能跑到峰值。")

# %% [markdown]
# ## 4. 课程的"典型 MFU"表，以及本场景落在哪里
#
# 课程给了一张参考坐标系（下表原样引用课程，都是 6ND 口径的 MFU；这些区间是课程的经验值，
# 不是本库算出来的）。比较 MFU 时，模型形状、序列长度、GPU 和计数口径都要对齐才有意义。

# %%
COURSE_MFU_TABLE = [(row["zh"], row["en"], *map(course.number, row["range"]))  # the course's quote
                    for row in course.figures()["typical_mfu"]["rows"]]
d.table([(zh, f"{lo * 100:.0f}% – {hi * 100:.0f}%") for zh, _, lo, hi in COURSE_MFU_TABLE],
        ["场景（课程原文）", "典型 MFU（课程）"], "课程的典型 MFU 表（引用）")

# %%
mfu, hfu = acc["mfu"], acc["hfu"]
inside = [zh for zh, _, lo, hi in COURSE_MFU_TABLE if lo <= mfu <= hi]
long_seq = sc["seq_len"] >= 32768
weak = sc["peak_flops"] < 0.5 * h100.bf16_flops
if is_moe and long_seq:
    nearest = COURSE_MFU_TABLE[4 if weak else 3]
elif is_moe:
    nearest = COURSE_MFU_TABLE[2]
elif long_seq:
    nearest = COURSE_MFU_TABLE[1]
elif sc["seq_len"] <= 8192:
    nearest = COURSE_MFU_TABLE[0]
else:
    nearest = None
setting = (f"{'MoE ' if is_moe else '稠密'}模型、配置长度 {d.num(sc['seq_len'])}、micro batch {sc['micro_batch']}、"
           f"{sc['gpu']}（{'弱算力卡' if weak else '峰值不低于 H100 一半'}）")
if nearest is None:
    place = ("课程的表里没有与之对应的一行（序列长度介于前两行之间），"
             f"按前两行推断，典型值应在 {COURSE_MFU_TABLE[1][2] * 100:.0f}%–{COURSE_MFU_TABLE[0][3] * 100:.0f}% 之间")
    lo_n, hi_n = COURSE_MFU_TABLE[1][2], COURSE_MFU_TABLE[0][3]
else:
    zh, _, lo_n, hi_n = nearest
    place = f"按设置粗略归类，最接近课程表里的「{zh}」（{lo_n * 100:.0f}%–{hi_n * 100:.0f}%）"
if mfu < lo_n:
    verdict = "低于这个区间：同类设置下还有明显的提升空间，值得先查 padding、重算和通信（见 08）"
elif mfu > hi_n:
    verdict = "高于这个区间：先确认计数口径（是否误用了总参数、是否把注意力或重算算进了分子）"
else:
    pos = (mfu - lo_n) / (hi_n - lo_n)
    verdict = ("落在这个区间的" + ("下沿" if pos < 1 / 3 else "中段" if pos < 2 / 3 else "上沿")
               + "：就这种形状和这张卡而言属于正常水平，但正常不等于没有优化空间")
d.md(f"本场景是{' ' if is_moe else ''}{setting}，6ND 口径的 MFU 为 **{d.pct(mfu)}**"
     + (f"（HFU {d.pct(hfu)}）" if sc["recompute"] != "none" else "") + f"。{place}，本场景的 MFU {verdict}。"
     + ("按数值，它落在课程表的「" + "」「".join(inside) + "」区间"
        + ("。" if nearest and nearest[0] in inside else "，但那些行的设置与本场景不同，数值落在哪一格并不说明什么。")
        if inside else "按数值，它不在课程表的任何一个区间里。"))

# %%
fig, ax = plt.subplots()
labels = [en for _, en, _, _ in COURSE_MFU_TABLE]
for i, (_, _, lo, hi) in enumerate(COURSE_MFU_TABLE):
    ax.barh(i, 100 * (hi - lo), left=100 * lo, color=colors[0], alpha=0.6)
ax.axvline(100 * mfu, color="black", lw=1.5, label=f"scenario MFU {100 * mfu:.2f}%")
if sc["recompute"] != "none":
    ax.axvline(100 * hfu, color="black", lw=1, ls="--", label=f"scenario HFU {100 * hfu:.2f}%")
ax.set_yticks(range(len(labels)), labels)
ax.invert_yaxis()
ax.set_xlim(0, max(55, 110 * max(mfu, hfu)))
ax.set_xlabel("MFU (%), 6ND convention")
ax.set_title("Typical MFU by setting (the course's table) and this scenario")
ax.legend(fontsize=8, loc="lower right")
plt.show()

# %% [markdown]
# ## 本节要点

# %%
d.md("\n".join([
    "- 运算强度 = 2mnk / (β(mk + kn + mn))；窄矩阵乘的强度封顶在 2m/β，行数决定上限。",
    f"- H20 的平衡点 {d.num(h20.balance, 1)} FLOP/byte，H100-SXM 为 {d.num(h100.balance, 1)}，"
    f"比值约 1/{1 / float(ratio):.0f}；本场景的 {sc['gpu']} 为 {d.num(balance, 1)}。",
    "- " + "；".join(text) + "。",
    f"- 在 {sc['gpu']} 上 micro batch {BATCHES[0]} 时，{len(first)} 个矩阵乘里受带宽限制的"
    + (f"有 {len(memory)} 个（{'、'.join(op_label(op) for op in memory)}，FLOPs 占比 {share_text(memory_share)}）"
       if memory else "一个也没有")
    + "；课程说的\"很多算子掉到平衡点附近或以下\"，在本模型的矩阵乘里"
    + ("成立。" if memory_share >= 0.5 else "不成立。" if not memory and not near else "只对少数几个成立。"),
    f"- 本场景 MFU {d.pct(mfu)}：{place}，{verdict}。",
]))
