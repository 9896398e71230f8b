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
# 一个算子能跑多快，取决于两样东西谁先用完：算力（每秒多少 FLOPs）和显存带宽（每秒多少字节）。roofline 把这件事画成一张图：横轴是算子的运算强度（每字节 HBM 流量做多少 FLOPs），纵轴是能达到的算力；左边是一条随强度上升的斜线（带宽限制），右边是一条水平线（峰值算力），两者的拐点就是机器平衡点。本节推导运算强度，比较各种 GPU 的平衡点，把课程模型的真实算子放到图上，回到课程的“典型 MFU”表看本场景的 MFU 落在哪里，最后逐条对照课程关于 roofline 的说法。

# %% [markdown] tags=["lab-only"]
# **换成你自己的场景。** 本节的结论主要随这几个键变化：`gpu`（决定峰值算力和 HBM 带宽，也就决定平衡点）、`hbm_bandwidth`（或 `peak_flops`，只改一张卡的某个数字时用）、`seq_len`（每条序列的 token 数，即矩阵乘的行数）和 `expert_parallel`（一个路由专家的 GEMM 汇集多少张卡的 token）。下一个代码格里，`scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 用来改单个键，例如 `{"step_time": 90}` 或 `{"gpu": "H100-SXM"}`。改完以后请重启内核并全部重新运行（Kernel → Restart Kernel and Run All Cells），后面每个数字都会按新场景重算。
#
# 本页各个数的口径（N 怎么数、模型与硬件 FLOPs、注意力项）以及与 Megatron-LM、nanoGPT、torchtitan 等的差别，见 [docs/conventions.md](../docs/conventions.md)。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"gpu": "H100-SXM"}

# %% tags=["remove-input"]
import sympy as sp

from costmodel import course
from costmodel.derive import plain, roofline
from costmodel.derive.symbols import k_dim, m, n
from costmodel.evaluate.simulate import compute_time, gemms
from costmodel.inputs import efficiency, gemm_efficiency, hardware
from costmodel.inputs.attention_kernels import KIND
from costmodel.inputs.gemm_efficiency import K_OVERHEAD
from costmodel.present import display as d
from costmodel.present import words

sc, acc = d.load(scenario_file, overrides)
balance = acc["machine_balance"]  # the scenario's peak / HBM bandwidth, FLOP per byte
is_moe = sc.num_experts > 0
kernel_kind = KIND[sc.attention_kernel]  # flash or eager, whichever family the key names
own = bool(sc.changed)  # a team's scenario, not the course's

# %% [markdown]
# 场景：**{{ sc.name }}**（{{ sc.num_gpus }} × {{ sc.gpu }}，峰值 {{ sc.peak_flops|tflops }}，HBM 带宽 {{ (sc.hbm_bandwidth / 1e12)|num(2) }} TB/s，机器平衡点 **{{ balance|num(1) }} FLOP/byte**）。

# %% [markdown]
# ## 1. 运算强度：从一个矩阵乘推出来
#
# (m × k)(k × n) 的矩阵乘做 2mnk 次浮点运算；若两个输入各从 HBM 读一次、输出写一次，每个元素 β 字节（BF16 为 2），流量是 β(mk + kn + mn)。两者相除就是运算强度。机器平衡点是峰值除以带宽；能达到的算力是峰值与“强度 × 带宽”中较小的那个。

# %%
x = sp.Symbol("x", positive=True)
d.eq(r"\mathrm{AI}", roofline.gemm_intensity)
d.eq(r"\mathrm{balance}", roofline.machine_balance)
d.eq(r"P_{\text{attainable}}", roofline.attainable)
d.eq(r"\frac{1}{\mathrm{AI}}", sp.expand(1 / roofline.gemm_intensity))
d.eq(r"\mathrm{AI}\big|_{m=n=k=x}", sp.simplify(roofline.gemm_intensity.subs({m: x, n: x, k_dim: x})))
d.eq(r"\lim_{x\to\infty}\mathrm{AI}\big|_{n=k=x}",
     sp.limit(roofline.gemm_intensity.subs({n: x, k_dim: x}), x, sp.oo))

# %% [markdown]
# 两个极限说明了一切：方阵乘的强度随边长线性增长，很容易越过平衡点；而一边很窄（m 行很少，比如 micro batch 小、专家分到的 token 少）的矩阵乘，强度封顶在 2m/β，即 BF16 下约等于 m。权重再大也没用，行数决定了上限。把公式倒过来看更清楚：1/AI = (β/2)(1/m + 1/k + 1/n)，三条边里最短的那条说了算。同理，行数远大于 k、n 时，强度趋向 2kn/(β(k + n))，这时再加行数（加大 micro batch）强度也几乎不动。

# %% [markdown]
# ## 2. 机器平衡点：H20 与 H100
#
# 平衡点越高，算子需要越高的运算强度才能喂饱这张卡。先算课程提到的 H20 与 H100 之比，再看 `costmodel.inputs.hardware` 里每张卡的稠密 BF16 峰值、HBM 带宽和平衡点（都不含稀疏加速）。

# %%
h20, h100 = hardware.GPUS["H20"], hardware.GPUS["H100-SXM"]
ratio = h20.balance / h100.balance  # (peak / bandwidth) of the H20 over that of the H100
d.eq(r"\frac{\mathrm{balance}_{H20}}{\mathrm{balance}_{H100}}",
     rf"\frac{{{h20.balance:.1f}}}{{{h100.balance:.1f}}}", f"{ratio:.4f}", rf"\frac{{1}}{{{1 / ratio:.2f}}}")

# %% tags=["remove-input"]
gpu_rows = sorted(hardware.GPUS.values(), key=lambda g: g.balance)
table_balance = hardware.GPUS[sc.gpu].balance

# %% [markdown]
# **各 GPU 的机器平衡点（按平衡点从低到高）**
#
# | GPU | BF16 TFLOP/s | HBM TB/s | 平衡点 FLOP/byte | 相对 H100-SXM | 来源 |
# |---|---|---|---|---|---|
# {% for g in gpu_rows %}
# | {{ g.name }} | {{ (g.bf16_flops / 1e12)|num(1) }} | {{ (g.hbm_bandwidth / 1e12)|num(3) }} | {{ g.balance|num(1) }} | {{ (g.balance / h100.balance)|times(3) }} | {{ words.gpu_source(g.source) }} |
# {% endfor %}
#
# H20 的平衡点只有 H100 的 {{ ratio|pct(1) }}，约 1/{{ (1 / ratio)|decimals(0) }}：它的带宽是 H100 的 {{ (h20.hbm_bandwidth / h100.hbm_bandwidth)|pct(0) }}，算力却只有 H100 的 {{ (h20.bf16_flops / h100.bf16_flops)|pct(0) }}。同一个算子，在 H100 上受带宽限制，在 H20 上可能早已受算力限制。课程说 H20 是“弱算力卡”，指的正是这一点。{% if (balance - table_balance)|abs < 1e-9 %}本场景的 GPU 是 {{ sc.gpu }}，平衡点 {{ balance|num(1) }} FLOP/byte。{% else %}本场景的 GPU 是 {{ sc.gpu }}，但峰值或带宽被场景改写了，平衡点按场景算是 {{ balance|num(1) }} FLOP/byte（表中为 {{ table_balance|num(1) }}）。{% endif %}

# %% [markdown]
# ## 3. 把模型的真实算子放到 roofline 上
#
# 取本场景模型（课程场景下即 Qwen3.6-35B-A3B）的**全部**矩阵乘，在 micro batch 1 和 4 下各算一次运算强度（这两个取值是本页固定的对照，与场景的 `micro_batch` 无关；第 5 节的 MFU 用的才是场景自己的运行）。这张 GEMM 表与 06、08、10 用的是同一份（`costmodel.evaluate.simulate.gemms.model_gemms`，命令行 `costmodel gemms`），宽度来自模型的真实 config（场景没有 config、结构键也不是课程模型时，由场景的键构造，假设写在来源里）：
#
# - **注意力投影**：标准注意力把 Q、K、V 融合成一个 GEMM，n = (query 头数，有输出门时 × 2 + 2 × KV 头数) × head_dim；GQA 的 KV 头比 query 头少，n 也就比 3 × hidden 小。MLA（如 DeepSeek-V3）换成 q_a / q_b、kv_a / kv_b 几个低秩投影。然后是注意力输出投影。
# - **gated DeltaNet 线性注意力层**的输入、输出投影（模型有这种层时；层内的递推本身不是 GEMM，不在表里，见 05）。
# - **FFN**：稠密层的 gate + up 与 down；MoE 层的 router、一个路由专家的 gate + up 与 down（行数是 EP 组汇集之后的，见 06）、共享专家，以及共享专家那个只有 1 列输出的 gate。
# - 计入 MTP 层时的 **MTP 投影**，以及 **lm_head**。
# - **注意力核心**：每个头的 QKᵀ [S, d_h] × [d_h, S] 与 A·V [S, S] × [S, d_v]，两边都是激活、没有权重，与 micro batch 无关。
#
# 表中“前向 FLOPs 占比”是每一行在每个 token 的前向 FLOPs（表内全部 GEMM）里所占的份额，层数和 top-k 次数都已乘上；注意力核心按场景的 `attention_flops` 计（causal 只算 s × s 的一半）。“受限于”对照本场景 GPU 的平衡点；可达峰值按 min(峰值, 强度 × 带宽) 计算。

# %%
BATCHES = (1, 4)  # the micro batch sizes compared
listed = {b: gemms.model_gemms(sc, b) for b in BATCHES}
# a row of zero width (a projection whose widths the scenario does not give) is left out
ops = {b: [op for op in listed[b] if op["k"] and op["n"]] for b in BATCHES}
first = ops[BATCHES[0]]  # micro batch 1: the course's setting

# %% tags=["remove-input"]
ZH = words.GEMMS
BOUND = words.BOUND


def op_label(op):
    return ZH.get(op["key"], op["name"])


def labels(rows):
    return "、".join(op_label(op) for op in rows)


def quoted(rows):
    return "、".join(f"“{op_label(op)}”" for op in rows)


def share_text(x):
    """A share of the forward FLOPs; tiny ones stay visible."""
    return d.pct(x, 2) if x >= 1e-4 or x == 0 else "< 0.01%"


# The roofs drawn: the H20 and the H100, and the scenario's GPU when it is another (or changed).
roofs = [(g.name, g.bf16_flops, g.hbm_bandwidth) for g in (h20, h100)]
if (sc.gpu, sc.peak_flops, sc.hbm_bandwidth) not in roofs:
    roofs = [r for r in roofs if r[0] != sc.gpu] + [
        (sc.gpu + ("" if sc.gpu not in ("H20", "H100-SXM") else " (scenario)"), sc.peak_flops,
         sc.hbm_bandwidth)]
empty = [op["key"] for op in listed[BATCHES[0]] if not (op["k"] and op["n"])]
assert all([op["key"] for op in ops[b]] == [op["key"] for op in first] for b in BATCHES)
by_key = {b: {op["key"]: op for op in ops[b]} for b in BATCHES}
packed = sc.batching == "packed"
# Packed: a token attends within its document, over sum(s_i^2) / D positions rather than S.
core_scale = sc.sum_squared_lengths / sc.tokens_per_step / sc.seq_len if packed else 1.0
fwd = {op["key"]: op["forward_flops_per_token"] * (1 if op["weights"] else core_scale) for op in first}
fwd_total = sum(fwd.values())


def flops_share(rows):
    return sum(fwd[op["key"]] for op in rows) / fwd_total

# %% tags=["remove-input"]
if "qkv" in by_key[BATCHES[0]]:
    qkv = by_key[BATCHES[0]]["qkv"]
if packed:
    per_token = sc.sum_squared_lengths / sc.tokens_per_step
source_parts = list(dict.fromkeys(part for op in first for part in op["source"].split("; ")
                                  if not part.startswith("rows of")))

# %% [markdown]
# **本场景模型的全部矩阵乘：运算强度（FLOP/byte）与 roofline 允许的峰值比例（注意力核心的 FLOPs：{% if sc.attention_flops == "full" %}完整的 s × s{% else %}causal，只算 s × s 的一半{% endif %}）**
#
# | 算子 | 形状（micro batch {{ BATCHES[0] }}） | 层数 × 次数 | 前向 FLOPs 占比 |{% for b in BATCHES %} 强度 mb={{ b }} |{% endfor %} 受限于（{{ sc.gpu }}，mb={{ BATCHES[0] }}） |{% for name, peak, bw in roofs %} {{ name }} 可达峰值（mb={{ BATCHES[0] }}） |{% endfor %}
# |---|---|---|---|{% for b in BATCHES %}---|{% endfor %}---|{% for r in roofs %}---|{% endfor %}
# {% for op in first %}
# | {{ op_label(op) }} | [{{ op.m|num }}, {{ op.k|num }}] × [{{ op.k|num }}, {{ op.n|num }}] | {{ op.layers }}{% if op.uses_per_token != 1 %} × {{ op.uses_per_token }}{% endif %} | {{ share_text(fwd[op.key] / fwd_total) }} |{% for b in BATCHES %} {{ by_key[b][op.key].intensity|num(1) }} |{% endfor %} {{ BOUND[op.bound] }} |{% for name, peak, bw in roofs %} {{ (roofline.attainable_flops(op.intensity, peak, bw) / peak)|pct(0) }} |{% endfor %}
# {% endfor %}
#
# {% if "qkv" in by_key[BATCHES[0]] %}融合 Q/K/V 的 n = {{ qkv.n|num }}，是 hidden（{{ qkv.k|num }}）的 {{ (qkv.n / qkv.k)|num(2) }} 倍；库里这一行的名字写明了头数：{{ qkv.name|code }}。{% endif %}{% if packed %}本场景把样本打包（packed）：注意力按文档计算，一个 token 平均与 Σs²/D = {{ per_token|num }} 个位置做注意力（Σs² 取自 {{ sc.sum_squared_lengths_from|code }}）{% if (core_scale - 1)|abs < 1e-9 %}，与 S 相同：文档都和一条序列一样长，折算不改变注意力核心的份额。{% else %}，不是 S = {{ sc.seq_len|num }}；表中注意力核心两行的 FLOPs 占比已按此折算，形状和强度仍按一条 S 长的序列列出（文档更短时强度略低，上限仍是 d_h）。{% endif %}{% endif %}注意力核心两行的强度按 s × s 的分数矩阵经 HBM 写出再读回计算（不融合的写法）{% if kernel_kind == "flash" %}；本场景的 attention_kernel 是 {{ sc.attention_kernel }}（flash 类 kernel），分数块留在片上，这两行实际的 HBM 流量更少、强度更高，表中对它们的“受限于”判断偏保守。{% else %}。{% endif %}{% if empty %}库的 GEMM 表里 {{ empty|join("、") }} 的宽度为 0（场景没有给出这些投影的宽度），表中略去。{% endif %}形状来源（库的原话）：{{ source_parts|join("; ")|code }}。

# %% tags=["remove-input"]
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

# %% [markdown]
# 图注：横轴是运算强度（FLOP/byte，BF16），纵轴是能达到的算力（TFLOP/s），两轴都是对数刻度；实心圆和空心三角是图例里的两个 micro batch。

# %% tags=["remove-input"]
# What the table says about the course's "micro batch 1 pushes many operators to the balance".
below_by_roof = [(name, [op for op in first if op["intensity"] < peak / bw]) for name, peak, bw in roofs]
memory = [op for op in first if op["bound"] == "memory"]
near = [op for op in first if op["bound"] == "compute" and op["intensity"] < 2 * balance]
memory_share, near_share = flops_share(memory), flops_share(memory + near)
# Weight GEMMs: matrix-matrix ones, and those with a single output column (matrix-vector).
vector = [op for op in first if op["weights"] and min(op["k"], op["n"]) <= 1]
matrix = [op for op in first if op["weights"] and op not in vector]
lowest = min(matrix, key=lambda op: op["intensity"]) if matrix else None
core_memory = [op for op in memory if not op["weights"]]
flash_note = bool(core_memory) and kernel_kind == "flash"
gates = [op for op in vector if op["key"] == "shared_expert_gate"]
lowest_balance = min(g.balance for g in hardware.GPUS.values())

# %% [markdown]
# {% for name, below in below_by_roof %}{% if below %}在 {{ name }} 上，micro batch {{ BATCHES[0] }} 时低于平衡点的是：{{ labels(below) }}{% else %}在 {{ name }} 上，micro batch {{ BATCHES[0] }} 时表里的 {{ first|length }} 个矩阵乘全都高于平衡点{% endif %}{% if not loop.last %}；{% endif %}{% endfor %}。课程说 micro batch = 1 时很多算子的运算强度会掉到平衡点附近甚至以下。按这张表，在 {{ sc.gpu }}（平衡点 {{ balance|num(1) }}）上 micro batch {{ BATCHES[0] }} 时，{{ first|length }} 个矩阵乘里受带宽限制的{% if memory %}有 {{ memory|length }} 个（{{ labels(memory) }}，FLOPs 占比 {{ share_text(memory_share) }}）{% else %}一个也没有{% endif %}；把“附近”算作平衡点的 2 倍以内，{% if near %}另有 {{ near|length }} 个（{{ labels(near) }}）{% else %}没有再多出一个{% endif %}{% if flash_note %}（注意力核的行按分数矩阵写回显存算；本场景用 flash kernel，分数留在片上，它们实际不受显存带宽限制）{% endif %}{% if lowest %}；{% if vector %}除只输出 1 列的矩阵-向量乘外，{% endif %}权重 GEMM 中强度最低的是“{{ op_label(lowest) }}”，{{ lowest.intensity|num(1) }}，是平衡点的 {{ (lowest.intensity / balance)|times(1) }}{% endif %}{% if near_share >= 0.5 %}。所以就本模型的矩阵乘而言，课程这句话成立：过半的 FLOPs 落在平衡点 2 倍以内或以下。{% elif not memory and not near %}。所以就本模型的矩阵乘而言，课程这句话不成立：在这张卡上它们都在平衡点的 2 倍以上；这句话更适合描述表外那些没有权重复用的算子。{% else %}。所以就本模型的矩阵乘而言，课程这句话只对上面列出的 {{ memory|length + near|length }} 个成立（FLOPs 占比合计 {{ share_text(near_share) }}）；这句话更适合描述表外那些没有权重复用的算子。{% endif %}{% for gate in gates %}共享专家的 gate 是 [M, {{ gate.k|num }}] × [{{ gate.k|num }}, 1]：输出只有 1 列，实际是矩阵-向量乘，强度 {{ gate.intensity|num(1) }} FLOP/byte，{% if gate.intensity < lowest_balance %}低于表中每一张 GPU 的平衡点、与 micro batch 无关，是**受带宽限制**的；{% else %}在 {{ sc.gpu }} 上受{{ BOUND[gate.bound] }}限制；{% endif %}它的 FLOPs 占比只有 {{ share_text(fwd[gate.key] / fwd_total) }}，耗时却是把 M × hidden 的激活再读一遍。{% endfor %}同一组算子，平衡点低的卡上更容易受算力限制，平衡点高的卡上更容易受带宽限制。micro batch 从 {{ BATCHES[0] }} 到 {{ BATCHES[-1] }} 只移动权重矩阵乘的点，而且行数已大时移动得很少（见 06）；注意力核心的强度被每头宽度封顶，不随 micro batch 变。图上看不到的是没有权重复用的算子（norm、激活、残差加{% if is_moe %}、MoE 的 permute{% endif %}）：它们的强度至多在 1 FLOP/byte 上下（残差加低到多少，后面的练习会算出来；permute 只搬数据，强度为 0），在表中任何一张卡上都受带宽限制。roofline 只给出上限：一个算子在平衡点之上，只说明带宽不是瓶颈，并不保证它真能跑到峰值。

# %% [markdown]
# ## 4. 同一批权重 GEMM，按形状能跑到峰值的几成
#
# 第 3 节说过，roofline 只给出上限：一个矩阵乘在平衡点之上，说明带宽不是瓶颈，却不说明它能跑到峰值的几成。单步耗时模型给每个权重 GEMM 一个按形状算的效率（`costmodel.inputs.gemm_efficiency`，`costmodel gemms` 最后一列就是它），算的是 GEMM kernel 怎么干活：
#
# - **tile 量化**：kernel 把 m × n 的输出切成 Tm × Tn 的 tile，每个 SM 一次算一块。m 不是 Tm 的整数倍时，最后一排 tile 有一部分是空的，空的部分照样占用时间。只有几十行的 GEMM，tile 里往往有一大块是空的。
# - **波次量化**：所有 tile 按 SM 个数分批执行，每批叫一个波次。tile 数比 SM 个数的整数倍多出一块，就要多跑一整轮；tile 数少于 SM 个数时，一部分 SM 整轮闲着。
# - **尺寸爬坡**：每个 tile 除了自己的 k 还要多付一段固定的流水线开销（相当于多算 `K_OVERHEAD` 个 k），每个 kernel 还有与 FLOPs 无关的固定时间（`FIXED_SECONDS`）。k 短、tile 少的 GEMM 主要花在这两样上。
#
# 于是一个 GEMM 的效率 = 大 GEMM 的效率 × tile 填充率 × 波次填充率 × k/(k + K_OVERHEAD) × 忙碌时间占比，kernel 在它的 tile 列表里选耗时最短的那种 tile。{% if is_moe %}路由专家的 GEMM 是一个 grouped GEMM：一张卡上 E/EP 个专家的 tile 合在一起分波次，所以专家多时波次能填满，但每个专家自己那排 tile 的空位还在。{% endif %}下表用的是场景自己的 micro batch（{{ sc.micro_batch }}），与单步耗时模型一致（第 3 节的表固定用 micro batch 1 和 4）。

# %%
eff = efficiency.efficiencies(sc.values)
shaped = compute_time.row_efficiencies(sc)  # what the step time uses, by row key
rows = []
for key, m_, n_, k_ in gemms.weight_shapes(sc):
    if not (m_ and n_ and k_):
        continue  # a row of zero width, as in section 3
    peak, bandwidth, large, e_m, beta = compute_time.gemm_rates(sc, eff, key)
    groups = compute_time.gemm_count(sc, sc.shape, key) if key.startswith("expert_") else 1
    parts = gemm_efficiency.breakdown(m_, n_, k_, sc.gpu, large, groups, peak)
    # the step time's two roofline terms of the row (it takes the larger): compute, memory
    terms = plain.gemm_seconds(m_, n_, k_, peak, bandwidth, shaped[key], e_m, beta, lambda *t: t)
    rows.append({"key": key, "m": m_, "n": n_, "k": k_, "groups": groups, "large": large,
                 "peak": peak, "fp8": beta == 1, "used": shaped[key], "compute_over_memory": terms[0] / terms[1], **parts})

# %% tags=["remove-input"]
FACTORS = {"tile_fill": "tile 量化", "wave_fill": "波次量化", "k_share": "k 太短",
           "busy_share": "固定时间"}  # what each factor of the breakdown stands for
row_names = {op["key"]: op for op in listed[BATCHES[0]]}


def gemm_label(row):
    return ZH.get(row["key"], row_names[row["key"]]["name"] if row["key"] in row_names else row["key"])


def rows_text(x):
    """Rows of a GEMM: whole numbers grouped; under 10 (a fraction of a row per expert on average),
    three significant digits."""
    return d.num(x) if x >= 10 else f"{x:.3g}"


def gemm_labels(picked):
    return "、".join(f"“{gemm_label(r)}”" for r in picked)


def limiter(row):
    """The factor that costs the row most (the smallest), with its name."""
    return min(FACTORS, key=lambda f: row[f])


overridden = sc.gemm_efficiency is not None
assert overridden or all(abs(r["efficiency"] - r["used"]) <= 1e-9 * r["used"] for r in rows)
experts = [r for r in rows if r["key"].startswith("expert_")]
thin = [r for r in rows if min(r["n"], r["k"]) <= 1]  # matrix-vector: a single output column
wide = [r for r in rows if r not in thin]
slowest = min(wide, key=lambda r: r["efficiency"]) if wide else None
fastest = max(wide, key=lambda r: r["efficiency"]) if wide else None
wide_experts = [r for r in experts if r in wide]
experts_slowest = bool(wide_experts) and slowest in wide_experts
larges = sorted({r["large"] for r in rows})
limits = sorted({("gemm_fp8" if r["fp8"] else "gemm", r["large"]) for r in rows})  # (parameter, value)
compute_rows = [r for r in rows if r["compute_over_memory"] >= 1]
memory_rows = [r for r in rows if r not in compute_rows]
sm_count = gemm_efficiency.sms(sc.gpu)

# %% [markdown]
# **本场景的权重 GEMM：形状与效率（{{ sc.gpu }}，{{ sm_count }} 个 SM；效率是占该 GEMM 所用峰值的比例）**
#
# | GEMM | m | n | k | 每卡专家数（grouped） | tile | tile 数 / 波次数 | tile 填充率 | 波次填充率 | k/(k+{{ K_OVERHEAD }}) | 忙碌时间占比 | 效率 | 主要损失 | 算力项 ÷ 带宽项 |
# |---|---|---|---|---|---|---|---|---|---|---|---|---|---|
# {% for r in rows %}
# | {{ gemm_label(r) }} | {{ rows_text(r.m) }} | {{ r.n|num }} | {{ r.k|num }} | {% if r.key.startswith("expert_") %}{{ r.groups|num }}{% else %}—{% endif %} | {{ r.tile[0] }} × {{ r.tile[1] }} | {{ r.tiles|num }} / {{ r.waves|num }} | {{ r.tile_fill|pct(1) }} | {{ r.wave_fill|pct(1) }} | {{ r.k_share|pct(1) }} | {{ r.busy_share|pct(1) }} | {{ r.efficiency|pct(1) }} | {{ FACTORS[limiter(r)] }} | {{ r.compute_over_memory|times(2) }} |
# {% endfor %}
#
# {% if overridden %}本场景用 `gemm_efficiency` 把每个 GEMM 的效率都定为 {{ sc.gemm_efficiency|pct(1) }}，单步耗时模型不再按形状折算；表里的效率是以它为大 GEMM 极限、按形状本来会得到的值，只供对照。{% else %}表中的效率就是单步耗时模型用的值（与 `costmodel gemms` 的最后一列相同）。大 GEMM 的效率（所有 tile 和波次都填满、k 很长时的极限）是 {% for name, x in limits %}`{{ name }}` {{ x|pct(1) }}{% if not loop.last %}、{% endif %}{% endfor %}（{{ sc.gpu }} 所属一代的值，见 docs/conventions.md）。{% endif %}{% if slowest %}{% if thin %}除只输出 1 列的矩阵-向量乘外，{% endif %}效率最高的是“{{ gemm_label(fastest) }}”，{{ fastest.efficiency|pct(1) }}；最低的是“{{ gemm_label(slowest) }}”，{{ slowest.efficiency|pct(1) }}，最大的一项损失是“{{ FACTORS[limiter(slowest)] }}”（{{ slowest[limiter(slowest)]|pct(1) }}）。{% endif %}{% if wide_experts %}路由专家的 GEMM 每个专家 {{ rows_text(experts[0].m) }} 行，效率 {% for r in wide_experts %}{{ r.efficiency|pct(1) }}{% if not loop.last %}、{% endif %}{% endfor %}{% if experts_slowest %}，是本场景矩阵-矩阵 GEMM 里最慢的。{% else %}，不是本场景矩阵-矩阵 GEMM 里最慢的。{% endif %}{% elif not experts %}本场景是稠密模型，没有路由专家的 grouped GEMM。{% endif %}{% for r in thin %}“{{ gemm_label(r) }}”的 {% if r.n <= 1 %}n{% else %}k{% endif %} 只有 1，最大的一项损失是“{{ FACTORS[limiter(r)] }}”（{{ r[limiter(r)]|pct(1) }}），效率 {{ r.efficiency|pct(1) }}。{% endfor %}单步耗时模型给每个 GEMM 取 roofline 的两项中较大的一项：算力项 2mnk ÷ (效率 × 峰值)，带宽项 β(mk + kn + mn) ÷ (HBM 效率 × 带宽)。{% if compute_rows|length == rows|length %}本场景每个 GEMM 都是算力项更大，所以表中的效率直接决定它们的时间。{% elif compute_rows %}本场景按算力项计时的有 {{ compute_rows|length }} 个，效率直接决定它们的时间；按带宽项计时的是{{ gemm_labels(memory_rows) }}，效率再低也不改变它们的时间。{% else %}本场景每个 GEMM 都是带宽项更大，表中的效率不改变它们的时间。{% endif %}

# %% tags=["remove-input"]
biggest_row = max(rows, key=lambda r: 2 * r["m"] * r["n"] * r["k"] * r["groups"])
sweeps = [biggest_row] + [r for r in experts[:1] if r is not biggest_row]
top = max(r["m"] for r in rows)
m_grid = np.geomspace(1, max(4 * top, 65536), 400)
fig, ax = plt.subplots(figsize=(9, 5))
for j, r in enumerate(sweeps):
    curve_m = gemm_efficiency.efficiency(m_grid, r["n"], r["k"], sc.gpu, large=r["large"], groups=r["groups"],
                                         peak=r["peak"], minimum=np.minimum)
    label = f"sweep of m: {r['key']} (n={r['n']:,.0f}, k={r['k']:,.0f}" + (
        f", {r['groups']:g} experts grouped)" if r["key"].startswith("expert_") else ")")
    ax.plot(m_grid, 100 * curve_m, color="black", ls=["-", "-."][j], lw=1.2, label=label)
for i, r in enumerate(rows):
    ax.plot([r["m"]], [100 * r["efficiency"]], "o", color=palette[i % len(palette)], ms=7, mec="black",
            mew=0.6, zorder=4, label=f"{r['key']} (m={r['m']:,.0f})")
for x in larges:
    ax.axhline(100 * x, color="grey", ls="--", lw=1)
ax.plot([], [], color="grey", ls="--", lw=1, label="large-GEMM efficiency (the limit)")
ax.set_xscale("log")
ax.set_ylim(0, 100)
ax.set_xlabel("m (rows of the GEMM, per expert for a grouped GEMM)")
ax.set_ylabel("efficiency (% of the peak)")
ax.set_title(f"GEMM efficiency by shape on {sc.gpu} ({sm_count} SMs): the scenario's weight GEMMs")
ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
plt.show()

# %% [markdown]
# 图注：横轴是 GEMM 的行数 m（分组 GEMM 按每个专家计，对数刻度），纵轴是效率（峰值的百分比）。

# %% tags=["remove-input"]
skinny_m = min(tm for tm, _ in gemm_efficiency.TILES)  # rows: the smallest tile's height
skinny_row = experts[0] if experts else biggest_row
skinny = gemm_efficiency.breakdown(skinny_m, skinny_row["n"], skinny_row["k"], sc.gpu, skinny_row["large"],
                                   skinny_row["groups"], skinny_row["peak"])
odd = gemm_efficiency.breakdown(skinny_m + 1, skinny_row["n"], skinny_row["k"], sc.gpu, skinny_row["large"],
                                skinny_row["groups"], skinny_row["peak"])
few = range(1, 4 * skinny_m + 1)  # a few tile heights of rows
few_mean = sum(gemm_efficiency.breakdown(x, skinny_row["n"], skinny_row["k"], sc.gpu, skinny_row["large"],
                                         skinny_row["groups"], skinny_row["peak"])["efficiency"]
               for x in few) / len(few)

# %% [markdown]
# 图中每个点是本场景的一个权重 GEMM，实线是把{% if sweeps|length > 1 %}最大的那个 GEMM（“{{ gemm_label(biggest_row) }}”）和路由专家的 GEMM（“{{ gemm_label(sweeps[1]) }}”）{% else %}最大的那个 GEMM（“{{ gemm_label(biggest_row) }}”）{% endif %}的 n、k 固定、只改变行数 m 得到的曲线。行数越少，曲线越低，而且呈锯齿状：m 刚越过 tile 高度的整数倍时，多出一排几乎空着的 tile；tile 总数刚越过 SM 个数的整数倍时，多出一轮几乎空着的波次。
#
# 行数少的 GEMM 为什么慢：{% if experts %}MoE 把每个 token 只送到 top-k 个专家，一张卡上一个专家分到的行数约为 EP 组汇集的 token 数 × top-k ÷ 专家数；专家多、token 少时只有几十到几百行。{% else %}一个 GEMM 的行数是一张卡上一个 micro batch 的 token 数（CP 把序列切开，行数随之变少）；micro batch 小、序列短、切得细时，行数就少。{% endif %}以{% if experts %}本场景的路由专家 GEMM（“{{ gemm_label(skinny_row) }}”，n = {{ skinny_row.n|num }}，k = {{ skinny_row.k|num }}，一张卡 {{ skinny_row.groups|num }} 个专家合成一个 grouped GEMM）为例，若每个专家只有{% else %}本场景最大的 GEMM（“{{ gemm_label(skinny_row) }}”，n = {{ skinny_row.n|num }}，k = {{ skinny_row.k|num }}）为例（本场景是稠密模型，没有专家 GEMM，这里借它的 n、k 说明同一件事），若它只有{% endif %} {{ skinny_m }} 行（最小 tile 的高度{% if skinny.tile_fill > 0.9999 %}，恰好填满一排 tile{% endif %}），效率是 {{ skinny.efficiency|pct(1) }}（tile 填充率 {{ skinny.tile_fill|pct(1) }}、波次填充率 {{ skinny.wave_fill|pct(1) }}、k/(k+{{ K_OVERHEAD }}) {{ skinny.k_share|pct(1) }}、忙碌时间占比 {{ skinny.busy_share|pct(1) }}）；{{ skinny_m + 1 }} 行时 tile 填充率是 {{ odd.tile_fill|pct(1) }}，效率 {{ odd.efficiency|pct(1) }}。行数在 1 到 {{ few|length }} 之间时，效率平均只有 {{ few_mean|pct(1) }}，是大 GEMM 效率 {{ skinny_row.large|pct(1) }} 的 {{ (few_mean / skinny_row.large)|times(2) }}{% if experts %}；本场景每个专家实际有 {{ rows_text(experts[0].m) }} 行，效率 {{ experts[0].efficiency|pct(1) }}{% endif %}。{% if experts %}grouped GEMM 把许多专家的 tile 放进同一批波次，能减少波次量化的损失，却补不上每个专家自己那排 tile 里的空位，也省不掉每个 tile 的固定开销。{% endif %}行数少还意味着运算强度低（第 1 节：强度封顶在约 m FLOP/byte），在平衡点高的卡上会落到带宽限制一侧。{% if experts %}让每个专家分到更多行（更大的 EP 组、更大的 micro batch）{% else %}让 GEMM 有更多行（更大的 micro batch、更少的切分）{% endif %}通常能同时改善这两点。

# %% [markdown]
# ## 5. 课程的“典型 MFU”表，以及本场景落在哪里
#
# 课程给了一张参考坐标系（下表原样引用课程，都是 6ND 口径的 MFU；这些区间是课程的经验值，不是本库算出来的）。比较 MFU 时，模型形状、序列长度、GPU 和计数口径都要对齐才有意义。

# %% tags=["remove-input"]
COURSE_MFU_TABLE = [(row["zh"], row["en"], *map(course.number, row["range"]))  # the course's quote
                    for row in course.figures()["typical_mfu"]["rows"]]

# %% [markdown]
# **课程的典型 MFU 表（引用）**
#
# | 场景（课程原文） | 典型 MFU（课程） |
# |---|---|
# {% for zh, en, lo, hi in COURSE_MFU_TABLE %}
# | {{ zh }} | {{ (lo * 100)|decimals(0) }}% – {{ (hi * 100)|decimals(0) }}% |
# {% endfor %}

# %% tags=["remove-input"]
mfu, hfu = acc["mfu"], acc["hfu"]
inside = [zh for zh, _, lo, hi in COURSE_MFU_TABLE if lo <= mfu <= hi]
long_seq = sc.seq_len >= 32768
weak = sc.peak_flops < 0.5 * h100.bf16_flops
if is_moe and long_seq:
    nearest = COURSE_MFU_TABLE[4 if weak else 3]
elif is_moe:
    nearest = COURSE_MFU_TABLE[2]
elif long_seq:
    nearest = COURSE_MFU_TABLE[1]
elif sc.seq_len <= 8192:
    nearest = COURSE_MFU_TABLE[0]
else:
    nearest = None
if nearest is None:  # between the first two rows: their bounds
    lo_n, hi_n = COURSE_MFU_TABLE[1][2], COURSE_MFU_TABLE[0][3]
else:
    _, _, lo_n, hi_n = nearest
position = None if not lo_n <= mfu <= hi_n else (
    "下沿" if (mfu - lo_n) / (hi_n - lo_n) < 1 / 3 else "中段" if (mfu - lo_n) / (hi_n - lo_n) < 2 / 3 else "上沿")

# %% [markdown]
# {% set place -%}
# {% if nearest is none %}课程的表里没有与之对应的一行（序列长度介于前两行之间），按前两行推断，典型值应在 {{ (lo_n * 100)|decimals(0) }}%–{{ (hi_n * 100)|decimals(0) }}% 之间{% else %}按设置粗略归类，最接近课程表里的“{{ nearest[0] }}”（{{ (lo_n * 100)|decimals(0) }}%–{{ (hi_n * 100)|decimals(0) }}%）{% endif %}
# {%- endset %}
# 本场景是{% if is_moe %} MoE {% else %}稠密{% endif %}模型、配置长度 {{ sc.seq_len|num }}、micro batch {{ sc.micro_batch }}、{{ sc.gpu }}（{% if weak %}弱算力卡{% else %}峰值不低于 H100 一半{% endif %}），6ND 口径的 MFU 为 **{{ mfu|pct }}**{% if sc.recompute != "none" %}（HFU {{ hfu|pct }}）{% endif %}。{{ place|safe }}，本场景的 MFU {% if mfu < lo_n %}低于这个区间：同类设置下还有明显的提升空间，值得先查 padding、重算和通信（见 08）{% elif mfu > hi_n %}高于这个区间：也许这次运行确实调得比课程的经验值好，但先确认计数口径（是否误用了总参数、是否把注意力或重算算进了分子）{% else %}落在这个区间的{{ position }}：就这种形状和这张卡而言属于正常水平，但正常不等于没有优化空间{% endif %}。{% if inside %}按数值，它落在课程表的“{{ inside|join("”“") }}”区间{% if nearest and nearest[0] in inside %}。{% else %}，但那些行的设置与本场景不同，数值落在哪一格并不说明什么。{% endif %}{% else %}按数值，它不在课程表的任何一个区间里。{% endif %}

# %% tags=["remove-input"]
fig, ax = plt.subplots()
row_labels = [en for _, en, _, _ in COURSE_MFU_TABLE]
for i, (_, _, lo, hi) in enumerate(COURSE_MFU_TABLE):
    ax.barh(i, 100 * (hi - lo), left=100 * lo, color=colors[0], alpha=0.6)
ax.axvline(100 * mfu, color="black", lw=1.5, label=f"scenario MFU {100 * mfu:.2f}%")
if sc.recompute != "none":
    ax.axvline(100 * hfu, color="black", lw=1, ls="--", label=f"scenario HFU {100 * hfu:.2f}%")
ax.set_yticks(range(len(row_labels)), row_labels)
ax.invert_yaxis()
ax.set_xlim(0, max(55, 110 * max(mfu, hfu)))
ax.set_xlabel("MFU (%), 6ND convention")
ax.set_title("Typical MFU by setting (the course's table) and this scenario")
ax.legend(fontsize=8, loc="lower right")
plt.show()

# %% [markdown]
# 图注：横轴是 6ND 口径的 MFU（%），纵轴是课程表里的各种设置（每行一个区间）和本场景。

# %% [markdown]
# ## 6. 对照课程的说法
#
# 课程在 06.6 和 06.7 里关于 roofline 有几句话：H20 的平衡点、micro batch 1 把算子推到平衡点附近、加大 micro batch 让强度成倍增长、H20 与 H100 的算力/带宽比，以及课程这次运行在典型 MFU 表里的位置。下表把每一句与本页按场景算出的数字并排放；场景不是课程的时，中间一列是你的数字，“出入”一列说明课程对它自己那次运行的说法放到你的场景上是否还成立。

# %% tags=["remove-input"]
course_balance = float(course.figures()["micro_batch_below_balance"]["text"].split()[0])
gpu_changed = sc.gpu != "H20" or abs(balance - h20.balance) > 1e-9
balance_holds = abs(h20.balance - course_balance) < 0.5  # the H20's balance, rounded
# Micro batch 1 -> 4: the intensity ratio of the matrix-matrix weight GEMMs.
gain = {op["key"]: by_key[BATCHES[-1]][op["key"]]["intensity"] / op["intensity"] for op in matrix}
lo_gain, hi_gain = (min(gain.values()), max(gain.values())) if gain else (1.0, 1.0)
x4 = BATCHES[-1] / BATCHES[0]
# 1/AI = (beta/2)(1/m + 1/k + 1/n): the share of the 1/m term, the only one more rows shrink.
m_share = [(1 / op["m"]) / (1 / op["m"] + 1 / op["k"] + 1 / op["n"]) for op in matrix] or [1.0]
min_rows = min(op["m"] for op in matrix) if matrix else None
run_fits = nearest is not None and lo_n <= mfu <= hi_n

# %% [markdown]
# {% set ours %}{% if own %}按你的场景，{% endif %}{% endset %}
# {% set outside %}norm、激活、残差加{% if is_moe %}、MoE 的 permute{% endif %}{% endset %}
# {% set below -%}
# {% if memory %}低于平衡点的，表里只有{{ quoted(memory) }}（FLOPs 占比 {{ share_text(memory_share) }}），再就是表外那些没有权重复用的算子（{{ outside|safe }}）{% else %}表里没有一个矩阵乘低于平衡点，低于它的只有表外那些没有权重复用的算子（{{ outside|safe }}）{% endif %}
# {%- endset %}
# {% set gains_text -%}
# {% if not matrix %}—（没有矩阵-矩阵的权重 GEMM）{% elif hi_gain - lo_gain > 0.005 %}{{ lo_gain|times(2) }}–{{ hi_gain|times(2) }}{% else %}{{ lo_gain|times(2) }}{% endif %}
# {%- endset %}
# **课程怎么说 / 本页算出 / 出入**{% if own %}（本页按你的场景计算：中间一列是你的数字，与课程的说法对照）{% endif %}
#
# | 课程怎么说 | 本页算出 | 出入 |
# |---|---|---|
# | H20 的机器平衡点（BF16 峰值 ÷ HBM 带宽）：{{ course.claim("micro_batch_below_balance") }} | H20：{{ (h20.bf16_flops / 1e12)|num(1) }} TFLOP/s ÷ {{ (h20.hbm_bandwidth / 1e12)|num(2) }} TB/s = {{ h20.balance|num(1) }} FLOP/byte{% if gpu_changed %}；本场景的 {{ sc.gpu }}：{{ balance|num(1) }}{% endif %} | {% if balance_holds %}成立{% else %}有出入{% endif %}：按硬件表的 H20 数据重算，四舍五入后一致{% if gpu_changed %}；这一行只关于 H20，你的 {{ sc.gpu }} 平衡点是它的 {{ (balance / h20.balance)|times(2) }}{% endif %} |
# | micro batch = 1 时，很多算子的运算强度落到 H20 的平衡点 {{ course.claim("micro_batch_below_balance") }}附近甚至以下，从受算力限制变成受带宽限制 | {{ sc.gpu }}（平衡点 {{ balance|num(1) }}），mb=1：{% if lowest %}权重 GEMM{% if vector %}（矩阵-向量乘除外）{% else %} {% endif %}最低强度 {{ lowest.intensity|num(1) }}（{{ op_label(lowest) }}），为平衡点的 {{ (lowest.intensity / balance)|times(1) }}{% else %}表里没有矩阵-矩阵的权重 GEMM{% endif %}{% for op in vector %}；矩阵-向量乘“{{ op_label(op) }}”强度 {{ op.intensity|num(1) }}{% endfor %}；受带宽限制的矩阵乘 {{ memory|length }} / {{ first|length }} 个{% if memory %}，FLOPs 占比 {{ share_text(memory_share) }}{% endif %} | {% if near_share >= 0.5 %}成立：{{ ours|safe }}平衡点 2 倍以内或以下的矩阵乘占表内前向 FLOPs 的 {{ share_text(near_share) }}，过半{% elif lowest and lowest.intensity >= 2 * balance %}有出入：{{ ours|safe }}{% if vector %}除矩阵-向量乘外，{% endif %}每个权重 GEMM 的强度都至少是平衡点的 {{ (lowest.intensity / balance)|times(1) }}，远没有掉到平衡点附近；{{ below|safe }}{% else %}有出入：{{ ours|safe }}平衡点 2 倍以内或以下的矩阵乘只有 {{ memory|length + near|length }} 个（{{ quoted(memory + near) }}），占表内前向 FLOPs 的 {{ share_text(near_share) }}；{{ below|safe }}{% endif %} |
# | micro batch 从 {{ BATCHES[0] }} 到 {{ BATCHES[-1] }}，同一份权重读一次、算 {{ x4|decimals(0) }} 倍的数据，运算强度 {{ course.claim("nb07_micro_batch_intensity_x4") }} | 权重 GEMM 的强度 mb={{ BATCHES[-1] }} ÷ mb={{ BATCHES[0] }}：{{ gains_text|safe }}；注意力核心不变（没有权重，强度与 micro batch 无关） | {% if lo_gain >= 0.875 * x4 %}成立{% else %}有出入{% endif %}：{% if not matrix %}{{ ours|safe }}表里没有矩阵-矩阵的权重 GEMM：每个权重 GEMM 的 k 或 n 只有 1（矩阵-向量乘），1/强度 = (β/2)(1/m + 1/k + 1/n) 里那一项就是 1，强度封顶在 2/β = 1 FLOP/byte 以下，加大 micro batch 几乎不改变它{% elif lo_gain >= 0.875 * x4 %}{{ ours|safe }}每个权重 GEMM 的强度都接近 ×{{ x4|decimals(0) }}：行数还远小于权重的 k、n，强度约等于行数{% else %}{{ ours|safe }}强度只涨到 {{ gains_text|safe }}：1/强度 = (β/2)(1/m + 1/k + 1/n)，加大 micro batch 只缩小 1/m 这一项；mb={{ BATCHES[0] }} 时权重 GEMM 已有 {{ min_rows|num }} 行以上，1/m 占三项之和的 {{ (m_share|min)|pct(1) }}–{{ (m_share|max)|pct(1) }}，其余是与行数无关的 1/k + 1/n；强度的倍数是 1 / (1 − {{ (1 - BATCHES[0] / BATCHES[-1])|decimals(2) }} × 这个份额)，只有行数远小于 k、n（1/m 占绝大部分）时，才接近行数的倍数{% endif %} |
# | H20 的算力/带宽比只有 H100 的 {{ course.claim("nb07_h20_h100_balance_ratio") }} | {{ h20.balance|num(1) }} ÷ {{ h100.balance|num(1) }} = {{ ratio|decimals(4) }} ≈ 1/{{ (1 / ratio)|decimals(2) }} | {% if ((1 / ratio) - 8)|abs < 0.5 %}成立{% else %}有出入{% endif %}：H20 的带宽是 H100 的 {{ (h20.hbm_bandwidth / h100.hbm_bandwidth)|pct(0) }}，算力只有 {{ (h20.bf16_flops / h100.bf16_flops)|pct(0) }}{% if own %}；这一行比较硬件表里的两张卡，不随你的场景变{% endif %} |
# | 课程把它这次运行（MoE、49K、micro batch 1、H20）放在典型 MFU 表“上述 + 弱算力卡”一行 {{ course.claim("nb07_course_mfu_lower_edge") }}的下沿，说这是正常水平 | 本场景 MFU {{ mfu|pct }}；{% if nearest %}按设置归入“{{ nearest[0] }}”（{{ (lo_n * 100)|decimals(0) }}%–{{ (hi_n * 100)|decimals(0) }}%）{% else %}课程表里没有对应的设置行{% endif %} | {% if run_fits and (own or position == "下沿") %}成立{% else %}有出入{% endif %}：{% if own %}课程说的是它自己的运行；你的 MFU {{ mfu|pct }} {% if run_fits %}在你这类设置对应的“{{ nearest[0] }}”区间的{{ position }}{% elif nearest %}{% if mfu < lo_n %}低于{% else %}高于{% endif %}你这类设置对应的“{{ nearest[0] }}”区间（{{ (lo_n * 100)|decimals(0) }}%–{{ (hi_n * 100)|decimals(0) }}%）{% else %}在课程表里没有对应的设置行{% endif %}{% else %}课程这次运行的 MFU {{ mfu|pct }}，{% if run_fits %}在该区间的{{ position }}{% else %}不在该区间内{% endif %}{% endif %} |

# %% [markdown]
# ## 本节要点
#
# {% set gains_text -%}
# {% if not matrix %}—（没有矩阵-矩阵的权重 GEMM）{% elif hi_gain - lo_gain > 0.005 %}{{ lo_gain|times(2) }}–{{ hi_gain|times(2) }}{% else %}{{ lo_gain|times(2) }}{% endif %}
# {%- endset %}
# - 运算强度 = 2mnk / (β(mk + kn + mn))；窄矩阵乘的强度封顶在 2m/β，行数决定上限；行数很大时强度趋向 2kn/(β(k + n))，再加行数也几乎不涨。
# - H20 的平衡点 {{ h20.balance|num(1) }} FLOP/byte，H100-SXM 为 {{ h100.balance|num(1) }}，比值约 1/{{ (1 / ratio)|decimals(0) }}；本场景的 {{ sc.gpu }} 为 {{ balance|num(1) }}。
# - {% for name, below in below_by_roof %}{% if below %}在 {{ name }} 上，micro batch {{ BATCHES[0] }} 时低于平衡点的是：{{ labels(below) }}{% else %}在 {{ name }} 上，micro batch {{ BATCHES[0] }} 时表里的 {{ first|length }} 个矩阵乘全都高于平衡点{% endif %}{% if not loop.last %}；{% endif %}{% endfor %}。
# - 在 {{ sc.gpu }} 上 micro batch {{ BATCHES[0] }} 时，{{ first|length }} 个矩阵乘里受带宽限制的{% if memory %}有 {{ memory|length }} 个（{{ labels(memory) }}，FLOPs 占比 {{ share_text(memory_share) }}）{% else %}一个也没有{% endif %}{% if flash_note %}（注意力核的行按分数矩阵写回显存算；本场景用 flash kernel，分数留在片上，它们实际不受显存带宽限制）{% endif %}；课程说的“很多算子掉到平衡点附近或以下”，在本模型的矩阵乘里{% if near_share >= 0.5 %}成立。{% elif not memory and not near %}不成立。{% else %}只对少数几个成立。{% endif %}
# - {% if wide %}按形状（tile 与波次量化、尺寸爬坡），本场景{% if thin %}除矩阵-向量乘外{% endif %}权重 GEMM 的效率在 {{ slowest.efficiency|pct(1) }}（{{ gemm_label(slowest) }}）到 {{ fastest.efficiency|pct(1) }}（{{ gemm_label(fastest) }}）之间，大 GEMM 的极限是 {% for x in larges %}{{ x|pct(1) }}{% if not loop.last %}、{% endif %}{% endfor %}{% if overridden %}（本场景的 `gemm_efficiency` 让单步耗时模型不用这些值）{% endif %}；{% endif %}行数只有几个 tile 高度的 GEMM{% if experts %}（例如每个专家只分到几十行）{% endif %}，效率平均只有大 GEMM 的 {{ (few_mean / skinny_row.large)|times(2) }}（第 4 节的 1 到 {{ few|length }} 行）。
# - {% if matrix %}micro batch {{ BATCHES[0] }} → {{ BATCHES[-1] }}，权重 GEMM 的强度涨到 {{ gains_text|safe }}，{% if lo_gain >= 0.875 * x4 %}接近{% elif hi_gain < 0.5 * x4 %}远不到{% else %}不到{% endif %}课程说的 ×{{ x4|decimals(0) }}。{% else %}本场景的权重 GEMM 都是矩阵-向量乘（k 或 n 只有 1），强度封顶在 1 FLOP/byte 以下，micro batch {{ BATCHES[0] }} → {{ BATCHES[-1] }} 几乎不改变它，课程说的 ×{{ x4|decimals(0) }} 在这里不成立。{% endif %}
# - 本场景 MFU {{ mfu|pct }}：{% if nearest is none %}课程的表里没有与之对应的一行（序列长度介于前两行之间），按前两行推断，典型值应在 {{ (lo_n * 100)|decimals(0) }}%–{{ (hi_n * 100)|decimals(0) }}% 之间{% else %}按设置粗略归类，最接近课程表里的“{{ nearest[0] }}”（{{ (lo_n * 100)|decimals(0) }}%–{{ (hi_n * 100)|decimals(0) }}%）{% endif %}，{% if mfu < lo_n %}低于这个区间：同类设置下还有明显的提升空间，值得先查 padding、重算和通信（见 08）{% elif mfu > hi_n %}高于这个区间：也许这次运行确实调得比课程的经验值好，但先确认计数口径（是否误用了总参数、是否把注意力或重算算进了分子）{% else %}落在这个区间的{{ position }}：就这种形状和这张卡而言属于正常水平，但正常不等于没有优化空间{% endif %}。

# %% [markdown]
# ## 练习

# %% [markdown] tags=["exercise"]
# ### 练习 1：表外的逐元素算子有多“穷”
#
# 残差加 y = x + r 对每个元素只做 1 次加法，却要从 HBM 读 x、r 各一次、写 y 一次，BF16 每个元素 2 字节。先别看解答，写出它的运算强度（FLOP/byte）和它比本场景 GPU 的平衡点低多少倍；再对一条序列的激活（seq_len × hidden 个元素）估计 roofline 的两项时间：算力项（FLOPs ÷ 峰值）与带宽项（字节 ÷ 带宽），哪一项大、大几倍？

# %% tags=["solution"]
beta = 2  # bytes per BF16 element
ai_add = 1 / (3 * beta)  # 1 FLOP per element; x and r read, y written
elements = sc.seq_len * sc.hidden_size  # one sequence's activations
t_compute = elements / sc.peak_flops
t_memory = 3 * beta * elements / sc.hbm_bandwidth
print(f"AI = {ai_add:.3f} FLOP/byte; balance / AI = {balance / ai_add:,.0f}")
print(f"compute term {t_compute * 1e6:.3f} us, memory term {t_memory * 1e6:.2f} us, "
      f"ratio {t_memory / t_compute:,.0f}")

# %% [markdown] tags=["solution"]
# 带宽项与算力项之比恰好等于“平衡点 ÷ 强度”，与元素个数无关：序列再长、hidden 再宽，两项一起变大，比值不变。所以逐元素算子的位置只由它自己的强度和这张卡的平衡点决定，加大 micro batch 救不了它；能救它的是把它和前后的矩阵乘融合成一个 kernel，让中间结果不落回 HBM。norm、激活函数也是同一类，MoE 的 permute 更极端，只搬数据、不做运算，强度为 0。

# %% tags=["remove-input"]
def duration(seconds):
    """ms with three decimals; below 0.1 ms in us, so that a small GEMM's time keeps three digits
    (0.005 ms said nothing to compare)."""
    return f"{seconds * 1e3:.3f} ms" if seconds >= 1e-4 else f"{seconds * 1e6:.2f} us"


# %% [markdown] tags=["exercise"]
# ### 练习 2：最大的那个权重 GEMM，至少要跑多久
#
# 在第 3 节的表里找出前向 FLOPs 占比最大的权重矩阵乘（注意力核心不算），用它在 micro batch 1 时的形状，先手算它在本场景 GPU 上跑一次的时间下界：算力项 2mnk ÷ 峰值，带宽项 β(mk + kn + mn) ÷ 带宽，两者取大。哪一项更大？micro batch 从 1 变成 4（行数 × 4）时，你预计这个下界变成几倍？

# %% tags=["solution"]
biggest = max((op for op in first if op["weights"]), key=lambda op: fwd[op["key"]])
lower_bound = {}
for b in BATCHES:
    g = by_key[b][biggest["key"]]
    t_c = 2 * g["m"] * g["n"] * g["k"] / sc.peak_flops
    t_m = 2 * (g["m"] * g["k"] + g["k"] * g["n"] + g["m"] * g["n"]) / sc.hbm_bandwidth
    lower_bound[b] = max(t_c, t_m)
    print(f"mb={b} {biggest['key']}: compute {duration(t_c)}, memory {duration(t_m)}")
print(f"lower bound x{lower_bound[BATCHES[-1]] / lower_bound[BATCHES[0]]:.2f} for x{x4:.0f} the rows")

# %% [markdown] tags=["solution"]
# {% set bound_b1 = by_key[BATCHES[0]][biggest.key].bound %}
# 本场景里这一行是“{{ op_label(biggest) }}”，micro batch {{ BATCHES[0] }} 时受{{ BOUND[bound_b1] }}限制。{% if bound_b1 == "compute" %}受算力限制时，时间下界就是 FLOPs ÷ 峰值，行数翻几倍、时间也翻几倍，每个 token 的时间不变：加大 micro batch 不会让它更快，只会让带宽项离得更远。{% else %}受带宽限制时，时间主要花在读写上，权重那一份流量不随行数增长，所以行数 × {{ x4|decimals(0) }} 时下界涨不到 {{ x4|decimals(0) }} 倍：每个 token 摊到的时间变少，这正是加大 micro batch 能帮上忙的情形。{% endif %}这里算出的下界是原来的 {{ (lower_bound[BATCHES[-1]] / lower_bound[BATCHES[0]])|times(2) }}。
