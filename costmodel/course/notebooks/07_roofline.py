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
# 取本场景模型（课程场景下即 Qwen3.6-35B-A3B）四个有代表性的矩阵乘，在 micro batch 1 和 4 下各算一次运算强度。
# 这张算子表与 08、10 用的是同一份（`costmodel.evaluate.gemms.model_gemms`）：
#
# - **注意力投影** [b·S, h] × [h, d]：hidden 到注意力宽度 d 的一个投影；
# - **专家 FFN** 第一个投影 [M_expert, h] × [h, w_e]，M_expert 是一个专家一次 GEMM 的行数（见 06）；
#   稠密模型改为稠密 FFN [b·S, h] × [h, w]；
# - **每头的 QKᵀ** [S, d_h] × [d_h, S]，与 micro batch 无关；
# - **lm_head** [b·S, h] × [h, V]。
#
# 专家宽度、EP 大小和 head_dim 的取法与 06 相同（有名字的假设）。可达算力按 min(峰值, 强度 × 带宽) 计算。

# %%
BATCHES = (1, 4)
ZH = {"attention_projection": "注意力投影", "expert": "专家 FFN", "dense_ffn": "稠密 FFN",
      "attention_core": "每头的 QKᵀ", "lm_head": "lm_head"}

gpus = [h20, h100] + ([] if sc["gpu"] in ("H20", "H100-SXM") else [hardware.GPUS[sc["gpu"]]])
ops = {b: gemms.model_gemms(sc.values, b, assume_head_dim=True) for b in BATCHES}
rows = []
for i, op in enumerate(ops[BATCHES[0]]):
    row = [ZH[op["key"]], f"[{d.num(op['m'])}, {d.num(op['k'])}] × [{d.num(op['k'])}, {d.num(op['n'])}]"]
    row += [d.num(ops[b][i]["intensity"], 1) for b in BATCHES]
    row += [d.pct(roofline.attainable_flops(op["intensity"], g.bf16_flops, g.hbm_bandwidth) / g.bf16_flops, 0)
            for g in gpus]
    rows.append(row)
d.table(rows, ["算子", f"形状（micro batch {BATCHES[0]}）"] + [f"强度 mb={b}" for b in BATCHES]
        + [f"{g.name} 可达峰值（mb={BATCHES[0]}）" for g in gpus],
        "本场景模型的矩阵乘：运算强度（FLOP/byte）与 roofline 允许的峰值比例")

# %%
import matplotlib.pyplot as plt
import numpy as np

d.setup_plots()
fig, ax = plt.subplots()
ai_grid = np.geomspace(1, 2e4, 300)
colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
for j, g in enumerate(gpus):
    ax.plot(ai_grid, np.minimum(g.bf16_flops, ai_grid * g.hbm_bandwidth) / 1e12, color="black",
            ls=["-", "--", ":"][j], lw=1.2, label=f"{g.name} roof (balance {g.balance:.0f})")
markers = {BATCHES[0]: "o", BATCHES[-1]: "^"}
for i in range(len(ops[BATCHES[0]])):
    for b in BATCHES:
        name, ai = ops[b][i]["name"], ops[b][i]["intensity"]
        for g in gpus:
            first = b == BATCHES[0]
            ax.plot([ai], [roofline.attainable_flops(ai, g.bf16_flops, g.hbm_bandwidth) / 1e12], markers[b],
                    color=colors[i], ms=6 if first else 11, mfc=colors[i] if first else "none",
                    mew=1.4, zorder=3, label=f"{name}, mb={b}" if g is gpus[0] else None)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("arithmetic intensity (FLOP/byte, BF16)")
ax.set_ylabel("attainable TFLOP/s")
ax.set_title("Roofline: the scenario model's GEMMs on " + " and ".join(g.name for g in gpus))
ax.legend(fontsize=7, loc="lower right", ncol=2)
plt.show()

# %%
below = {g.name: [ZH[op["key"]] for op in ops[BATCHES[0]] if op["intensity"] < g.balance] for g in gpus}
text = []
for g in gpus:
    if below[g.name]:
        text.append(f"在 {g.name} 上，micro batch {BATCHES[0]} 时低于平衡点的是" + "、".join(below[g.name]))
    else:
        text.append(f"在 {g.name} 上，micro batch {BATCHES[0]} 时这四个矩阵乘全都高于平衡点")
d.md("；".join(text) + "。"
     "同一组算子，平衡点低的卡上更容易受算力限制，平衡点高的卡上更容易受带宽限制。"
     f"micro batch 从 {BATCHES[0]} 到 {BATCHES[-1]} 只移动权重矩阵乘的点，而且行数已大时移动得很少（见 06）；"
     "QKᵀ 的强度被 d_h 封顶，不随 micro batch 变。图上看不到的是没有权重复用的算子"
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
    f"- 运算强度 = 2mnk / (β(mk + kn + mn))；窄矩阵乘的强度封顶在 2m/β，行数决定上限。",
    f"- H20 的平衡点 {d.num(h20.balance, 1)} FLOP/byte，H100-SXM 为 {d.num(h100.balance, 1)}，"
    f"比值约 1/{1 / float(ratio):.0f}；本场景的 {sc['gpu']} 为 {d.num(balance, 1)}。",
    "- " + "；".join(text) + "。",
    f"- 本场景 MFU {d.pct(mfu)}：{place}，{verdict}。",
]))
