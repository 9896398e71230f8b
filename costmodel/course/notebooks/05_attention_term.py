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
# 6ND 数的是"每个参数对每个 token 做一次乘加"，也就是所有以权重为一侧的矩阵乘。
# 注意力核心里的两个矩阵乘 QKᵀ 和 A·V 却不一样：两侧都是激活，没有一个参数参与，
# 所以 N 里根本没有它们。短序列时这一项小到可以忽略；序列一长，它按长度的平方增长，
# 会变成一步运算量里的大头。本节先推导它的大小，再看它在本场景里占多少、
# 不同的计数口径把它算成多少，最后和 PyTorch 的 FLOP 计数器对一次账。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"seq_len": 32768}

# %%
import sympy as sp

from costmodel.evaluate.account import account
from costmodel.derive import attention
from costmodel.inputs import models, scenario

from costmodel import course
from costmodel.present import display as d
from costmodel.derive.flops import model_flops
from costmodel.derive.symbols import B, D, L_full, N, S, d_attn, s, s_mean

sc, acc = d.load(scenario_file, overrides)
width_from = {"num_heads x head_dim": "头数 × 每头宽度", "attention_dim": "直接给定的 attention_dim",
              "hidden_size": "hidden_size（未给出头数与每头宽度）"}[sc["attention_dim_from"]]
d.md(f"场景：**{d.text(sc['name'])}**。注意力宽度 d = {d.num(sc['attention_dim'])}，来自{width_from}；"
     f"{sc['num_layers']} 层里有 {sc['num_full_attention_layers']} 层是全注意力层；"
     f"配置长度 S = {d.num(sc['seq_len'])}，平均真实长度 s̄ = {d.count(sc['mean_tokens_per_sample'])}，"
     f"每步 {sc['samples_per_step']} 个样本。")

# %% [markdown]
# ## 1. 从两个矩阵乘推出 4·s²·d
#
# 一个注意力头的宽度记作 d_h，序列长度记作 s。这个头的 Q、K、V 都是 s × d_h 的矩阵：
#
# - 打分 QKᵀ：(s × d_h) 乘 (d_h × s)，得到 s × s 的分数矩阵；
# - 加权求和 A·V：(s × s) 乘 (s × d_h)，得到 s × d_h 的输出。
#
# 按"一次乘加 = 2 FLOPs"，一个 (m × k)(k × n) 的矩阵乘是 2mnk。下面让 SymPy 逐项算出来，
# 再乘上头数 n_h，并把 n_h·d_h 换成注意力宽度 d。

# %%
per_head = attention.core_forward_per_head()
d.eq(r"F_{QK^\top}", per_head["QK^T"])
d.eq(r"F_{AV}", per_head["AV"])
d.eq(r"F_{\mathrm{fwd}}^{\mathrm{layer}}", r"n_h\,(F_{QK^\top}+F_{AV})\big|_{n_h d_h = d}",
     attention.forward_per_layer)

# %% [markdown]
# 反向传播对每个矩阵乘 C = A·B 要算两个同样大小的矩阵乘（对 A 的梯度和对 B 的梯度），
# 所以反向是前向的 2 倍，前向加反向是 3 倍。这和 6ND 里"2ND 前向 + 4ND 反向"是同一个道理。
# 一步有 B 个样本、L_full 个全注意力层（线性注意力层没有 s² 项），于是：

# %%
F = sp.Symbol("F_attn", positive=True)
d.eq(r"\frac{F_{\mathrm{bwd}}}{F_{\mathrm{fwd}}}", attention.BACKWARD_OVER_FORWARD)
d.eq(r"F_{\mathrm{attn}}(S)", attention.attention_padded)
d.eq(r"F_{\mathrm{attn}}(\bar{s})", attention.attention_actual)
d.eq(r"\text{attention share}", attention.share(F))
d.eq(r"\mathrm{MFU}_{\mathrm{with\ attn}}", attention.mfu_with_attention(F))

# %% [markdown]
# 课程把这两个读数都算了出来：一个按配置长度 S（每个样本都补齐），一个按平均真实长度 s̄。
# 分母里的模型 FLOPs 始终是真实 token 的 6ND。本场景的数字如下。

# %%
att = acc["attention"]
rows = []
for key, label in (("padded", "定长 S"), ("actual", "均长 s̄")):
    a = att[key]
    rows.append((label, d.count(a["seq_len"]), d.sci(a["flops_per_step"]),
                 d.sci(acc["model_flops_per_step"]), d.pct(a["share"]),
                 d.pct(a["mfu_with_attention"])))
d.table(rows, ["序列口径", "长度", "注意力 FLOPs", "6ND", "注意力占比", "含注意力的 MFU"],
        f"本场景的注意力项（课程口径：3×，整块 s×s；d = {sc['attention_dim']}，"
        f"L_full = {sc['num_full_attention_layers']}）")
d.md(f"按均长计，注意力核心占一步全部运算的 **{d.pct(att['actual']['share'])}**，把它算进分子后利用率从 "
     f"MFU {d.pct(acc['mfu'])} 变成 **{d.pct(att['actual']['mfu_with_attention'])}**；按定长计则是 "
     f"{d.pct(att['padded']['share'])} 和 {d.pct(att['padded']['mfu_with_attention'])}。"
     "哪一个读数更接近硬件实际做的事，取决于是否真的在补齐，第 6 节会拆开。")

# %% [markdown]
# ## 2. 课程的六行敏感性表
#
# 课程写作时不知道模型确切的层数和宽度，于是做了三组假设：48 层 × hidden 2048、48 层 × hidden 4096、
# 64 层 × hidden 2560，全注意力层按"每 4 层 1 层"计，注意力宽度取 hidden size，
# 每组再按定长和均长各算一行。下面把每组假设当作对本场景的覆盖（num_layers、hidden_size，
# 注意力宽度 = hidden size）重新解析场景，其余输入与全注意力层的间隔都沿用本场景
# （间隔比假设的层数还大时，取假设的层数，即只有一层全注意力）。

# %%
HYPOTHESES = [(48, 2048), (48, 4096), (64, 2560)]  # the course's guesses: (num_layers, hidden_size)
COURSE_TABLE = {(row["num_layers"], row["hidden_size"], row["sequence"]):  # the course's rows (a quote)
                (row["flops"], row["share"], row["mfu_with_attention"])
                for row in course.figures()["attention_table"]["rows"]}


def resolve_with(**keys):
    """The scenario in force with some keys replaced, and its account."""
    hsc = scenario.resolve(scenario_file, {**overrides, **keys})
    return hsc, account(hsc)


is_course = not sc.changed
hyp = {}
rows = []
for layers, hidden in HYPOTHESES:
    hsc, hacc = resolve_with(num_layers=layers, hidden_size=hidden, attention_dim=hidden,
                             num_heads=None, head_dim=None,
                             full_attention_every=min(sc["full_attention_every"], layers))
    hyp[(layers, hidden)] = (hsc, hacc)
    label = f"{layers} 层 h{hidden}（{hsc['num_full_attention_layers']} 层全注意力）"
    for i, (key, reading) in enumerate((("padded", "定长"), ("actual", "均长"))):
        a = hacc["attention"][key]
        row = [label, f"{reading} {d.num(a['seq_len'])}", d.sci(a["flops_per_step"]),
               d.pct(a["share"], 1), d.pct(a["mfu_with_attention"], 1)]
        if is_course:
            row.append(" / ".join(COURSE_TABLE[(layers, hidden, key)]))
        rows.append(row)
headers = ["假设", "序列口径", "注意力 FLOPs", "占总量", "含注意力的 MFU"]
d.table(rows, headers + (["课程原表（引用）"] if is_course else []),
        "三组形状假设 × 两种序列口径（本库现算）")
shares = [hacc["attention"][k]["share"] for _, hacc in hyp.values() for k in ("padded", "actual")]
mfus = [hacc["attention"][k]["mfu_with_attention"] for _, hacc in hyp.values()
        for k in ("padded", "actual")]
d.md(f"在这三组假设下，注意力核心占一步运算的 **{d.pct(min(shares), 0)} 到 {d.pct(max(shares), 0)}**，"
     f"含注意力的利用率在 **{d.pct(min(mfus), 1)} 到 {d.pct(max(mfus), 1)}** 之间，"
     f"而 6ND 口径的 MFU 是 {d.pct(acc['mfu'])}。"
     + ("本场景就是课程场景，最后一列是课程原文给出的数字，可以逐行对照：它们与本库现算的结果一致。"
        if is_course else
        "本场景不是课程场景，所以这里没有列出课程原表的数字：课程的数字只对课程的输入成立。"))

# %% [markdown]
# ## 3. 注意力占比随序列长度怎么变
#
# 把一步的 token 数固定、只改变每个样本的长度 s（B = D / s），占比就只剩 s 一个变量。
# 6ND 对每个 token 是常数，注意力对每个 token 正比于 s，于是占比是 s 的一条饱和曲线，
# 占比过半的长度也能直接解出来：

# %%
share_of_s = sp.simplify(attention.share(attention.step_flops(s)).subs(D, B * s))
(s_half,) = sp.solve(sp.Eq(share_of_s, sp.Rational(1, 2)), s)
d.eq(r"\text{share}(s)", share_of_s)
d.eq(r"s_{1/2}", s_half)

# %%
import matplotlib.pyplot as plt
import numpy as np

d.setup_plots()
share_fn = sp.lambdify((s, N, d_attn, L_full), share_of_s, "numpy")
lengths = np.geomspace(1024, 4 * sc["seq_len"], 200)
fig, ax = plt.subplots()
curves = [(f"{layers} layers, h{hidden} ({hsc['num_full_attention_layers']} full)",
           hsc["attention_dim"], hsc["num_full_attention_layers"], "-")
          for (layers, hidden), (hsc, _) in hyp.items()]
curves.append((f"scenario: d={sc['attention_dim']}, {sc['num_full_attention_layers']} full",
               sc["attention_dim"], sc["num_full_attention_layers"], "--"))
for label, width, full, style in curves:
    ax.plot(lengths, 100 * share_fn(lengths, sc["activated_params"], width, full), style,
            label=label)
for x, name in ((sc["mean_tokens_per_sample"], "mean length"), (sc["seq_len"], "seq_len")):
    ax.axvline(x, color="grey", lw=0.8, ls=":")
    ax.text(x, 2, f" {name}", rotation=90, va="bottom", fontsize=8, color="grey")
ax.set_xscale("log", base=2)
ax.set_ylim(0, 100)
ax.set_xlabel("sequence length s (tokens)")
ax.set_ylabel("attention share of all FLOPs (%)")
ax.set_title(f"Attention-core share vs sequence length (N = {sc['activated_params']:.3g})")
ax.legend(fontsize=8, loc="upper left")
plt.show()

# %%
half = {label: float(s_half.subs({N: sc["activated_params"], d_attn: width, L_full: full}))
        for label, width, full, _ in curves}
d.md("占比过半的序列长度 s₁/₂ = N / (2·L_full·d)：" + "；".join(
    f"{label} 为 {d.num(v)}" for label, v in half.items())
    + "。注意这张图里每个样本都按同一长度 s 计，没有定长补齐的混合口径（见第 6 节）。")

# %% [markdown]
# ## 4. 真实的 Qwen3.6-35B-A3B：注意力宽度不是 hidden size
#
# 课程用 hidden size 当注意力宽度，但这只在"头数 × 每头宽度 = hidden size"时成立。
# 从 Qwen3.6-35B-A3B 发布的 config.json 读出它的结构（`costmodel.inputs.models`）：

# %%
shape = models.load_shape("qwen3.6-35b-a3b")
d.table([
    ("hidden_size", d.num(shape.hidden_size)),
    ("全注意力层的头数 × 每头宽度", f"{shape.num_heads} × {shape.head_dim} = {d.num(shape.attention_dim)}"),
    ("注意力宽度 / hidden size", f"{shape.attention_dim / shape.hidden_size:g}"),
    ("全注意力层 / 总层数", f"{shape.num_full_attention_layers} / {shape.num_layers}"),
    ("其余层", f"{shape.num_linear_attention_layers} 层线性注意力（gated DeltaNet），没有 s² 项"),
], ["字段", "值"], "Qwen3.6-35B-A3B 的注意力结构（来自 config.json）")

# %%
real_product = shape.num_full_attention_layers * shape.attention_dim
products = {(layers, hidden): hsc["num_full_attention_layers"] * hsc["attention_dim"]
            for (layers, hidden), (hsc, _) in hyp.items()}
same = [f"{layers} 层 h{hidden}" for (layers, hidden), p in products.items() if p == real_product]
rsc, racc = resolve_with(num_layers=shape.num_layers, full_attention_every=shape.full_attention_every,
                         hidden_size=shape.hidden_size, num_heads=shape.num_heads,
                         head_dim=shape.head_dim, attention_dim=shape.attention_dim)
wsc, wacc = resolve_with(num_layers=shape.num_layers, full_attention_every=shape.full_attention_every,
                         hidden_size=shape.hidden_size, attention_dim=shape.hidden_size,
                         num_heads=None, head_dim=None)
rows = []
for label, x in (("真实宽度 d = 头数 × 每头宽度", racc), ("误用 hidden size 当宽度", wacc)):
    for key, reading in (("padded", "定长"), ("actual", "均长")):
        a = x["attention"][key]
        rows.append((label, reading, d.sci(a["flops_per_step"]), d.pct(a["share"], 1),
                     d.pct(a["mfu_with_attention"], 1)))
d.table(rows, ["注意力宽度", "序列口径", "注意力 FLOPs", "占总量", "含注意力的 MFU"],
        f"Qwen3.6-35B-A3B 的结构（L_full = {rsc['num_full_attention_layers']}）代入本场景的其余输入")
own = (sc["attention_dim"] == rsc["attention_dim"]
       and sc["num_full_attention_layers"] == rsc["num_full_attention_layers"])
d.md(("本场景用的正是这个结构，所以第一行与第 1 节的数字相同。" if own else
      f"本场景自己的结构是 d = {d.num(sc['attention_dim'])}、L_full = "
      f"{sc['num_full_attention_layers']}，上表只是把 Qwen3.6-35B-A3B 的结构代入本场景的其余输入，供对照。")
     + f"把 hidden size 当宽度，每个全注意力层的注意力项只算到真实值的 "
     f"{d.pct(shape.hidden_size / shape.attention_dim, 0)}。决定注意力项的是乘积 L_full·d："
     f"真实结构是 {shape.num_full_attention_layers} × {d.num(shape.attention_dim)} = {d.num(real_product)}，"
     "三组假设分别是 " + "、".join(d.num(p) for p in products.values())
     + ("，其中 " + "、".join(same) + " 与真实结构的乘积恰好相等，所以"
        + ("那两行" if len(same) == 1 else f"那 {2 * len(same)} 行") + "就是真实模型的注意力项。"
        if same else "，在本场景的层间隔下没有一组与真实结构相等。"))

# %% [markdown]
# ## 5. 同一次运行，不同的计数口径
#
# 公开的 FLOP 计数器在两点上分歧最大（细节见参考资料 flop-conventions）：
#
# - **causal**：因果注意力只需要 s×s 的下三角，causal kernel 会跳过上三角，只算一半；
# - **反向倍数**：模型 FLOPs 口径下反向是前向的 2 倍；FlashAttention 的反向要重算一次 QKᵀ，
#   5 个矩阵乘而不是 4 个，反向是前向的 2.5 倍，合计 3.5 倍。
#
# 课程、PaLM 附录 B、nanoGPT 的 `estimate_mfu` 和 torchtitan 都按"3 倍、整块方阵"计；
# Megatron-LM 自 2025 年起按 causal 减半，packed 时还用真实的 cu_seqlens 求 Σs²。
# 下面把同一次运行按四种口径各算一遍。

# %%
cluster = sc["step_time"] * sc["num_gpus"] * sc["peak_flops"]
six_nd = acc["model_flops_per_step"]
factor, mean_flops = {}, {}
rows = []
for key, conv in attention.CONVENTIONS.items():
    factor[key] = conv.training_multiplier * conv.square_fraction
    row = [conv.name, str(conv.training_multiplier), str(conv.square_fraction)]
    for seq in (sc["mean_tokens_per_sample"], sc["seq_len"]):
        f = attention.attention_training_flops(seq, sc["attention_dim"], sc["num_full_attention_layers"],
                                               sc["samples_per_step"], key)
        mean_flops.setdefault(key, f)
        row += [d.sci(f), d.pct(f / (six_nd + f), 1), d.pct((six_nd + f) / cluster, 1)]
    rows.append(row + [conv.source])
d.table(rows, ["口径", "训练/前向", "方阵比例", "均长 FLOPs", "均长占比", "均长 MFU",
               "定长 FLOPs", "定长占比", "定长 MFU", "谁这样算"],
        "四种口径下的注意力项（本场景，同一次运行）")
spread = max(factor.values()) / min(factor.values())
d.eq(r"\frac{\max(\text{multiplier}\times\text{fraction})}{\min(\text{multiplier}\times\text{fraction})}",
     spread, f"{float(spread):.2f}")

# %%
lo, hi = min(mean_flops, key=mean_flops.get), max(mean_flops, key=mean_flops.get)


def reading(key):
    f = mean_flops[key]
    return f"注意力占比 {d.pct(f / (six_nd + f), 1)}、利用率 {d.pct((six_nd + f) / cluster, 1)}"


d.md(f"同样按均长计，最小的口径（{attention.CONVENTIONS[lo].name}）给出{reading(lo)}，"
     f"最大的口径（{attention.CONVENTIONS[hi].name}）给出{reading(hi)}：同一次运行的注意力项，"
     f"记账结果相差 {float(spread):.2f} 倍。报告一个\"含注意力的 MFU\"时，必须同时写明用的是哪种口径；"
     "拿两个口径不同的数相比，得出的结论可能完全相反。")

# %% [markdown]
# ## 6. 定长行里藏着的混合口径
#
# 课程的"定长"行把两种东西放在了一起：注意力项按补齐后的长度 S 算（好像 pad 位置也参与了注意力），
# 6ND 却仍然只数真实 token 的 D。如果定长补齐真的发生了，pad token 也会穿过每一个线性层，
# 硬件实际做的线性层运算是 6N·B·S，而不是 6N·D。下面把三种自洽程度不同的读法并排：

# %%
mixed = model_flops + attention.attention_padded
padded_real = model_flops.subs(D, B * S) + attention.attention_padded
packed = model_flops + attention.attention_actual
d.eq(r"F_{\text{course, padded row}}", mixed)
d.eq(r"F_{\text{padding real}}", padded_real)
d.eq(r"F_{\text{padding real}} - F_{\text{course, padded row}}",
     sp.factor((padded_real - mixed).subs(D, B * s_mean)))

# %%
subs = sc.substitutions()
readings = [
    ("课程定长行：6N·D + 注意力(S)", model_flops, attention.attention_padded),
    ("若真的定长补齐：6N·B·S + 注意力(S)", model_flops.subs(D, B * S), attention.attention_padded),
    ("若已 packing（varlen）：6N·D + 注意力(s̄)", model_flops, attention.attention_actual),
]
values = {}
rows = []
for label, linear, attn in readings:
    lin, at = float(linear.subs(subs)), float(attn.subs(subs))
    values[label] = (lin, at)
    rows.append((label, d.sci(lin), d.sci(at), d.sci(lin + at), d.pct(at / (lin + at), 1),
                 d.pct((lin + at) / cluster, 1)))
d.table(rows, ["读法", "线性层 FLOPs", "注意力 FLOPs", "合计", "注意力占比", "合计 / 集群峰值"],
        "定长行的三种读法（本场景，均不含 recompute）")
(mix_l, mix_a), (pad_l, pad_a), (pk_l, pk_a) = values.values()
if pad_l > mix_l:
    d.md(f"课程的定长行给出利用率 {d.pct((mix_l + mix_a) / cluster, 1)}。如果补齐真的发生，"
         f"硬件在线性层上还多做了 {d.sci(pad_l - mix_l)} FLOPs（pad token 的 6N·B·(S − s̄)），"
         f"它实际做的运算对应 **{d.pct((pad_l + pad_a) / cluster, 1)}** 的利用率，注意力占比则是 "
         f"{d.pct(pad_a / (pad_l + pad_a), 1)}，而不是 {d.pct(mix_a / (mix_l + mix_a), 1)}。"
         f"如果已经 packing，则应看第三行：{d.pct((pk_l + pk_a) / cluster, 1)}，而且这还是下限，"
         "因为样本长度不一时 Σs² 大于 B·s̄²（见 04）。三行里没有一行是\"真实 MFU\"："
         "它们回答的是三个不同的问题，课程的定长行恰好把其中两个问题的分子和分母混在了一起。")
else:
    d.md(f"本场景的平均真实长度等于配置长度，没有 pad：三种读法给出同一个数，"
         f"利用率 {d.pct((mix_l + mix_a) / cluster, 1)}、注意力占比 {d.pct(mix_a / (mix_l + mix_a), 1)}。"
         "一旦样本短于配置长度，课程的定长行就会把补齐后的注意力和真实 token 的 6ND 混在一起，"
         "三行也随之分开。")
if sc["recompute"] != "none":
    d.md(f"另外，本场景的 recompute 是 `{sc['recompute']}`，硬件还要重算一部分前向，"
         "上表的合计都没有包含这部分；表中的利用率因此都低于硬件真正的忙碌程度。")

# %% [markdown]
# ## 7. 对账：与 PyTorch 的 FLOP 计数器比一比
#
# 公式是否数对了，最好让一个独立的计数器来验证。`make validate` 在小尺寸的真实模型结构上
# 跑一次前向加反向，用 `torch.utils.flop_counter.FlopCounterMode` 逐个算子计数，再与本库的公式比较，
# 结果写进 `costmodel/course/flop_counter.csv`（predicted 是公式的预测，counted 是计数器数到的）。
# 参考资料记录过：注意力用 eager 实现、专家逐个计算时，计数器数到的恰好是
# 6·N·D + 3·(4·s²·d·L_full·B)，即课程的"3 倍、整块方阵"口径；输入 embedding 是查表，
# 不计 FLOPs，所以 N 里也不含它。

# %%
import csv
from importlib import resources

csv_path = resources.files("costmodel.course") / "flop_counter.csv"


def agrees(row):
    try:
        return float(row.get("difference") or "nan") == 0
    except ValueError:
        return False


if csv_path.exists():
    with csv_path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        columns = reader.fieldnames or []
        raw = list(reader)
    counter_rows = [[d.csv_cell(r[c] or "") for c in columns] for r in raw]
    d.table(counter_rows, columns, "FLOP 计数器对账（costmodel/course/flop_counter.csv）")
    core = [r for r in raw if r.get("term") in ("matmul_6ND", "attention_core")]
    off = sorted({r.get("term", "") for r in raw if not agrees(r)})
    text = f"共 {len(raw)} 行，其中 {sum(map(agrees, raw))} 行预测与计数完全相同。"
    if core and all(map(agrees, core)):
        text += (f"本节用到的两项（6ND 的矩阵乘与注意力核心）在 {len({r.get('model') for r in core})} "
                 "个模型结构上都逐个 FLOP 对上了：课程口径的 3·4·s²·d·L_full·B 正是计数器数到的量。")
    elif core:
        text += "注意：6ND 或注意力核心有对不上的行，先看 note 一列。"
    if off:
        text += "有差异的项是 " + "、".join(f"`{x}`" for x in off) + "，原因写在 note 一列。"
    d.md(text)
else:
    counter_rows = []
    d.md("还没有对账结果：没有找到 `costmodel/course/flop_counter.csv`。在仓库根目录运行 `make validate` "
         "生成它，再重新执行本笔记本。")

# %% [markdown]
# ## 本节要点

# %%
d.md("\n".join([
    f"- 注意力核心每层前向是 4·s²·d，训练按课程口径再乘 3；本场景 d = {d.num(sc['attention_dim'])}，"
    f"有 {sc['num_full_attention_layers']} 个全注意力层。",
    f"- 按均长，注意力占一步运算的 {d.pct(att['actual']['share'])}，含注意力的利用率 "
    f"{d.pct(att['actual']['mfu_with_attention'])}（6ND 口径的 MFU 是 {d.pct(acc['mfu'])}）；"
    f"按定长则是 {d.pct(att['padded']['share'])} 和 {d.pct(att['padded']['mfu_with_attention'])}。",
    f"- 课程的三组假设给出 {d.pct(min(shares), 0)}–{d.pct(max(shares), 0)} 的注意力占比；"
    f"Qwen3.6-35B-A3B 的真实注意力宽度是 {shape.num_heads} × {shape.head_dim} = "
    f"{d.num(shape.attention_dim)}，不是 hidden size {d.num(shape.hidden_size)}。",
    f"- 口径（causal 减半、FlashAttention 的 3.5 倍）能让注意力项相差 {float(spread):.2f} 倍；"
    "报数时必须写明口径。",
    (f"- 课程的定长行把补齐后的注意力和真实 token 的 6ND 放在一起；若补齐真实发生，"
     f"硬件做的运算对应 {d.pct((pad_l + pad_a) / cluster, 1)} 的利用率。" if pad_l > mix_l else
     "- 本场景没有 pad，定长行的三种读法相同；有 pad 时课程的定长行混用了两种口径。"),
    ("- 对账：" + (f"计数器结果见第 7 节的 {len(counter_rows)} 行。" if counter_rows
                 else "还没有计数器结果（先运行 `make validate`）。")),
]))
