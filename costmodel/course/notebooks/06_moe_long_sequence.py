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
# # 06 MoE 与长序列：为什么它们天然拉低 MFU
#
# MFU 的分母是峰值算力，而峰值只有在大而规整的矩阵乘上才拿得到。MoE 和长序列各自从不同方向
# 破坏这个前提：MoE 把一个大 FFN 拆成许多小专家，每个专家分到的 token 少，还要额外搬运和等待；
# 长序列把显存压满，micro batch 往往只能是 1，注意力里的矩阵乘又是又长又扁的形状。
# 本节逐项把这些形状和开销算出来，并用 roofline 的语言（运算强度 vs 机器平衡点，见 07）判断
# 哪些真的会让 GPU 饿着、哪些没有直觉上那么严重。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"micro_batch": 2}

# %%
import numpy as np
import sympy as sp

from costmodel.inputs import widths
from costmodel.inputs.assumptions import assumed
from costmodel.evaluate import router
from costmodel.evaluate import layouts
from costmodel.present import display as d
from costmodel.derive import moe, roofline
from costmodel.inputs import hardware, models
from costmodel.derive.symbols import BW, D, E, P, S, b_micro, bytes_per_element, h, k_dim, k_top, m, n

sc, acc = d.load(scenario_file, overrides)
is_moe = sc["num_experts"] > 0
balance = acc["machine_balance"]
d.md(f"场景：**{d.text(sc['name'])}**（{sc['num_gpus']} × {sc['gpu']}，机器平衡点 {d.num(balance, 1)} FLOP/byte，"
     f"micro batch = {sc['micro_batch']}，配置长度 S = {d.num(sc['seq_len'])}）。"
     + (f"这是一个 MoE 模型：每层 {sc['num_experts']} 个路由专家，每个 token 选 "
        f"{sc['experts_per_token']} 个。" if is_moe else
        "这是一个**稠密模型**（num_experts = 0）：没有路由、没有专家，MoE 的三项损耗都不存在，"
        "下面只给出稠密 FFN 的形状，以及长序列那两项。"))

# %% [markdown]
# 有几个量场景文件里没有，这里作为**有名字的假设**写出来，可以按自己的实际配置修改：
#
# - **EP 大小**：一层的专家分布在多少张卡上。课程的配置是 EP = 8；这里取不超过 8、
#   同时整除专家数和 GPU 数的最大值。
# - **专家宽度**（每个专家 FFN 的中间维）：场景指定了模型 config 时取它的 `moe_intermediate_size`，
#   否则借用课程模型 Qwen3.6-35B-A3B 的值。
# - **稠密 FFN 宽度**：场景指定了稠密模型的 config 时取它的 `intermediate_size`，否则按课程写法取 4 × hidden。
# - **MoE 层数**：有 config 时取它的 MoE 层数，否则假设每层都是 MoE（Qwen3.6-35B-A3B 就是如此）。
# - **每头宽度 head_dim**：场景没给时假设为 128。

# %%
ASSUMED_HEAD_DIM = assumed("head_dim")  # used only when the scenario gives no head_dim
SAMPLE_TOKENS = 8192  # tokens routed in the load-imbalance simulation
SEED = 0
SKEWS = [0.0, 0.25, 0.5, 1.0]  # Zipf exponents of expert popularity (0 = uniform)

hidden = sc["hidden_size"]
ep_size = layouts.default_ep_size(sc["num_experts"], sc["num_gpus"])
w_dense = widths.dense_ffn_width(hidden, sc["model"])
w_expert = widths.expert_width(sc["model"]) if is_moe else None
shape = models.load_shape(sc["model"]) if sc["model"] else None
moe_layers = (shape.num_moe_layers if shape else sc["num_layers"]) if is_moe else 0
if sc["head_dim"]:
    head_dim, head_from = sc["head_dim"], "场景给出"
elif sc["num_heads"]:
    head_dim, head_from = sc["attention_dim"] // sc["num_heads"], "注意力宽度 / 头数"
else:
    head_dim, head_from = ASSUMED_HEAD_DIM, "假设值"
source_text = {"config": "来自场景的模型 config", "preset": "借用 Qwen3.6-35B-A3B 的 config（假设）",
               "rule": "按课程写法 4 × hidden（假设）"}
rows = [("hidden size", d.num(hidden), "场景给出"),
        ("稠密 FFN 宽度", d.num(w_dense.value), source_text[w_dense.source]),
        ("每头宽度 head_dim", d.num(head_dim), head_from)]
if is_moe:
    rows[2:2] = [("专家宽度", d.num(w_expert.value), source_text[w_expert.source]),
                 ("EP 大小", str(ep_size), "不超过课程的 8，且整除专家数与 GPU 数"),
                 ("MoE 层数", str(moe_layers), "来自 config" if shape else "假设每层都是 MoE")]
d.table(rows, ["量", "取值", "来源"], "本节用到的形状")

# %% [markdown]
# ## 1. 专家分到多少 token：GEMM 变瘦
#
# 路由器让每个 token 去 k 个专家（共 E 个）。从整步看，一个专家平均分到 D·k/E 个 token，
# 这是课程的算法。但矩阵乘不是按整步执行的，而是按 micro batch、逐层执行：一个 micro batch 有
# b 条长度为 S 的序列；在 EP 组内，all-to-all 把 e_p 张卡上属于同一个专家的 token 汇集起来，
# 所以一个专家的一次 GEMM 有 e_p·b·S·k/E 行，而稠密 FFN 在一张卡上有 b·S 行。

# %%
d.eq(r"\frac{\text{tokens}}{\text{expert}}\Big|_{\text{step}}", moe.tokens_per_expert_step)
d.eq(r"M_{\text{dense}}", moe.dense_rows)
d.eq(r"M_{\text{expert}}", moe.expert_rows)
d.eq(r"\frac{M_{\text{expert}}}{M_{\text{dense}}}", sp.simplify(moe.expert_rows / moe.dense_rows))


def rows_text(x):
    """A row count: whole above 100, else with two decimals (an average can be fractional)."""
    return d.num(x) if x >= 100 else d.num(x, 2)


if is_moe:
    subs = {**sc.substitutions(), moe.ep: ep_size}
    step_view = float(moe.tokens_per_expert_step.subs(subs))
    m_dense = float(moe.dense_rows.subs(subs))
    m_expert = float(moe.expert_rows.subs(subs))
    only = "只有" if m_expert < m_dense else "是"  # e_p k / E can exceed 1
    d.md(f"本场景：整步看每个专家平均 {rows_text(step_view)} 个 token（整步共 {d.count(sc['tokens_per_step'])} 个）；"
         f"按一次 GEMM 看，稠密 FFN 有 {rows_text(m_dense)} 行，一个专家有 {rows_text(m_expert)} 行，"
         f"{only}前者的 {d.pct(m_expert / m_dense, 1)}。")
else:
    m_dense = float(moe.dense_rows.subs(sc.substitutions()))
    d.md(f"本场景是稠密模型，没有专家：FFN 的一次 GEMM 有 b·S = {d.num(m_dense)} 行。")

# %% [markdown]
# 矩阵乘 (M × K)(K × N) 读两个输入、写一个输出，运算强度（每字节 HBM 流量做多少 FLOPs）是
# 2MNK / (β(MK + KN + MN))。把它和 GPU 的机器平衡点（峰值 / 带宽）相比：高于平衡点的受算力限制，
# 低于的受带宽限制。下表列出 FFN 第一个投影（hidden → 宽度）的形状。

# %%
gemm_rows = [("稠密 FFN（整步视角）", sc["tokens_per_step"], w_dense.value),
             ("稠密 FFN（一次 GEMM）", m_dense, w_dense.value)]
if is_moe:
    gemm_rows += [("单个专家（整步视角）", step_view, w_expert.value),
                  ("单个专家（一次 GEMM）", m_expert, w_expert.value)]
rows = []
for label, rows_m, width in gemm_rows:
    g = moe.gemm(rows_m, hidden, width)
    rows.append((label, f"[{d.num(g['m'])}, {d.num(g['k'])}] × [{d.num(g['k'])}, {d.num(g['n'])}]",
                 d.sci(g["flops"]), d.num(g["intensity"], 1), d.times(g["intensity"] / balance, 1)))
d.table(rows, ["GEMM", "形状", "FLOPs", "运算强度 FLOP/byte", "相对平衡点"],
        f"FFN 投影的形状与运算强度（{sc['gpu']} 平衡点 {d.num(balance, 1)} FLOP/byte）")
if is_moe:
    g_exp = moe.gemm(m_expert, hidden, w_expert.value)
    d.md(f"专家 GEMM 的行数{only}稠密 FFN 的 {d.pct(m_expert / m_dense, 1)}，"
         + ("宽度也窄得多" if w_expert.value < w_dense.value else "宽度")
         + f"（{d.num(w_expert.value)} 对 {d.num(w_dense.value)}）。一张卡上要依次跑 "
         f"{sc['num_experts'] // ep_size} 个这样的小 GEMM（或一个 grouped GEMM），"
         "每个都更难铺满所有 SM、更难隐藏启动和尾部开销。"
         + (f"但按 roofline，它的运算强度 {d.num(g_exp['intensity'], 1)} 仍在平衡点之上："
            "变瘦带来的是调度与 tile 利用率上的损失，不是带宽瓶颈。"
            if g_exp["intensity"] > balance else
            f"它的运算强度 {d.num(g_exp['intensity'], 1)} 已经低于平衡点：这些 GEMM 受带宽限制，"
            "峰值算力用不满。"))

# %% [markdown]
# ## 2. permute / unpermute：不产生 FLOPs 的搬运
#
# 进入专家之前，每个 token 按路由结果复制 k 份、按专家重排（permute）；专家算完，
# 再把 k 份输出按原顺序收回并加权合并（unpermute）。每个方向都要搬 tokens × hidden × β × k 字节，
# 不做任何乘加，是纯粹的访存操作，最好情况下的耗时就是字节数除以 HBM 带宽。

# %%
d.eq(r"\text{bytes}_{\text{one way}}", moe.permute_bytes)
if is_moe:
    tokens_per_gpu = sc["tokens_per_step"] / sc["num_gpus"]
    per_way = float(moe.permute_bytes.subs({moe.tokens: tokens_per_gpu, h: hidden,
                                            bytes_per_element: 2, k_top: sc["experts_per_token"]}))
    movements = 2 * 2 * moe_layers  # (permute + unpermute) x (forward + backward) x MoE layers
    total = per_way * movements
    seconds = total / sc["hbm_bandwidth"]
    d.table([("每卡每步的真实 token", d.num(tokens_per_gpu), "D / GPU 数"),
             ("每层每个方向", d.gb(per_way, 2), "tokens × hidden × 2 字节 × k"),
             ("每步搬运次数", str(movements), f"(permute + unpermute) × (前向 + 反向) × {moe_layers} 层"),
             ("每卡每步合计", d.gb(total, 1), ""),
             ("按 HBM 峰值带宽的耗时", f"{seconds:.3f} s", f"{d.num(sc['hbm_bandwidth'] / 1e12, 2)} TB/s"),
             ("占单步耗时", d.pct(seconds / sc["step_time"], 3), f"单步 {d.num(sc['step_time'], 1)} s")],
            ["量", "值", "说明"], "permute / unpermute 的访存量（BF16，每卡）")
    d.md(f"即使按峰值带宽，这部分也要 {seconds:.3f} 秒，占单步的 {d.pct(seconds / sc['step_time'], 3)}。"
         "这是下限：真实的 permute kernel 是不规则的 gather/scatter，很难跑到峰值带宽；"
         + ("重算（recompute）还会把前向那一半再做一次；" if sc["recompute"] != "none" else "")
         + "它还和 all-to-all 通信串在一起。它不进任何 FLOPs 口径，只让 T 变长。")
else:
    d.md("稠密模型没有路由，也就没有 permute / unpermute。")

# %% [markdown]
# ## 3. 负载不均：热门专家所在的卡成为 straggler
#
# 路由器不会把 token 平均分给专家。专家分布在 EP 组的各张卡上，一层 MoE 要等最忙的那张卡算完，
# 所以这一层的耗时按 **straggler 系数 = 最忙 rank 的负载 / 平均负载** 放大，其余的卡在这段时间里空等。
# 下面用一个带固定种子的模拟来量化：专家热度按 Zipf 分布（第 i 热的专家 ∝ i^(−a)，a = 0 为均匀），
# 每个 token 按热度不放回地选 k 个专家。哪几个热门专家恰好落在同一张卡上是运气，
# 所以同一组路由结果用多种随机而均衡的放置各算一次，取中位数和最差值；
# 再和一种"知道负载"的放置对比：从最热的专家开始，依次放到当前最空、还有空位的卡上。
# 真实路由器有负载均衡损失，偏斜的程度要从训练日志里的专家计数去量，这里的 a 只是几档示意。

# %%
PLACEMENTS = 64  # random placements drawn per skew level
if is_moe and ep_size > 1 and sc["num_experts"] <= router.MAX_SIMULATED_EXPERTS:
    runs = [router.simulate_router(sc["num_experts"], sc["experts_per_token"], ep_size, SAMPLE_TOKENS,
                                a, SEED, PLACEMENTS) for a in SKEWS]
    median = {r.skew: float(np.median(r.rank_factors)) for r in runs}
    d.table([(f"{r.skew:g}", d.times(r.expert_factor, 2), d.times(median[r.skew], 3),
              d.times(r.rank_factors.max(), 3), d.times(r.greedy_factor, 3),
              d.pct(1 - 1 / median[r.skew], 1)) for r in runs],
            ["Zipf 指数 a", "最热专家 / 平均", "straggler（随机放置，中位数）", "straggler（随机放置，最差）",
             "straggler（按负载放置）", "EP 组平均空等（中位数）"],
            f"模拟路由：{d.num(SAMPLE_TOKENS)} 个 token，top-{sc['experts_per_token']} / "
            f"{sc['num_experts']} 个专家，EP = {ep_size}，{PLACEMENTS} 种随机放置，种子 {SEED}")
    worst = runs[-1]
    rank_excess, expert_excess = median[worst.skew] - 1, worst.expert_factor - 1
    d.md(f"均匀路由时 straggler 系数的中位数只有 {d.times(median[runs[0].skew], 3)}（有限样本的随机波动）；"
         f"Zipf 指数 {worst.skew:g} 时最热的专家分到平均值的 {d.times(worst.expert_factor, 1)}，"
         f"随机放置下最忙的卡比平均多算 {d.pct(median[worst.skew] - 1, 1)}（中位数），"
         f"运气差时多算 {d.pct(worst.rank_factors.max() - 1, 1)}，MoE 层的耗时随之放大。"
         + (f"一张卡上有 {sc['num_experts'] // ep_size} 个专家，能平摊掉一部分专家级的不均，"
            "所以 rank 级的系数" + ("远小于" if rank_excess < expert_excess / 2 else "小于")
            + "专家级的系数；" if rank_excess < expert_excess else
            f"一张卡上有 {sc['num_experts'] // ep_size} 个专家，这里平摊不掉专家级的不均；")
         + "如果按实测负载重新放置专家，系数"
         + ("降到 " if worst.greedy_factor < median[worst.skew] else "是 ")
         + f"{d.times(worst.greedy_factor, 3)}。这说明负载不均的代价既取决于路由器，也取决于专家放在哪里"
         "（按负载放置的前提是各专家的热度相对稳定）。")
elif is_moe and ep_size > 1:
    runs = []
    d.md(f"本场景每层有 {d.num(sc['num_experts'])} 个专家，超过这个模拟的上限 "
         f"{d.num(router.MAX_SIMULATED_EXPERTS)}（每个 token 要为每个专家抽一个随机分数），这里不做路由模拟。"
         "负载不均的程度要从训练日志里的专家计数去量：各 rank 每层分到的 token 数，最大值比平均值"
         "多出多少，MoE 层就慢多少。")
elif is_moe:
    runs = []
    d.md("按上面的假设 EP 大小为 1：所有专家都在同一张卡上，不存在卡间的 straggler。")
else:
    runs = []
    d.md("稠密模型没有路由器，也就没有专家间的负载不均。")

# %%
import matplotlib.pyplot as plt

d.setup_plots()
if runs:
    fig, ax = plt.subplots()
    width = 0.8 / len(runs)
    for i, r in enumerate(runs):
        ax.bar(np.arange(ep_size) + i * width, r.rank_loads / r.rank_loads.mean(), width,
               label=f"Zipf a = {r.skew:g} (straggler {r.rank_factor:.2f}x)")
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(np.arange(ep_size) + width * (len(runs) - 1) / 2, [str(i) for i in range(ep_size)])
    ax.set_xlabel("EP rank")
    ax.set_ylabel("tokens routed / mean")
    ax.set_title(f"Load per EP rank, one random placement (top-{sc['experts_per_token']} of "
                 f"{sc['num_experts']}, seed {SEED})")
    ax.legend(fontsize=8)
    plt.show()

# %% [markdown]
# ## 4. 注意力的 GEMM 形状：K 维只有 head_dim
#
# 每个头的 QKᵀ 是 [s, d_h] × [d_h, s]：两个维度是序列长度，累加维只有 d_h。
# 把它代进运算强度公式，令 s 趋于无穷：

# %%
s_len, d_h = sp.symbols("s d_h", positive=True)
qk_intensity = roofline.gemm_intensity.subs({m: s_len, n: s_len, k_dim: d_h})
qk_limit = sp.limit(qk_intensity, s_len, sp.oo)
d.eq(r"\mathrm{AI}_{QK^\top}", sp.simplify(qk_intensity))
d.eq(r"\lim_{s\to\infty}\mathrm{AI}_{QK^\top}", qk_limit, qk_limit.subs(bytes_per_element, 2))
ai_qk = roofline.intensity(sc["seq_len"], sc["seq_len"], head_dim)
ai_square = roofline.intensity(sc["seq_len"], hidden, hidden)
d.md(f"本场景 d_h = {head_dim}、s = S = {d.num(sc['seq_len'])}：QKᵀ 的运算强度是 {d.num(ai_qk, 1)} FLOP/byte，"
     f"{'高于' if ai_qk > balance else '低于'} {sc['gpu']} 的平衡点 {d.num(balance, 1)}；"
     f"作为对照，同样多行的 [S, hidden] × [hidden, hidden] 方阵乘是 {d.num(ai_square, 1)}。"
     "运算强度封顶在 d_h 附近，与序列多长无关。"
     + ("在这张卡上它仍受算力限制，扁形状的代价主要不在带宽，而在别处：" if ai_qk > balance else
        "在这张卡上它受带宽限制；此外，")
     + "每个输出元素只累加 d_h 次乘积，QKᵀ 与 A·V 之间还夹着 softmax（求最大值、指数、归一化，"
     "都不在 tensor core 上）。FlashAttention 把 s × s 的分数块留在片上，HBM 流量比上式更少，"
     "但这些片上开销仍在，所以注意力 kernel 的实测效率通常低于大方阵 GEMM。")

# %% [markdown]
# ## 5. micro batch 1、2、4：权重 GEMM 的运算强度
#
# 权重 GEMM [M, K] × [K, N] 里，权重 K × N 读一次，M 行 token 共享它。M 越大，每字节权重做的运算越多，
# 运算强度随 M 增长，直到趋近上限 2KN / (β(K + N))。把"运算强度 = 机器平衡点"解出来，
# 就是不再受带宽限制所需的最少 token 行数 M*。课程说 micro batch 从 1 到 4，"同样的权重读一次，
# 算 4 倍的数据，运算强度 ×4"：这只在 M 远小于 K、N 时近似成立，M 一旦大了，强度就向上限饱和。

# %%
bal = sp.Symbol(r"\mathrm{balance}", positive=True)
(m_star,) = sp.solve(sp.Eq(roofline.gemm_intensity, bal), m)
numerator, denominator = sp.fraction(sp.simplify(m_star))
m_star_shown = numerator / sp.collect(sp.expand(denominator), bal * bytes_per_element)
assert sp.simplify(m_star_shown - m_star) == 0
d.eq(r"M^{*}", m_star_shown)
d.eq(r"\lim_{M\to\infty}\mathrm{AI}", moe.intensity_limit)

# %%
weights = [("dense FFN", w_dense.value)] + ([("expert", w_expert.value)] if is_moe else [])
gpus = [sc["gpu"]] + [g for g in ("H20", "H100-SXM") if g != sc["gpu"]]
rows = []
for name, width in weights:
    for g in gpus:
        bal_g = balance if g == sc["gpu"] else hardware.GPUS[g].balance
        need = moe.rows_for_intensity(bal_g, hidden, width)
        rows.append((f"{name} [{hidden} × {width}]", g, d.num(bal_g, 1),
                     "达不到" if need is None else d.num(need)))
d.table(rows, ["权重", "GPU", "平衡点", "M*（最少 token 行数）"], "权重 GEMM 跨过平衡点所需的行数")

# %%
batches = sorted({1, 2, 4, sc["micro_batch"]})
rows = []
ai = {}
for b in batches:
    sub = {**sc.substitutions(), b_micro: b, moe.ep: ep_size}
    md_rows = float(moe.dense_rows.subs(sub))
    row = [f"{b}" + ("（本场景）" if b == sc["micro_batch"] else ""), d.num(md_rows),
           d.num(moe.gemm(md_rows, hidden, w_dense.value)["intensity"], 1)]
    if is_moe:
        me_rows = float(moe.expert_rows.subs(sub))
        ai[b] = moe.gemm(me_rows, hidden, w_expert.value)["intensity"]
        row += [d.num(me_rows), d.num(ai[b], 1)]
    else:
        ai[b] = moe.gemm(md_rows, hidden, w_dense.value)["intensity"]
    rows.append(row + [d.num(ai_qk, 1)])
headers = ["micro batch", "稠密 FFN 行数", "稠密 FFN 强度"]
headers += ["专家行数", "专家强度"] if is_moe else []
d.table(rows, headers + ["QKᵀ 强度"], f"micro batch 对运算强度的影响（平衡点 {d.num(balance, 1)}）")
name = "专家" if is_moe else "稠密 FFN"
b_lo, b_hi = batches[0], batches[-1]
d.md(f"micro batch 从 {b_lo} 到 {b_hi}，{name} GEMM 的运算强度从 {d.num(ai[b_lo], 1)} 升到 {d.num(ai[b_hi], 1)}"
     + (f"（{d.times(ai[b_hi] / ai[b_lo], 2)}，而不是 {b_hi // b_lo}×：行数已经不小，强度在向上限饱和）；"
        if ai[b_hi] / ai[b_lo] < 0.9 * b_hi / b_lo else
        f"（{d.times(ai[b_hi] / ai[b_lo], 2)}，接近行数之比 {b_hi // b_lo}×：行数还小，强度几乎与行数成正比）；")
     + "QKᵀ 按序列逐头计算，强度不随 micro batch 变。"
     + (f"在 {sc['gpu']} 上，micro batch = {b_lo} 时这些权重 GEMM 已经高于平衡点 {d.num(balance, 1)}，"
        "按 roofline 它们并不受带宽限制；掉到平衡点以下的是"
        + ("上一节的 QKᵀ 和" if ai_qk < balance else "")
        + "没有权重复用的算子（norm、激活、残差加" + ("、permute" if is_moe else "")
        + "），后者的运算强度在 1 FLOP/byte 上下甚至更低，与 micro batch 无关。"
        "所以加大 micro batch 如果还有收益，多半来自摊薄每次 kernel 启动与同步的固定开销，"
        "而不是来自 roofline 上位置的移动。"
        if ai[b_lo] > balance else
        f"在 {sc['gpu']} 上，micro batch = {b_lo} 时 {name} GEMM 低于平衡点 {d.num(balance, 1)}，"
        "受带宽限制；加大 micro batch 会直接把它推向算力上限"
        + ("。" if ai[b_hi] > balance else f"，但到 micro batch = {b_hi} 仍在平衡点以下。")))

# %%
fig, ax = plt.subplots()
m_grid = np.geomspace(8, 4 * m_dense, 200)
for label, width in weights:
    ax.plot(m_grid, moe.intensity(m_grid, hidden, width),
            label=f"{label} weight [{hidden} x {width}]")
for g in gpus:
    bal_g = balance if g == sc["gpu"] else hardware.GPUS[g].balance
    ax.axhline(bal_g, ls="--", lw=0.9, color="grey")
    ax.text(m_grid[0], bal_g * 1.08, f"{g} balance {bal_g:.0f}", fontsize=8, color="grey")
for b in batches:
    sub = {**sc.substitutions(), b_micro: b, moe.ep: ep_size}
    rows_b = float((moe.expert_rows if is_moe else moe.dense_rows).subs(sub))
    ax.plot([rows_b], [ai[b]], "o", color="black")
    ax.annotate(f"mb={b}", (rows_b, ai[b]), textcoords="offset points", xytext=(4, -12), fontsize=8)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("token rows M of one GEMM")
ax.set_ylabel("arithmetic intensity (FLOP/byte, BF16)")
ax.set_title("Weight-GEMM intensity vs rows per GEMM" + (" (dots: expert GEMM)" if is_moe else ""))
ax.legend(fontsize=8, loc="lower right")
plt.show()

# %% [markdown]
# ## 本节要点

# %%
points = []
if is_moe:
    points += [
        f"- 整步看每个专家平均 {rows_text(step_view)} 个 token；按一次 GEMM 看，专家"
        f"{'只' if m_expert < m_dense else ''}有 {rows_text(m_expert)} 行，"
        f"是稠密 FFN 的 {d.pct(m_expert / m_dense, 1)}（比值 e_p·k/E，EP = {ep_size}）。",
        f"- permute / unpermute 每卡每步至少搬 {d.gb(total, 1)}，按峰值带宽约 {seconds:.3f} 秒"
        f"（单步的 {d.pct(seconds / sc['step_time'], 3)}）；实际实现更慢，且与 all-to-all 串行。",
    ]
    if runs:
        points.append(f"- 模拟路由下 straggler 系数（随机放置的中位数）从 {d.times(median[runs[0].skew], 3)}"
                      f"（均匀）到 {d.times(median[runs[-1].skew], 3)}（Zipf {runs[-1].skew:g}）；"
                      "按负载放置专家" + ("可降到 " if runs[-1].greedy_factor < median[runs[-1].skew] else "为 ")
                      + f"{d.times(runs[-1].greedy_factor, 3)}。MoE 层的耗时按最忙的卡计。")
else:
    points.append("- 稠密模型：没有专家、permute 和路由不均，MoE 的三项损耗为零。")
points += [
    f"- QKᵀ 的运算强度封顶在 d_h 附近（本场景 {d.num(ai_qk, 1)} FLOP/byte，平衡点 {d.num(balance, 1)}）"
    + ("；在这张卡上它仍受算力限制，扁形状的代价主要在片上：累加维短、softmax 不在 tensor core 上。"
       if ai_qk > balance else "，在这张卡上受带宽限制；片上还有累加维短、softmax 不在 tensor core 上的开销。"),
    f"- micro batch {b_lo} → {b_hi} 让{name} GEMM 的运算强度变成 {d.times(ai[b_hi] / ai[b_lo], 2)}；"
    + (f"在 {sc['gpu']} 上它本来就高于平衡点。" if ai[b_lo] > balance
       else f"在 {sc['gpu']} 上这能把它推过平衡点。" if ai[b_hi] > balance
       else f"在 {sc['gpu']} 上它仍低于平衡点。"),
]
d.md("\n".join(points))
