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
# MFU 的分母是峰值算力，而峰值只有在大而规整的矩阵乘上才拿得到。MoE 和长序列各自从不同方向破坏这个前提：MoE 把一个大 FFN 拆成许多小专家，每个专家分到的 token 少，还要额外搬运和等待；长序列把显存压满，micro batch 往往只能是 1，注意力里的矩阵乘又是又长又扁的形状。本节逐项把这些形状和开销算出来，并用 roofline 的语言（运算强度 vs 机器平衡点，见 07）判断哪些真的会让 GPU 饿着、哪些没有直觉上那么严重。

# %% [markdown] tags=["lab-only"]
# **换成你的场景。** 这一节最常改的键是 `micro_batch`（权重 GEMM 的行数）、`expert_parallel`（EP 大小：一个专家的 GEMM 汇集几张卡的 token）、`seq_len`（注意力的序列长度）和 `gpu`（决定机器平衡点）。在下面的参数单元里，`scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 只改单个键，例如 `{"step_time": 90}`。改完后请重启内核并全部重新运行（Kernel → Restart Kernel and Run All Cells），本页所有数字都会按新场景重算。
#
# 本页各个数的口径（N 怎么数、模型与硬件 FLOPs、注意力项）以及与 Megatron-LM、nanoGPT、torchtitan 等的差别，见 [docs/conventions.md](../docs/conventions.md)。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"micro_batch": 2}

# %% tags=["remove-input"]
import matplotlib.pyplot as plt
import numpy as np
import sympy as sp

from costmodel import course
from costmodel.derive import moe, roofline
from costmodel.derive.symbols import S, bytes_per_element, h, k_dim, k_top, m, n
from costmodel.evaluate.simulate import gemms
from costmodel.evaluate.levers import router
from costmodel.evaluate.account.claims import communication_share_quoted
from costmodel.inputs import hardware
from costmodel.present import display as d
from costmodel.present import words

SAMPLE_TOKENS = 8192  # tokens routed in the load-imbalance simulation
SEED = 0
SKEWS = [0.0, 0.25, 0.5, 1.0]  # Zipf exponents of expert popularity (0 = uniform)
PLACEMENTS = 64  # random placements drawn per skew level
REFERENCE_LABEL = {"dense": "稠密 FFN", "shared": "共享专家", "hypothetical": "假想的稠密 FFN"}
BOUND = {"compute": "算力", "memory": "带宽"}


def gemm_rows(micro_batch=None):
    """The model's GEMMs (gemms.model_gemms) at a micro batch (default the scenario's); a row
    of zero width (a projection whose widths the scenario does not give) is left out."""
    return [r for r in gemms.model_gemms(sc, micro_batch) if r["k"] and r["n"]]


def by_key(micro_batch=None):
    return {r["key"]: r for r in gemm_rows(micro_batch)}


def spaced(label):
    """A label followed by Chinese text: a space after a final Latin letter."""
    return label + " " if label[-1].isascii() else label


def shape_source(row):
    """Where a GEMM row's shape comes from, in words (the row's `source`, EP part left out)."""
    return words.shape_source(row["source"], ep=False)


def reference(rows):
    """The dense-FFN-like GEMMs (gate + up, down) that expert GEMMs are compared with: the
    model's dense FFN, else its shared expert, else a hypothetical dense FFN over the micro
    batch's token rows with the expert's width (computed here; not a GEMM of the model)."""
    for kind in ("dense", "shared"):
        if f"{kind}_down" in rows:
            return kind, rows[f"{kind}_gate_up"], rows[f"{kind}_down"]
    tokens_b = rows["lm_head"]["m"]
    made = []
    for key in ("expert_gate_up", "expert_down"):
        made.append(step_row(tokens_b, rows[key]))
    return "hypothetical", made[0], made[1]


def step_row(rows_m, r):
    """A GEMM with the weight of row r over rows_m token rows (e.g. a whole step's at once)."""
    ai_ = float(roofline.intensity(rows_m, r["n"], r["k"]))
    return {"m": rows_m, "k": r["k"], "n": r["n"], "intensity": ai_,
            "bound": "compute" if ai_ >= balance else "memory"}


def focus(rows):
    """The two FFN GEMMs this page follows: one expert's (MoE), or the dense FFN's."""
    if is_moe:
        return {"gate + up": rows["expert_gate_up"], "down": rows["expert_down"]}
    _, up, down = reference(rows)
    return {"gate + up": up, "down": down}


def rows_text(x):
    """A row count: whole above 100, else with two decimals (an average can be fractional)."""
    return d.num(x) if x >= 100 else d.num(x, 2)


def shape_text(r):
    return f"[{rows_text(r['m'])}, {d.num(r['k'])}] × [{d.num(r['k'])}, {d.num(r['n'])}]"


def gemm_label(r):
    return f"{r['key']}（{shape_text(r)}，强度 {d.num(r['intensity'], 1)}）"


def above(x):
    return "高于" if x >= balance else "低于"


# %% tags=["remove-input"]
sc, acc = d.load(scenario_file, overrides)
FIGURES = course.figures()
balance = acc["machine_balance"]
g = by_key()
is_moe = "expert_gate_up" in g
assert is_moe == (sc.num_experts > 0)
own = bool(sc.changed)
who = "你的场景" if own else "课程场景"  # whose figure the claims table shows
hidden, tokens = g["lm_head"]["k"], g["lm_head"]["m"]  # lm_head: [b x S, hidden] x [hidden, vocab]
ref_kind, ref_up, ref_down = reference(g)
ref_label = REFERENCE_LABEL[ref_kind]
head_dim, v_dim = g["attention_scores"]["k"], g["attention_values"]["n"]
cp = sc.context_parallel
if is_moe:
    ep = sc.expert_parallel
    ep_source = {"course": "课程的假设 8；设置 `expert_parallel` 可改为你的实际值",
                 "derived": "课程的 8 不能同时整除专家数与数据并行的卡数，取能整除的最大值；"
                            "设置 `expert_parallel` 可改为你的实际值"}.get(sc.sources["expert_parallel"], "场景给定")
    w_expert, moe_layers = g["expert_down"]["k"], g["expert_down"]["layers"]

# %% [markdown]
# 场景：**{{ sc.name }}**（{{ sc.num_gpus }} × {{ sc.gpu }}，机器平衡点 {{ balance|num(1) }} FLOP/byte，micro batch = {{ sc.micro_batch }}，配置长度 S = {{ sc.seq_len|num }}）。{% if is_moe %}这是一个 MoE 模型：每层 {{ sc.num_experts }} 个路由专家，每个 token 选 {{ sc.experts_per_token }} 个。{% else %}这是一个**稠密模型**（num_experts = 0）：没有路由、没有专家，MoE 的三项损耗都不存在，下面只给出稠密 FFN 的形状，以及长序列那两项。{% endif %}

# %% [markdown]
# 本节用到的形状全部取自模型的 GEMM 表 `costmodel.evaluate.simulate.gemms.model_gemms`，与 07、08、10 是同一份：场景指定了模型 config（或场景的结构键与课程模型 Qwen3.6-35B-A3B 一致）时，宽度来自真实的 config；否则 GEMM 表由场景的键构造，缺的宽度按有名字的假设补上。下表的“形状来源”一列写明是哪一种。
#
# - **专家宽度**（每个路由专家 FFN 的中间维，`moe_intermediate_size`）：`expert_down` 一行的 k；
# - **稠密 FFN 宽度**（`intermediate_size`）：`dense_down` 一行的 k，只有模型含稠密 FFN 层时才有；
# - **共享专家宽度**：`shared_down` 一行的 k，只有模型含共享专家时才有；
# - **每头宽度 head_dim**：注意力核心 QKᵀ（`attention_scores`）一行的 k，即 QKᵀ 的累加维；
# - **EP 大小**（一层的专家分布在多少张卡上）是场景的键 `expert_parallel`：团队给了就用团队的；没给时用课程的 8（若 8 不能同时整除专家数和数据并行的卡数，取能整除的最大值），下表写明是哪一种。GEMM 表按同一个 EP 算一个专家 GEMM 的行数，按场景的 TP、CP 切出每张卡上的形状（`costmodel gemms` 列出同一张表）。

# %% [markdown]
# **本节用到的形状**
#
# | 量 | 取值 | 取自 GEMM 表 | 形状来源 |
# |---|---|---|---|
# | hidden size | {{ hidden|num }} | lm_head 的 k | {{ shape_source(g.lm_head) }} |
# {% if "dense_down" in g %}
# | 稠密 FFN 宽度 | {{ g.dense_down.k|num }} | dense_down 的 k（{{ g.dense_down.layers }} 层） | {{ shape_source(g.dense_down) }} |
# {% endif %}
# {% if is_moe %}
# | 专家宽度 | {{ w_expert|num }} | expert_down 的 k | {{ shape_source(g.expert_down) }} |
# {% if "shared_down" in g %}
# | 共享专家宽度 | {{ g.shared_down.k|num }} | shared_down 的 k | {{ shape_source(g.shared_down) }} |
# {% endif %}
# {% if ref_kind == "hypothetical" %}
# | 对照用的稠密 FFN 宽度 | {{ ref_down.k|num }} | 假想：取专家宽度（模型既没有稠密 FFN 层，也没有共享专家） | — |
# {% endif %}
# | EP 大小 | {{ ep }} | expert_parallel | {{ ep_source|safe }} |
# | MoE 层数 | {{ moe_layers }} | expert_down 的 layers{% if sc.num_mtp_layers %}（含计入的 MTP 层）{% endif %} | {{ shape_source(g.expert_down) }} |
# {% endif %}
# | 每头宽度 head_dim | {{ head_dim|num }} | attention_scores 的 k | {{ shape_source(g.attention_scores) }} |
# {% if v_dim != head_dim %}
# | 每头 V 宽度 | {{ v_dim|num }} | attention_values 的 n | {{ shape_source(g.attention_values) }} |
# {% endif %}

# %% [markdown]
# ## 1. 专家分到多少 token：GEMM 变瘦
#
# 路由器让每个 token 去 k 个专家（共 E 个）。从整步看，一个专家平均分到 D·k/E 个 token，这是课程的算法。但矩阵乘不是按整步执行的，而是按 micro batch、逐层执行：一个 micro batch 有 b 条长度为 S 的序列；在 EP 组内，全交换（`all-to-all`）把 e_p 张卡上属于同一个专家的 token 汇集起来，所以一个专家的一次 GEMM 有 e_p·b·S·k/E 行，而稠密 FFN 在一张卡上有 b·S 行。有上下文并行（CP = c）时，每张卡只拿每条序列的 S/c 个 token，两式里的 S 都换成 S/c。

# %%
d.eq(r"\frac{\text{tokens}}{\text{expert}}\Big|_{\text{step}}", moe.tokens_per_expert_step)
d.eq(r"M_{\text{dense}}", moe.dense_rows)
d.eq(r"M_{\text{expert}}", moe.expert_rows)
d.eq(r"\frac{M_{\text{expert}}}{M_{\text{dense}}}", sp.simplify(moe.expert_rows / moe.dense_rows))

# %%
local = {**sc.substitutions(), S: sc.seq_len / cp}  # CP: each GPU holds S / c of a sequence
m_dense = float(moe.dense_rows.subs(local))
assert m_dense == tokens  # the GEMM table's b x S (/ c) token rows
if is_moe:
    step_view = float(moe.tokens_per_expert_step.subs({**sc.substitutions(), moe.ep: ep}))
    m_expert = float(moe.expert_rows.subs({**local, moe.ep: ep}))
    assert abs(m_expert - g["expert_gate_up"]["m"]) <= 1e-9 * m_expert  # e_p b (S / c) k / E

# %% [markdown]
# {% if is_moe %}
# 本场景：整步看每个专家平均 {{ rows_text(step_view) }} 个 token（整步共 {{ sc.tokens_per_step|count }} 个）；按一次 GEMM 看，一个 micro batch 的 b·S{% if cp > 1 %}/c{% endif %} = {{ rows_text(m_dense) }} 行在一张卡上全部进入{{ ref_label }}，一个专家有 {{ rows_text(m_expert) }} 行，{% if m_expert < m_dense %}只有{% else %}是{% endif %}前者的 {{ (m_expert / m_dense)|pct(1) }}。
# {% else %}
# 本场景是稠密模型，没有专家：FFN 的一次 GEMM 有 b·S{% if cp > 1 %}/c{% endif %} = {{ m_dense|num }} 行。
# {% endif %}

# %% [markdown]
# 矩阵乘 (M × K)(K × N) 读两个输入、写一个输出，运算强度（每字节 HBM 流量做多少 FLOPs）是 2MNK / (β(MK + KN + MN))。把它和 GPU 的机器平衡点（峰值 / 带宽）相比：高于平衡点的受算力限制，低于的受带宽限制。下表列出 FFN 的两个投影：门控 FFN 的 gate 与 up 共用输入，合成一个 [M, hidden] × [hidden, 2w] 的 GEMM；down 是 [M, w] × [w, hidden]，w 是 FFN 的宽度。课程拿“稠密 FFN”和专家对照；模型没有稠密 FFN 层时，改用它的共享专家（同样处理每个 token），两者都没有时，对照的是一个**假想的**稠密 FFN：同一个 micro batch 的 b·S 行、宽度取专家宽度，它不是模型里的 GEMM，只用来把“行数变少”这一项单独拿出来看。

# %% tags=["remove-input"]
# (whose GEMM, which projection, step view or one GEMM, the row)
ffn = [("ref", "gate + up", "step", step_row(sc.tokens_per_step, ref_up)),
       ("ref", "gate + up", "one", ref_up), ("ref", "down", "one", ref_down)]
if ref_kind == "dense" and "shared_down" in g:
    ffn += [("shared", "gate + up", "one", g["shared_gate_up"]), ("shared", "down", "one", g["shared_down"])]
if is_moe:
    ffn += [("expert", "gate + up", "step", step_row(step_view, g["expert_gate_up"])),
            ("expert", "gate + up", "one", g["expert_gate_up"]), ("expert", "down", "one", g["expert_down"])]
    w_ref = ref_down["k"]
    expert_bounds = {g[key]["bound"] for key in ("expert_gate_up", "expert_down")}
    roof = "compute" if expert_bounds == {"compute"} else "memory" if expert_bounds == {"memory"} else "mixed"
    ai_up, ai_down = g["expert_gate_up"]["intensity"], g["expert_down"]["intensity"]
    per_rank = sc.num_experts // ep

# %% [markdown]
# **FFN 投影的形状与运算强度（{{ sc.gpu }} 平衡点 {{ balance|num(1) }} FLOP/byte）**
#
# | GEMM | 形状 | FLOPs | 运算强度 FLOP/byte | 相对平衡点 | 受限于 |
# |---|---|---|---|---|---|
# {% for whose, part, view, r in ffn %}
# | {% if whose == "ref" %}{{ ref_label }}{% elif whose == "shared" %}共享专家{% else %}单个专家{% endif %} {{ part }}{% if view == "step" %}（整步视角）{% else %}（一次 GEMM）{% endif %} | {{ shape_text(r)|safe }} | {{ (2 * r.m * r.k * r.n)|sci }} | {{ r.intensity|num(1) }} | {{ (r.intensity / balance)|times(1) }} | {{ BOUND[r.bound] }} |
# {% endfor %}
#
# {% if is_moe %}
# {% set width_text -%}
# {% if ref_kind == "hypothetical" %}宽度按假设相同（都是 {{ w_expert|num }}）{% else %}{% if w_expert < w_ref %}{% if w_expert < w_ref / 2 %}宽度也窄得多{% else %}宽度也更窄{% endif %}{% elif w_expert == w_ref %}宽度相同{% else %}宽度反而更宽{% endif %}（{{ w_expert|num }} 对 {{ w_ref|num }}）{% endif %}
# {%- endset %}
# {% set rank_text -%}
# {% if per_rank > 1 %}一张卡上要依次跑 {{ per_rank }} 个专家的 GEMM（或一个 grouped GEMM）{% else %}一张卡上只有 1 个专家{% endif %}
# {%- endset %}
# {% set both -%}
# （gate + up {{ ai_up|num(1) }}，down {{ ai_down|num(1) }}）
# {%- endset %}
# {% if m_expert < m_dense %}专家 GEMM 的行数只有{{ spaced(ref_label) }}的 {{ (m_expert / m_dense)|pct(1) }}，{{ width_text|safe }}。{{ rank_text|safe }}，每个都更难铺满所有 SM、更难隐藏启动和尾部开销。{% else %}本场景专家 GEMM 的行数是{{ spaced(ref_label) }}的 {{ (m_expert / m_dense)|pct(1) }}，{{ width_text|safe }}：EP 组把 {{ ep }} 张卡的 token 汇集到每个专家上，e_p·k/E = {{ (m_expert / m_dense)|num(2) }} ≥ 1，专家 GEMM 并不比{{ spaced(ref_label) }}瘦；{{ rank_text|safe }}。{% endif %}{% if roof == "compute" %}{% if m_expert < m_dense %}但按 roofline，两个专家 GEMM 的运算强度{{ both|safe }}仍在平衡点之上：变瘦带来的是调度与 tile 利用率上的损失，不是带宽瓶颈。{% else %}按 roofline，两个专家 GEMM 的运算强度{{ both|safe }}在平衡点之上，受算力限制。{% endif %}{% elif roof == "memory" %}它们的运算强度{{ both|safe }}已经低于平衡点：这些 GEMM 受带宽限制，峰值算力用不满。{% else %}按 roofline，专家的 {% if g.expert_down.bound == "memory" %}down{% else %}gate + up{% endif %} 已经低于平衡点{{ both|safe }}，受带宽限制；另一个仍受算力限制。{% endif %}{% if ref_kind != "dense" %}课程在这里拿 [D, hidden] × [hidden, 4·hidden] 的稠密 FFN 作对照，那是示意：本模型没有稠密 FFN 层，{% if ref_kind == "shared" %}表里换成了它的共享专家。{% else %}表里换成了上面说的假想稠密 FFN。{% endif %}{% endif %}
# {% endif %}

# %% [markdown]
# ## 2. permute / unpermute：不产生 FLOPs 的搬运
#
# 进入专家之前，每个 token 按路由结果复制 k 份、按专家重排（permute）；专家算完，再把 k 份输出按原顺序收回并加权合并（unpermute）。每个方向都要搬 tokens × hidden × β × k 字节，不做任何乘加，是纯粹的访存操作，最好情况下的耗时就是字节数除以 HBM 带宽。下面按一张卡算：它所在 DP rank 分到的 token（有 CP 时每条序列的 S/c，开了序列并行时再除以 TP），乘以它那一段流水线上的 MoE 层数。

# %%
d.eq(r"\text{bytes}_{\text{one way}}", moe.permute_bytes)
if is_moe:
    split_tp = sc.tensor_parallel if sc.sequence_parallel else 1
    tokens_per_gpu = sc.tokens_per_step / (sc.data_parallel * cp * split_tp)
    layers_here = -(-moe_layers // sc.pipeline_parallel)  # the larger stage if uneven
    per_way = float(moe.permute_bytes.subs({moe.tokens: tokens_per_gpu, h: hidden,
                                            bytes_per_element: 2, k_top: sc.experts_per_token}))
    movements = 2 * 2 * layers_here  # (permute + unpermute) x (forward + backward) x MoE layers
    total = per_way * movements
    seconds = total / sc.hbm_bandwidth  # at peak HBM bandwidth: a lower bound

# %% [markdown]
# {% if is_moe %}
# **permute / unpermute 的访存量（BF16，每卡）**
#
# | 量 | 值 | 说明 |
# |---|---|---|
# | 每卡每步的真实 token | {{ tokens_per_gpu|num }} | D / (DP × CP{% if split_tp > 1 %} × TP，序列并行{% endif %}) = D / {{ (sc.tokens_per_step / tokens_per_gpu)|num }} |
# | 每层每个方向 | {{ per_way|gb(2) }} | tokens × hidden × 2 字节 × k |
# | 每步搬运次数 | {{ movements }} | (permute + unpermute) × (前向 + 反向) × {{ layers_here }} 层{% if sc.pipeline_parallel > 1 %}（PP = {{ sc.pipeline_parallel }}：一段上最多的 MoE 层数）{% endif %} |
# | 每卡每步合计 | {{ total|gb(1) }} | |
# | 按 HBM 峰值带宽的耗时 | {{ seconds|decimals(3) }} s | {{ (sc.hbm_bandwidth / 1e12)|num(2) }} TB/s |
# | 占单步耗时 | {{ (seconds / sc.step_time)|pct(3) }} | 单步 {{ sc.step_time|num(1) }} s |
#
# 即使按峰值带宽，这部分也要 {{ seconds|decimals(3) }} 秒，占单步的 {{ (seconds / sc.step_time)|pct(3) }}。这是下限：真实的 permute kernel 是不规则的 gather/scatter，很难跑到峰值带宽；{% if sc.recompute == "full" %}全量重算（full recompute）还会把前向那一半再做一次；{% endif %}它还和全交换通信串在一起。它不进任何 FLOPs 口径，只让 T 变长。
# {% else %}
# 稠密模型没有路由，也就没有 permute / unpermute。
# {% endif %}

# %% [markdown]
# ## 3. 负载不均：热门专家所在的卡成为 straggler
#
# 路由器不会把 token 平均分给专家。专家分布在 EP 组的各张卡上，一层 MoE 要等最忙的那张卡算完，所以这一层的耗时按 **straggler 系数**（最忙 rank 的负载 ÷ 平均负载）放大，其余的卡在这段时间里空等。下面用一个带固定种子的模拟来量化：专家热度按 Zipf 分布（第 i 热的专家 ∝ i^(−a)，a = 0 为均匀），每个 token 按热度不放回地选 k 个专家。哪几个热门专家恰好落在同一张卡上是运气，所以同一组路由结果用多种随机而均衡的放置各算一次，取中位数和最差值；再和一种“知道负载”的放置对比：从最热的专家开始，依次放到当前最空、还有空位的卡上。真实路由器有负载均衡损失，偏斜的程度要从训练日志里的专家计数去量，这里的 a 只是几档示意。

# %%
simulate = is_moe and ep > 1 and sc.num_experts <= router.MAX_SIMULATED_EXPERTS
runs = [router.simulate_router(sc.num_experts, sc.experts_per_token, ep, SAMPLE_TOKENS,
                               a, SEED, PLACEMENTS) for a in SKEWS] if simulate else []
median = {r.skew: float(np.median(r.rank_factors)) for r in runs}  # straggler factor per skew

# %% tags=["remove-input"]
mine = None  # the run at the scenario's own router_skew, where it states one
if runs:
    first, worst = runs[0], runs[-1]
    if sc.router_skew is not None:
        mine = next((r for r in runs if r.skew == float(sc.router_skew)), None) or router.simulate_router(
            sc.num_experts, sc.experts_per_token, ep, SAMPLE_TOKENS, float(sc.router_skew), SEED, PLACEMENTS)
    rank_excess, expert_excess = median[worst.skew] - 1, worst.expert_factor - 1
mine_median = float(np.median(mine.rank_factors)) if mine is not None else None

# %% [markdown]
# {% if runs %}
# **模拟路由：{{ SAMPLE_TOKENS|num }} 个 token，top-{{ sc.experts_per_token }} / {{ sc.num_experts }} 个专家，EP = {{ ep }}，{{ PLACEMENTS }} 种随机放置，种子 {{ SEED }}**
#
# | Zipf 指数 a | 最热专家 / 平均 | straggler（随机放置，中位数） | straggler（随机放置，最差） | straggler（按负载放置） | EP 组平均空等（中位数） |
# |---|---|---|---|---|---|
# {% for r in runs %}
# | {{ r.skew|short }} | {{ r.expert_factor|times(2) }} | {{ median[r.skew]|times(3) }} | {{ r.rank_factors.max()|times(3) }} | {{ r.greedy_factor|times(3) }} | {{ (1 - 1 / median[r.skew])|pct(1) }} |
# {% endfor %}
#
# 均匀路由时 straggler 系数的中位数只有 {{ median[first.skew]|times(3) }}（有限样本的随机波动）；Zipf 指数 {{ worst.skew|short }} 时最热的专家分到平均值的 {{ worst.expert_factor|times(1) }}，随机放置下最忙的卡比平均多算 {{ (median[worst.skew] - 1)|pct(1) }}（中位数），运气差时多算 {{ (worst.rank_factors.max() - 1)|pct(1) }}，MoE 层的耗时随之放大。{% if rank_excess < expert_excess %}一张卡上有 {{ sc.num_experts // ep }} 个专家，能平摊掉一部分专家级的不均，所以 rank 级的系数{% if rank_excess < expert_excess / 2 %}远小于{% else %}小于{% endif %}专家级的系数；{% else %}一张卡上有 {{ sc.num_experts // ep }} 个专家，这里平摊不掉专家级的不均；{% endif %}如果按实测负载重新放置专家，系数{% if worst.greedy_factor < median[worst.skew] %}降到 {% else %}是 {% endif %}{{ worst.greedy_factor|times(3) }}。这说明负载不均的代价既取决于路由器，也取决于专家放在哪里（按负载放置的前提是各专家的热度相对稳定）。
# {% elif is_moe and ep > 1 %}
# 本场景每层有 {{ sc.num_experts|num }} 个专家，超过这个模拟的上限 {{ router.MAX_SIMULATED_EXPERTS|num }}（每个 token 要为每个专家抽一个随机分数），这里不做路由模拟。负载不均的程度要从训练日志里的专家计数去量：各 rank 每层分到的 token 数，最大值比平均值多出多少，MoE 层就慢多少。
# {% elif is_moe %}
# 本场景 EP 大小为 1（{{ ep_source|safe }}）：所有专家都在同一张卡上，不存在卡间的 straggler。
# {% else %}
# 稠密模型没有路由器，也就没有专家间的负载不均。
# {% endif %}

# %% tags=["remove-input"]
d.setup_plots()
if runs:
    fig, ax = plt.subplots()
    width = 0.8 / len(runs)
    for i, r in enumerate(runs):
        ax.bar(np.arange(ep) + i * width, r.rank_loads / r.rank_loads.mean(), width,
               label=f"Zipf a = {r.skew:g} (straggler {r.rank_factor:.2f}x)")
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(np.arange(ep) + width * (len(runs) - 1) / 2, [str(i) for i in range(ep)])
    ax.set_xlabel("EP rank")
    ax.set_ylabel("tokens routed / mean")
    ax.set_title(f"Load per EP rank, one random placement (top-{sc.experts_per_token} of "
                 f"{sc.num_experts}, seed {SEED})")
    ax.legend(fontsize=8)
    plt.show()

# %% [markdown]
# 图注：横轴是 EP rank 的编号，纵轴是路由到这个 rank 的 token 数与平均值之比（1 表示正好平均）。

# %% [markdown]
# ## 4. 注意力的 GEMM 形状：K 维只有 head_dim
#
# 每个头的 QKᵀ 是 [s, d_h] × [d_h, s]：两个维度是序列长度，累加维只有 d_h。把它代进运算强度公式，令 s 趋于无穷：

# %%
s_len, d_h = sp.symbols("s d_h", positive=True)
qk_intensity = roofline.gemm_intensity.subs({m: s_len, n: s_len, k_dim: d_h})
qk_limit = sp.limit(qk_intensity, s_len, sp.oo)
d.eq(r"\mathrm{AI}_{QK^\top}", sp.simplify(qk_intensity))
d.eq(r"\lim_{s\to\infty}\mathrm{AI}_{QK^\top}", qk_limit, qk_limit.subs(bytes_per_element, 2))
qk, av, out = g["attention_scores"], g["attention_values"], g["attention_output"]
ai_qk, ai_av = qk["intensity"], av["intensity"]
assert abs(ai_qk - roofline.intensity(qk["m"], qk["n"], head_dim)) <= 1e-9 * ai_qk

# %% tags=["remove-input"]
if sc.batching == "packed":  # attention per document: s is a document's length, not S
    ai_doc = roofline.intensity(sc.mean_tokens_per_sample, sc.mean_tokens_per_sample, head_dim)

# %% [markdown]
# 本场景 d_h = {{ head_dim|num }}，一个头的 QKᵀ 是 [{{ qk.m|num }}, {{ head_dim|num }}] × [{{ head_dim|num }}, {{ qk.n|num }}]{% if qk.m != qk.n %}（CP = {{ cp }}：每张卡只有 S/c 行查询，键仍是整条序列）{% endif %}，运算强度 {{ ai_qk|num(1) }} FLOP/byte，{{ above(ai_qk) }} {{ sc.gpu }} 的平衡点 {{ balance|num(1) }}；{% if v_dim != head_dim %}A·V 是 [s, s] × [s, d_v]，d_v = {{ v_dim|num }}，强度同理封顶在 d_v 附近，本场景 {{ ai_av|num(1) }}（{{ above(ai_av) }}平衡点）；{% endif %}作为对照，同一个 micro batch 的注意力输出投影 {{ shape_text(out)|safe }} 是 {{ out.intensity|num(1) }}。运算强度封顶在 d_h 附近，序列再长也不会更高。{% if ai_qk >= balance %}在这张卡上它仍受算力限制，扁形状的代价主要不在带宽，而在别处：{% elif sc.attention_kernel == "flash" %}按分数矩阵写回显存算，它在这张卡上受带宽限制；但本场景用 flash kernel（`attention_kernel: flash`），分数块留在片上、不写回显存，这条带宽上限不适用，代价在片上：{% else %}在这张卡上它受带宽限制；此外，{% endif %}每个输出元素只累加 d_h 次乘积，QKᵀ 与 A·V 之间还夹着 softmax（求最大值、指数、归一化，都不在 tensor core 上）。FlashAttention 把 s × s 的分数块留在片上，HBM 流量比上式更少，但这些片上开销仍在，所以注意力 kernel 的实测效率通常低于大方阵 GEMM。{% if sc.attention_flops == "causal" %}本场景按 causal 计注意力 FLOPs（只算 s × s 的一半，对应跳过上三角整块的因果 kernel）：被算的每一块形状不变，上式的强度大致不变，变的是 FLOPs 总数。{% endif %}{% if sc.batching == "packed" %}本场景把样本打包（packed），注意力按文档计算，s 是每篇文档的长度而不是 S：按平均长度 s̄ = {{ sc.mean_tokens_per_sample|num }}，QKᵀ 的强度是 {{ ai_doc|num(1) }}（{{ above(ai_doc) }}平衡点；上限仍是 d_h）；GEMM 表按一条 S 长的序列列出这一行。{% endif %}

# %% [markdown]
# ## 5. micro batch 1、2、4：权重 GEMM 的运算强度
#
# 权重 GEMM [M, K] × [K, N] 里，权重 K × N 读一次，M 行 token 共享它。M 越大，每字节权重做的运算越多，运算强度随 M 增长，直到趋近上限 2KN / (β(K + N))。把“运算强度 = 机器平衡点”解出来，就是不再受带宽限制所需的最少 token 行数 M*。课程说 micro batch 从 1 到 4，“同样的权重读一次，算 4 倍的数据，运算强度 ×4”：这只在 M 远小于 K、N 时近似成立，M 一旦大了，强度就向上限饱和。

# %%
bal = sp.Symbol(r"\mathrm{balance}", positive=True)
(m_star,) = sp.solve(sp.Eq(roofline.gemm_intensity, bal), m)
numerator, denominator = sp.fraction(sp.simplify(m_star))
m_star_shown = numerator / sp.collect(sp.expand(denominator), bal * bytes_per_element)
assert sp.simplify(m_star_shown - m_star) == 0
d.eq(r"M^{*}", m_star_shown)
d.eq(r"\lim_{M\to\infty}\mathrm{AI}", moe.intensity_limit)

# %% tags=["remove-input"]
FFN_KEYS = ("dense_gate_up", "dense_down", "shared_gate_up", "shared_down", "expert_gate_up", "expert_down")
weights = {}  # (k, n) -> the FFN rows with that weight shape
for key in FFN_KEYS:
    if key in g:
        weights.setdefault((g[key]["k"], g[key]["n"]), []).append(key)
gpus = [sc.gpu] + [name for name in ("H20", "H100-SXM") if name != sc.gpu]
balances = {name: balance if name == sc.gpu else hardware.GPUS[name].balance for name in gpus}
# (rows of the GEMM table, K, N, the rows M* on each GPU; None: never reached)
m_stars = [(keys, k_w, n_w, [moe.rows_for_intensity(balances[name], k_w, n_w) for name in gpus])
           for (k_w, n_w), keys in weights.items()]

# %% [markdown]
# **FFN 权重 GEMM 跨过平衡点所需的最少 token 行数{% if ref_kind == "hypothetical" %}（假想的稠密 FFN 与专家同宽，不另列）{% endif %}**
#
# | GEMM 表里的行 | 权重 K × N |{% for name in gpus %} M*，{{ name }}（平衡点 {{ balances[name]|num(1) }}） |{% endfor %}
# |---|---|{% for name in gpus %}---|{% endfor %}
# {% for keys, k_w, n_w, need in m_stars %}
# | {{ keys|join(", ") }} | [{{ k_w|num }} × {{ n_w|num }}] |{% for x in need %} {% if x is none %}达不到{% else %}{{ x|num }}{% endif %} |{% endfor %}
# {% endfor %}

# %%
batches = sorted({1, 2, 4, sc.micro_batch})
by_batch = {b: by_key(b) for b in batches}  # the GEMM table at each micro batch
b_lo, b_hi = batches[0], batches[-1]
low = min(focus(by_batch[b_lo]), key=lambda part: focus(by_batch[b_lo])[part]["intensity"])
ai = {b: focus(by_batch[b])[low]["intensity"] for b in batches}  # the weaker FFN GEMM

# %% tags=["remove-input"]
name = "专家" if is_moe else ref_label
refs = {b: reference(by_batch[b]) for b in batches}  # (kind, gate + up, down) at each micro batch
weight_lo = [r for r in by_batch[b_lo].values() if r["weights"]]
memory_lo = [r for r in weight_lo if r["bound"] == "memory"]
capped = [r for r in memory_lo if r["intensity_limit"] < balance]  # the ceiling as m grows
crossing = [r for r in memory_lo if by_batch[b_hi][r["key"]]["bound"] == "compute"]
memory_share = sum(r["forward_flops_per_token"] for r in memory_lo) / gemms.weight_flops_per_token(weight_lo)

# %% [markdown]
# **micro batch 对运算强度的影响（{{ sc.gpu }} 平衡点 {{ balance|num(1) }}）**
#
# | micro batch | {{ spaced(ref_label) }}行数 | {{ ref_label }} gate + up 强度 | {{ ref_label }} down 强度 |{% if is_moe %} 专家行数 | 专家 gate + up 强度 | 专家 down 强度 |{% endif %} QKᵀ 强度 |
# |---|---|---|---|{% if is_moe %}---|---|---|{% endif %}---|
# {% for b in batches %}
# | {{ b }}{% if b == sc.micro_batch %}（本场景）{% endif %} | {{ rows_text(refs[b][1].m) }} | {{ refs[b][1].intensity|num(1) }} | {{ refs[b][2].intensity|num(1) }} |{% if is_moe %} {{ rows_text(by_batch[b].expert_gate_up.m) }} | {{ by_batch[b].expert_gate_up.intensity|num(1) }} | {{ by_batch[b].expert_down.intensity|num(1) }} |{% endif %} {{ by_batch[b].attention_scores.intensity|num(1) }} |
# {% endfor %}
#
# micro batch 从 {{ b_lo }} 到 {{ b_hi }}，{{ spaced(name) }}的两个 GEMM 中强度较低的 {{ low }} 从 {{ ai[b_lo]|num(1) }} 升到 {{ ai[b_hi]|num(1) }}{% if ai[b_hi] / ai[b_lo] < 0.9 * b_hi / b_lo %}（{{ (ai[b_hi] / ai[b_lo])|times(2) }}，而不是 {{ b_hi // b_lo }}×：强度在向上限 2KN/(β(K + N)) 饱和，行数越多涨得越少）；{% else %}（{{ (ai[b_hi] / ai[b_lo])|times(2) }}，接近行数之比 {{ b_hi // b_lo }}×：行数还小，强度几乎与行数成正比）；{% endif %}QKᵀ 按序列逐头计算，强度不随 micro batch 变。{% if memory_lo %}GEMM 表里，micro batch = {{ b_lo }} 时在 {{ sc.gpu }} 上低于平衡点的权重 GEMM 有 {% for r in memory_lo %}{{ gemm_label(r)|safe }}{% if not loop.last %}、{% endif %}{% endfor %}，合计{% if memory_share < 0.01 %}只{% endif %}占权重 GEMM 前向 FLOPs 的 {{ memory_share|pct(3) }}{% if capped %}；其中 {% for r in capped %}{{ r.key }}（K × N = {{ r.k|num }} × {{ r.n|num }}）{% if not loop.last %}、{% endif %}{% endfor %}的权重有一维很窄，强度上限 2KN/(β(K + N)) 本身就低于平衡点，行数再多也推不过去{% endif %}{% if crossing %}；{% for r in crossing %}{{ r.key }}{% if not loop.last %}、{% endif %}{% endfor %} 到 micro batch = {{ b_hi }} 时跨过平衡点{% endif %}。{% else %}GEMM 表里的权重 GEMM 在 micro batch = {{ b_lo }} 时全部高于 {{ sc.gpu }} 的平衡点。{% endif %}{% if ai[b_lo] >= balance %}在 {{ sc.gpu }} 上，micro batch = {{ b_lo }} 时{{ name }} GEMM 已经高于平衡点 {{ balance|num(1) }}，按 roofline 它们并不受带宽限制；掉到平衡点以下的{% if ai_qk < balance %}除了上一节的 QKᵀ{% if sc.attention_kernel == "flash" %}（按分数矩阵写回显存算；本场景的 flash kernel 把分数留在片上，它并不受带宽限制）{% endif %}，主要是{% else %}主要是{% endif %}没有权重复用的算子（norm、激活、残差加{% if is_moe %}、permute{% endif %}），这些算子的运算强度在 1 FLOP/byte 上下甚至更低，与 micro batch 无关。{% if not crossing %}所以加大 micro batch 如果还有收益，多半来自摊薄每次 kernel 启动与同步的固定开销，而不是来自 roofline 上位置的移动。{% else %}加大 micro batch 在 roofline 上只移动了上面那几个小 GEMM，其余的收益多半来自摊薄每次 kernel 启动与同步的固定开销。{% endif %}{% else %}在 {{ sc.gpu }} 上，micro batch = {{ b_lo }} 时{{ spaced(name) }}的 {{ low }} GEMM 低于平衡点 {{ balance|num(1) }}，受带宽限制；加大 micro batch 会直接把它推向算力上限{% if ai[b_hi] >= balance %}。{% else %}，但到 micro batch = {{ b_hi }} 仍在平衡点以下。{% endif %}{% endif %}

# %% tags=["remove-input"]
dots = [focus(by_batch[b])[low] for b in batches]
fig, ax = plt.subplots()
m_grid = np.geomspace(8, 4 * max(m_dense, *(r["m"] for r in dots)), 200)
for (k_w, n_w), keys in weights.items():
    ax.plot(m_grid, roofline.intensity(m_grid, n_w, k_w), label=f"{', '.join(keys)} [{k_w} x {n_w}]")
for name_g in gpus:
    ax.axhline(balances[name_g], ls="--", lw=0.9, color="grey")
    ax.text(m_grid[0], balances[name_g] * 1.08, f"{name_g} balance {balances[name_g]:.0f}", fontsize=8, color="grey")
for b, r in zip(batches, dots):
    ax.plot([r["m"]], [r["intensity"]], "o", color="black")
    ax.annotate(f"mb={b}", (r["m"], r["intensity"]), textcoords="offset points", xytext=(4, -12), fontsize=8)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("token rows M of one GEMM")
ax.set_ylabel("arithmetic intensity (FLOP/byte, BF16)")
ax.set_title(f"FFN weight-GEMM intensity vs rows per GEMM (dots: {dots[0]['key']})")
ax.legend(fontsize=8, loc="lower right")
plt.show()

# %% [markdown]
# 图注：横轴是一个 GEMM 的 token 行数 M，纵轴是运算强度（FLOP/byte，BF16），两轴都是对数刻度；黑点是本场景。

# %% [markdown]
# ## 5½. 长序列压满显存：峰值落在哪个阶段，全交换露出多少
#
# 一张卡上的显存不是各项一直相加：模型状态（权重、梯度、优化器状态）一直在；为反向存下的激活在前向结束时最多；logits 只在算 loss 时存在；反向时每次重算一层，多出这一层的工作集。几个阶段不会同时发生，所以峰值是**最大的那个阶段**，不是各阶段之和。可用容量取 CUDA 运行时报告的显存总量，再减去留给 CUDA 上下文、NCCL 缓冲和分配器的 `memory_reserve`。序列越长，一个 micro batch 的 token 越多，存下的激活和 logits 都按 token 数线性增长，这就是长序列的 micro batch 常常只能是 1 的原因。
#
# MoE 每层还有 EP 的全交换（`all-to-all`）：前向把 token 发给专家所在的卡（dispatch）、再收回来（combine），反向各再来一次。它能不能藏到计算后面取决于调度（`ep_overlap`）：默认它和专家计算串行，露在外面。

# %% tags=["remove-input"]
mem, comm = acc["memory"], acc["communication"]
settings = mem["settings"]
logits_phase = mem["phases"].get("loss")
logits_bytes = logits_phase["contents"].get("logits") if logits_phase else None
a2a = [c for c in comm["collectives"] if c["name"].startswith("EP all-to-all")]
shown_ = sum(c["seconds"] for c in a2a)
exposed_ = sum(c["exposed_seconds"] for c in a2a)

# %% [markdown]
# **负载最重的那张卡各阶段的显存（{{ sc.gpu }}）**
#
# | 阶段 | 显存 | 构成 |
# |---|---|---|
# {% for phase_name, phase in mem.phases.items() %}
# | {{ d.PHASES[phase_name] }}{% if phase_name == mem.peak_phase %}（峰值）{% endif %} | {{ phase.bytes|gb }} | {% for part, value in phase.contents.items() if value %}{{ part }} {{ value|gb }}{% if not loop.last %}、{% endif %}{% endfor %} |
# {% endfor %}
#
# 按本场景的设置（{{ ("framework: " ~ settings.framework)|code }}、{{ ("attention_kernel: " ~ settings.attention_kernel)|code }}、{{ ("recompute: " ~ settings.recompute)|code }}、{{ ("cross_entropy: " ~ settings.cross_entropy)|code }}），峰值在**{{ d.PHASES[mem.peak_phase] }}**：{{ mem.total|gb }}，可用 {{ mem.capacity|gb }}，{% if mem.fits %}放得下。{% else %}**放不下**（08 列出让它放得下的改法）。{% endif %}{% if logits_bytes %}一个 micro batch（{{ sc.micro_batch }} × {{ sc.seq_len|num }} 个 token）的 logits 在算 loss 时占 {{ logits_bytes|gb }}，随序列长度线性增长。{% endif %}{% if a2a %}EP 的全交换（dispatch 与 combine）每步估计 {{ shown_|num(2) }} 秒（上界：不重叠、跑满链路），{% if exposed_ > 0 %}按重叠规则露在外面的有 {{ exposed_|num(2) }} 秒，占一步的 {{ (exposed_ / sc.step_time)|pct(1) }}。{% else %}按重叠规则（{{ ("ep_overlap: " ~ sc.ep_overlap)|code }}）全部藏在另一个 micro batch 的计算后面。{% endif %}{% else %}本场景没有 EP 的全交换（稠密模型，或 EP 为 1）。{% endif %}

# %% [markdown]
# ## 6. 课程的说法与本页的数字
#
# 课程 06.6 列出的 MoE 三项损耗和长序列两项损耗，逐条对照上面算出的数。课程说的是它自己的那次训练；换成团队的场景时，中间一列是团队的数字，“出入”一列说明课程的说法放到这个场景上是否还成立。

# %% tags=["remove-input"]
h20_balance = hardware.GPUS["H20"].balance
h20_is_37 = d.num(h20_balance, 0) == "37"
ratio4 = ai[4] / ai[1]  # the course's micro batch 1 -> 4
low_1 = focus(by_batch[1])[low]
ai_128 = roofline.intensity(qk["m"], qk["n"], 128)
if is_moe:
    ratio = m_expert / m_dense
    k_over_e = sc.experts_per_token / sc.num_experts
    low_e = min(ai_up, ai_down)
    quoted = communication_share_quoted(acc)
    measured = acc["communication"]["basis"] == "measured"
    dispatch_agrees = course.agrees(quoted["dispatch"], "nb06_communication_share")
head_source = shape_source(qk).split("；")[0]


# %% [markdown]
# {% if is_moe %}
# {% set comm_differs -%}
# 全部通信{% if measured %}（实测）{% else %}（不计重叠的上界）{% endif %}不是这个数；{% if dispatch_agrees %}只有 EP 全交换的一个方向（dispatch）按课程的精度是 {{ FIGURES.nb06_communication_share.text }}，课程的数看来只数了这一向{% else %}通信占多少要实测{% endif %}
# {%- endset %}
# {% endif %}
# {% if not is_moe %}
# 本场景是稠密模型：课程关于 MoE 的三项损耗（GEMM 变瘦、permute、负载不均）不适用，下表只列长序列的几条。
#
# {% endif %}
# **课程怎么说 / 本页算出 / 出入**{% if own %}（本页按你的场景计算：中间一列是你的数字，与课程的说法对照）{% endif %}
#
# | 课程怎么说 | 本页算出 | 出入 |
# |---|---|---|
# {% if is_moe %}
# | 每个专家只分到（总 token × top_k / 专家数）个 token，GEMM 的 M 维大幅缩小：{{ course.claim("nb06_expert_rows") }} | 整步平均 {{ rows_text(step_view) }} 个；一次 GEMM {{ rows_text(m_expert) }} 行，是{{ spaced(ref_label) }}的 {{ ratio|pct(1) }} | {% if ratio < 1 %}成立：在{{ who }}里，专家 GEMM 确实比{{ spaced(ref_label) }}瘦；{% if ep > 1 %}但一次 GEMM 的比值是 e_p·k/E = {{ ratio|pct(1) }}，不是课程按整步算出的 k/E = {{ k_over_e|pct(1) }}：EP 组把 {{ ep }} 张卡的 token 汇集到每个专家上{% else %}EP = 1，一次 GEMM 的比值就是整步的 k/E = {{ ratio|pct(1) }}，与课程的算法一致{% endif %}{% else %}有出入：在{{ who }}里，EP 组把 {{ ep }} 张卡的 token 汇集到每个专家上，e_p·k/E = {{ ratio|num(2) }} ≥ 1：一次专家 GEMM 并不比{{ spaced(ref_label) }}瘦{% endif %} |
# | 专家 GEMM 变瘦，tensor core 跑不满，效率显著低于方阵：{{ course.claim("nb06_thin_gemm") }} | 专家 gate + up {{ ai_up|num(1) }}、down {{ ai_down|num(1) }} FLOP/byte（平衡点 {{ balance|num(1) }}） | {% if roof == "compute" %}无从判断：按 roofline，{{ who }}的两个专家 GEMM 都在平衡点之上（较低的是平衡点的 {{ (low_e / balance)|times(1) }}），受算力限制，带宽不是原因；效率是否“显著低于方阵”取决于 tile 填充与调度，roofline 推不出，要用 profile 实测{% else %}成立：在{{ who }}里，有专家 GEMM 低于平衡点（较低的强度 {{ low_e|num(1) }}），受带宽限制，峰值算力用不满{% endif %} |
# | permute / unpermute 按路由重排 token，不产生 FLOPs 却要花时间：{{ course.claim("nb06_permute") }} | 每卡每步至少搬 {{ total|gb(1) }}，按峰值带宽 ≥ {{ seconds|decimals(3) }} s（单步的 {{ (seconds / sc.step_time)|pct(3) }}） | 成立：permute 是纯访存、零 FLOPs 的搬运；在{{ who }}里，按峰值带宽的下限就占单步的 {{ (seconds / sc.step_time)|pct(3) }}，真实 kernel 更慢，实际占多少要从 profile 里量 |
# | 第 4 节算过通信只占 {{ course.claim("nb06_communication_share") }} | EP 全交换单向（dispatch）{{ quoted.dispatch|pct(2) }}，两向 {{ quoted.all_to_all|pct(2) }}；全部通信 {{ quoted.all|pct(2) }}（{% if measured %}实测{% else %}按布局估计的上界{% endif %}） | {{ d.judge("nb06_communication_share", quoted.all, quoted.all|pct(2), comm_differs, own=own)|safe }} |
# {% if runs %}
# | 热门专家所在的卡成为 straggler，其他卡空等：{{ course.claim("nb06_load_imbalance") }} | 模拟：straggler 系数 {{ median[first.skew]|times(3) }}（均匀）→ {{ median[worst.skew]|times(3) }}（Zipf {{ worst.skew|short }}，中位数）；按负载放置 {{ worst.greedy_factor|times(3) }} | 成立：模拟中路由越偏，最忙的卡越慢，MoE 层按它计时；{% if mine is not none and own %}{{ who }}写的 `router_skew` 是 {{ mine.skew|short }}，这一档的 straggler 系数是 {{ mine_median|times(3) }}（中位数），按负载放置 {{ mine.greedy_factor|times(3) }}；Zipf {{ worst.skew|short }} 那一档只是示意，不是{{ who }}的路由{% else %}{% if own %}Zipf {{ worst.skew|short }} 这一档，{% else %}在{{ who }}里，{% endif %}{% if worst.greedy_factor < 0.9 * median[worst.skew] %}按负载放置能把它降到{% else %}按负载放置也只到{% endif %} {{ worst.greedy_factor|times(3) }}。偏斜程度本页只是示意，要从训练日志的专家计数量{% endif %} |
# {% elif ep > 1 %}
# | 热门专家所在的卡成为 straggler，其他卡空等：{{ course.claim("nb06_load_imbalance") }} | 没有模拟（每层 {{ sc.num_experts|num }} 个专家，超过模拟的上限） | 无从判断：{{ who }}的 EP 组有 {{ ep }} 张卡，卡间负载不均会拖慢 MoE 层，但本页没有算出它的大小；要从训练日志的专家计数量 |
# {% else %}
# | 热门专家所在的卡成为 straggler，其他卡空等：{{ course.claim("nb06_load_imbalance") }} | EP = 1：所有专家在同一张卡上 | 有出入：{{ who }}没有卡间的 straggler，热门专家只让同一张卡上的 GEMM 大小不一 |
# {% endif %}
# {% endif %}
# | 注意力每头宽度 head_dim 通常只有 128：{{ course.claim("head_dim_typical") }} | head_dim = {{ head_dim|num }}（{{ head_source }}） | {% if head_dim == 128 %}成立：{{ who }}的 head_dim 正是 128{% else %}有出入：{{ who }}的模型 head_dim 是 {{ head_dim|num }}，不是 128；QKᵀ 的强度上限就是 d_h：{{ who }}的 QKᵀ 是 {{ ai_qk|num(1) }} FLOP/byte，若 d_h = 128 则是 {{ ai_128|num(1) }}{% endif %} |
# | QKᵀ 是极扁的矩阵乘，tensor core 利用率天然低于 hidden 维的方阵乘：{{ course.claim("nb06_qk_flat") }} | QKᵀ 强度 {{ ai_qk|num(1) }} FLOP/byte（上限 d_h = {{ head_dim|num }}；平衡点 {{ balance|num(1) }}） | {% if ai_qk >= balance %}成立：{{ who }}的 QKᵀ 仍受算力限制（平衡点的 {{ (ai_qk / balance)|times(1) }}），所以代价不在带宽，而在片上：每个输出只累加 d_h 次、softmax 不在 tensor core 上；低多少要看 kernel 实测{% elif sc.attention_kernel == "flash" %}成立：按分数矩阵写回显存算，{{ who }}的 QKᵀ 强度低于平衡点；但{{ who }}用 flash kernel，分数留在片上，代价不在显存带宽，而在片上的 softmax 与短累加维；低多少要看 kernel 实测{% else %}成立：{{ who }}的 QKᵀ 强度低于平衡点，在这张卡上还受带宽限制；片上的 softmax 与短累加维是另一层代价{% endif %} |
# | micro batch = 1 时许多算子的运算强度掉到 H20 平衡点附近或以下，变成受带宽限制：{{ course.claim("micro_batch_below_balance") }} | {{ sc.gpu }} 平衡点 {{ balance|num(1) }}{% if sc.gpu != "H20" %}（H20 为 {{ h20_balance|num(1) }}）{% endif %}；micro batch = 1 时{{ spaced(name) }}的 {{ low }} GEMM 强度 {{ ai[1]|num(1) }} | {% if ai[1] < balance %}成立：在{{ who }}里，micro batch = 1 时{{ spaced(name) }}的 {{ low }} GEMM 低于平衡点，受带宽限制；{% else %}有出入：H20 的平衡点 {{ h20_balance|num(1) }}{% if h20_is_37 %} 与课程一致{% else %} 与课程的 37 不同{% endif %}；但在{{ who }}里，micro batch = 1 时{{ spaced(name) }}的 {{ low }} GEMM 仍是平衡点的 {{ (ai[1] / balance)|times(1) }}，{% endif %}{% if memory_lo %}低于平衡点的权重 GEMM 只占前向 FLOPs 的 {{ memory_share|pct(3) }}{% else %}没有一个权重 GEMM 低于平衡点{% endif %}{% if ai[1] >= balance %}；其余低于平衡点的主要是 {% if ai_qk < balance %}QKᵀ 和 {% endif %}norm、激活这类没有权重复用的算子，它们与 micro batch 无关{% endif %} |
# | micro batch 从 1 到 4：同一份权重读一次、算 4 倍的数据，运算强度 ×4：{{ course.claim("nb06_intensity_x4") }} | {{ spaced(name) }}的 {{ low }} GEMM：{{ ai[1]|num(1) }} → {{ ai[4]|num(1) }}（{{ ratio4|times(2) }}） | {% if ratio4 >= 0.9 * 4 %}成立：在{{ who }}里，一次 GEMM 只有 {{ rows_text(low_1.m) }} 行，行数还小，强度几乎与行数成正比{% else %}有出入：在{{ who }}里，一次 GEMM 有 {{ rows_text(low_1.m) }} 行，强度只涨到 {{ ratio4|times(2) }}，正在向上限 2KN/(β(K + N)) 饱和：强度 = 2/(β(1/M + 1/K + 1/N))，只有行数远小于 K、N（1/M 占主导）时才接近 ×4{% endif %} |

# %% [markdown]
# ## 本节要点
#
# {% if is_moe %}
# - 整步看每个专家平均 {{ rows_text(step_view) }} 个 token；按一次 GEMM 看，专家{% if m_expert < m_dense %}只{% endif %}有 {{ rows_text(m_expert) }} 行，是{{ spaced(ref_label) }}的 {{ (m_expert / m_dense)|pct(1) }}（比值 e_p·k/E，EP = {{ ep }}）。
# - permute / unpermute 每卡每步至少搬 {{ total|gb(1) }}，按峰值带宽约 {{ seconds|decimals(3) }} 秒（单步的 {{ (seconds / sc.step_time)|pct(3) }}）；实际实现更慢，且与全交换串行。
# {% if runs %}
# - 模拟路由下 straggler 系数（随机放置的中位数）从 {{ median[first.skew]|times(3) }}（均匀）到 {{ median[worst.skew]|times(3) }}（Zipf {{ worst.skew|short }}）；{% if own %}这一档{% endif %}按负载放置专家{% if worst.greedy_factor < median[worst.skew] %}可降到 {% else %}为 {% endif %}{{ worst.greedy_factor|times(3) }}。{% if mine is not none and own %}{{ who }}写的 `router_skew` 是 {{ mine.skew|short }}：straggler 系数 {{ mine_median|times(3) }}，各档只是示意。{% endif %}MoE 层的耗时按最忙的卡计。
# {% endif %}
# {% else %}
# - 稠密模型：没有专家、permute 和路由不均，MoE 的三项损耗为零。
# {% endif %}
# - QKᵀ 的运算强度封顶在 d_h 附近（本场景 d_h = {{ head_dim|num }}，强度 {{ ai_qk|num(1) }} FLOP/byte，平衡点 {{ balance|num(1) }}）{% if ai_qk >= balance %}；在这张卡上它仍受算力限制，扁形状的代价主要在片上：累加维短、softmax 不在 tensor core 上。{% elif sc.attention_kernel == "flash" %}；按分数矩阵写回显存算它受带宽限制，但本场景用 flash kernel，分数留在片上，代价在片上：累加维短、softmax 不在 tensor core 上。{% else %}，在这张卡上受带宽限制；片上还有累加维短、softmax 不在 tensor core 上的开销。{% endif %}
# - micro batch {{ b_lo }} → {{ b_hi }} 让{{ spaced(name) }}的 {{ low }} GEMM 的运算强度变成 {{ (ai[b_hi] / ai[b_lo])|times(2) }}；{% if ai[b_lo] >= balance %}在 {{ sc.gpu }} 上它本来就高于平衡点。{% elif ai[b_hi] >= balance %}在 {{ sc.gpu }} 上这能把它推过平衡点。{% else %}在 {{ sc.gpu }} 上它仍低于平衡点。{% endif %}{% if memory_lo %}受带宽限制的权重 GEMM 只有 {{ memory_lo|map(attribute="key")|join("、") }}，占权重 GEMM 前向 FLOPs 的 {{ memory_share|pct(3) }}。{% endif %}

# %% [markdown] tags=["exercise"]
# ### 练习 1：micro batch 再加大，强度最多能到多少？
#
# 第 5 节说，权重 GEMM 的运算强度随行数 M 增长，但有上限 2KN / (β(K + N))。取第 5 节那段话里强度较低的那个 FFN GEMM（MoE 模型看单个专家，稠密模型看稠密 FFN），先不看解答，用它的 K、N 和 β = 2 心算这个上限；再预测：micro batch 设成本场景的 32 倍时，它的强度能到上限的百分之几？比本场景现在高多少？写下你的预测，然后对照解答。

# %% tags=["solution"]
key = focus(g)[low]["key"]  # the weaker FFN GEMM of section 5, at the scenario's micro batch
now, big = g[key], by_key(32 * sc.micro_batch)[key]
ceiling = float(moe.intensity_limit.subs({k_dim: now["k"], n: now["n"], bytes_per_element: 2}))
assert abs(ceiling - now["intensity_limit"]) <= 1e-9 * ceiling  # the GEMM table's ceiling
print(f"{now['key']}: K = {now['k']}, N = {now['n']}, ceiling 2KN/(2(K+N)) = {ceiling:.1f} FLOP/byte")
for label, r in (("now", now), ("32x micro batch", big)):
    share = r["intensity"] / ceiling
    print(f"{label:>15}: M = {r['m']:,.0f} rows, intensity {r['intensity']:.1f} = {share:.1%} of the ceiling")

# %% [markdown] tags=["solution"]
# 上限只由权重的形状 K × N 决定，与 micro batch 无关；micro batch 只改变行数 M，也就只决定离上限还有多远。
#
# 本场景 {{ now.key }} 的上限是 {{ ceiling|num(1) }} FLOP/byte；现在 {{ rows_text(now.m) }} 行，强度 {{ now.intensity|num(1) }}（上限的 {{ (now.intensity / ceiling)|pct(1) }}），micro batch 加到 32 倍后是 {{ big.intensity|num(1) }}（{{ (big.intensity / ceiling)|pct(1) }}，{{ (big.intensity / now.intensity)|times(2) }}）。{% if now.intensity >= 0.9 * ceiling %}强度已经贴近上限，再加 micro batch 在 roofline 上几乎没有收益。{% else %}离上限还差 {{ (1 - now.intensity / ceiling)|pct(1) }}，加大 micro batch 还能把强度往上推。{% endif %}它在 {{ sc.gpu }} 上{% if now.intensity >= balance %}已经{% else %}仍然{% endif %}{{ above(now.intensity) }}平衡点 {{ balance|num(1) }}{% if (now.intensity >= balance) == (big.intensity >= balance) %}。{% else %}，32 倍时{{ above(big.intensity) }}平衡点。{% endif %}

# %% [markdown] tags=["exercise"]
# ### 练习 2：序列长度翻倍，QKᵀ 会变成什么样？
#
# 把序列长度从 S 变成 2S（其余不变），先预测：一个头的 QKᵀ 的 FLOPs 变成几倍？它的运算强度变成几倍？用第 4 节的公式 AI = 2·d_h·s / (β(2·d_h + s)) 推一推，再对照解答。

# %% tags=["solution"]
flops_qk = 2 * s_len * s_len * d_h  # one head's QK^T: s x s outputs, d_h multiply-adds each
print("FLOPs ratio:", sp.simplify(flops_qk.subs(s_len, 2 * s_len) / flops_qk))
ai_ratio = sp.simplify(qk_intensity.subs(s_len, 2 * s_len) / qk_intensity)
print("intensity ratio:", ai_ratio)
ai_2s = roofline.intensity(2 * qk["m"], 2 * qk["n"], head_dim)
print(f"this scenario: {ai_qk:.1f} -> {ai_2s:.1f} FLOP/byte ({ai_2s / ai_qk:.3f}x), ceiling d_h = {head_dim}")

# %% [markdown] tags=["solution"]
# FLOPs 与 s² 成正比，翻倍后是 4 倍；强度的比值是 (2d_h + s)/(d_h + s)，s 远大于 2d_h 时趋于 1。本场景 2d_h = {{ (2 * head_dim)|num }}，一个头的 QKᵀ 是 [{{ qk.m|num }}, {{ head_dim|num }}] × [{{ head_dim|num }}, {{ qk.n|num }}]，强度从 {{ ai_qk|num(1) }} 变成 {{ ai_2s|num(1) }}（{{ (ai_2s / ai_qk)|times(3) }}）{% if ai_2s / ai_qk < 1.05 %}，几乎不变：算力要多付 4 倍，运算强度却没有跟着涨，它早已贴近上限 d_h。{% else %}，还在明显上涨：序列相对 2d_h 还不算长，离上限 d_h 还有距离。{% endif %}在 {{ sc.gpu }} 上它{% if (ai_qk >= balance) == (ai_2s >= balance) %}仍{% else %}变得{% endif %}{{ above(ai_2s) }}平衡点 {{ balance|num(1) }}。
