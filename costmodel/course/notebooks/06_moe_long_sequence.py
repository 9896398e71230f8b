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

from costmodel.evaluate import gemms, router
from costmodel.present import display as d
from costmodel.derive import moe, roofline
from costmodel.inputs import hardware
from costmodel.derive.symbols import S, bytes_per_element, h, k_dim, k_top, m, n

sc, acc = d.load(scenario_file, overrides)
balance = acc["machine_balance"]


def gemm_rows(micro_batch=None):
    """The model's GEMMs (gemms.model_gemms) at a micro batch (default the scenario's); a row
    of zero width (a projection whose widths the scenario does not give) is left out."""
    return [r for r in gemms.model_gemms(sc.values, micro_batch) if r["k"] and r["n"]]


g = {r["key"]: r for r in gemm_rows()}
is_moe = "expert_gate_up" in g
assert is_moe == (sc["num_experts"] > 0)
d.md(f"场景：**{d.text(sc['name'])}**（{sc['num_gpus']} × {sc['gpu']}，机器平衡点 {d.num(balance, 1)} FLOP/byte，"
     f"micro batch = {sc['micro_batch']}，配置长度 S = {d.num(sc['seq_len'])}）。"
     + (f"这是一个 MoE 模型：每层 {sc['num_experts']} 个路由专家，每个 token 选 "
        f"{sc['experts_per_token']} 个。" if is_moe else
        "这是一个**稠密模型**（num_experts = 0）：没有路由、没有专家，MoE 的三项损耗都不存在，"
        "下面只给出稠密 FFN 的形状，以及长序列那两项。"))

# %% [markdown]
# 本节用到的形状全部取自模型的 GEMM 表 `costmodel.evaluate.gemms.model_gemms`，与 07、08、10 是同一份：
# 场景指定了模型 config（或场景的结构键与课程模型 Qwen3.6-35B-A3B 一致）时，宽度来自真实的 config；
# 否则 GEMM 表由场景的键构造，缺的宽度按有名字的假设补上。下表的"形状来源"一列写明是哪一种。
#
# - **专家宽度**（每个路由专家 FFN 的中间维，`moe_intermediate_size`）：`expert_down` 一行的 k；
# - **稠密 FFN 宽度**（`intermediate_size`）：`dense_down` 一行的 k，只有模型含稠密 FFN 层时才有；
# - **共享专家宽度**：`shared_down` 一行的 k，只有模型含共享专家时才有；
# - **每头宽度 head_dim**：注意力核心 QKᵀ（`attention_scores`）一行的 k，即 QKᵀ 的累加维；
# - **EP 大小**（一层的专家分布在多少张卡上）是场景的键 `expert_parallel`：团队给了就用团队的；没给时
#   用课程的 8（若 8 不能同时整除专家数和数据并行的卡数，取能整除的最大值），下表写明是哪一种。GEMM 表按
#   同一个 EP 算一个专家 GEMM 的行数，按场景的 TP、CP 切出每张卡上的形状（`costmodel gemms` 列出同一张表）。

# %%
SAMPLE_TOKENS = 8192  # tokens routed in the load-imbalance simulation
SEED = 0
SKEWS = [0.0, 0.25, 0.5, 1.0]  # Zipf exponents of expert popularity (0 = uniform)
REFERENCE_LABEL = {"dense": "稠密 FFN", "shared": "共享专家", "hypothetical": "假想的稠密 FFN"}


def spaced(label):
    """A label followed by Chinese text: a space after a final Latin letter."""
    return label + " " if label[-1].isascii() else label


def shape_source(row):
    """Where a GEMM row's shape comes from, in words (the row's `source`, EP part left out)."""
    parts = []
    for part in row["source"].split("; "):
        if part.startswith("config of "):
            parts.append(f"{part[len('config of '):]} 的 config")
        elif part.startswith("scenario keys"):
            parts.append("由场景的键构造")
        elif part.startswith("assumed: "):
            parts.append("假设：" + part[len("assumed: "):])
        elif not part.startswith("rows of an EP group"):
            parts.append(part)
    return "；".join(parts)


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
        k_, n_ = rows[key]["k"], rows[key]["n"]
        ai_ = float(moe.intensity(tokens_b, k_, n_))
        made.append({"m": tokens_b, "k": k_, "n": n_, "intensity": ai_,
                     "bound": "compute" if ai_ >= balance else "memory"})
    return "hypothetical", made[0], made[1]


hidden = g["lm_head"]["k"]  # lm_head: hidden -> vocab
tokens = g["lm_head"]["m"]  # b x S token rows of a weight GEMM on one rank
ref_kind, ref_up, ref_down = reference(g)
ref_label = REFERENCE_LABEL[ref_kind]
head_dim, v_dim = g["attention_scores"]["k"], g["attention_values"]["n"]
rows = [("hidden size", d.num(hidden), "lm_head 的 k", shape_source(g["lm_head"]))]
if "dense_down" in g:
    rows.append(("稠密 FFN 宽度", d.num(g["dense_down"]["k"]),
                 f"dense_down 的 k（{g['dense_down']['layers']} 层）", shape_source(g["dense_down"])))
if is_moe:
    ep_size = sc["expert_parallel"]
    ep_source = {"course": "课程的假设 8；设置 `expert_parallel` 可改为你的实际值",
                 "derived": "课程的 8 不能同时整除专家数与数据并行的卡数，取能整除的最大值；"
                            "设置 `expert_parallel` 可改为你的实际值"}.get(sc.sources["expert_parallel"],
                                                                          "场景给定")
    w_expert = g["expert_down"]["k"]
    moe_layers = g["expert_down"]["layers"]
    rows.append(("专家宽度", d.num(w_expert), "expert_down 的 k", shape_source(g["expert_down"])))
    if "shared_down" in g:
        rows.append(("共享专家宽度", d.num(g["shared_down"]["k"]), "shared_down 的 k",
                     shape_source(g["shared_down"])))
    if ref_kind == "hypothetical":
        rows.append(("对照用的稠密 FFN 宽度", d.num(ref_down["k"]),
                     "假想：取专家宽度（模型既没有稠密 FFN 层，也没有共享专家）", "—"))
    rows += [("EP 大小", str(ep_size), "expert_parallel", ep_source),
             ("MoE 层数", str(moe_layers), "expert_down 的 layers"
              + ("（含计入的 MTP 层）" if sc["num_mtp_layers"] else ""), shape_source(g["expert_down"]))]
rows.append(("每头宽度 head_dim", d.num(head_dim), "attention_scores 的 k", shape_source(g["attention_scores"])))
if v_dim != head_dim:
    rows.append(("每头 V 宽度", d.num(v_dim), "attention_values 的 n", shape_source(g["attention_values"])))
d.table(rows, ["量", "取值", "取自 GEMM 表", "形状来源"], "本节用到的形状")

# %% [markdown]
# ## 1. 专家分到多少 token：GEMM 变瘦
#
# 路由器让每个 token 去 k 个专家（共 E 个）。从整步看，一个专家平均分到 D·k/E 个 token，
# 这是课程的算法。但矩阵乘不是按整步执行的，而是按 micro batch、逐层执行：一个 micro batch 有
# b 条长度为 S 的序列；在 EP 组内，all-to-all 把 e_p 张卡上属于同一个专家的 token 汇集起来，
# 所以一个专家的一次 GEMM 有 e_p·b·S·k/E 行，而稠密 FFN 在一张卡上有 b·S 行。有上下文并行（CP = c）时，
# 每张卡只拿每条序列的 S/c 个 token，两式里的 S 都换成 S/c。

# %%
d.eq(r"\frac{\text{tokens}}{\text{expert}}\Big|_{\text{step}}", moe.tokens_per_expert_step)
d.eq(r"M_{\text{dense}}", moe.dense_rows)
d.eq(r"M_{\text{expert}}", moe.expert_rows)
d.eq(r"\frac{M_{\text{expert}}}{M_{\text{dense}}}", sp.simplify(moe.expert_rows / moe.dense_rows))


def rows_text(x):
    """A row count: whole above 100, else with two decimals (an average can be fractional)."""
    return d.num(x) if x >= 100 else d.num(x, 2)


cp = sc["context_parallel"]
local = {**sc.substitutions(), S: sc["seq_len"] / cp}  # CP: each GPU holds S / c of a sequence
m_dense = tokens
assert m_dense == float(moe.dense_rows.subs(local))
if is_moe:
    subs = {**sc.substitutions(), moe.ep: ep_size}
    step_view = float(moe.tokens_per_expert_step.subs(subs))
    m_expert = g["expert_gate_up"]["m"]
    rows_expert = float(moe.expert_rows.subs({**local, moe.ep: ep_size}))
    assert abs(m_expert - rows_expert) <= 1e-9 * m_expert  # e_p b (S / c) k / E
    only = "只有" if m_expert < m_dense else "是"  # e_p k / E can exceed 1
    d.md(f"本场景：整步看每个专家平均 {rows_text(step_view)} 个 token（整步共 {d.count(sc['tokens_per_step'])} 个）；"
         f"按一次 GEMM 看，一个 micro batch 的 b·S{'/c' if cp > 1 else ''} = {rows_text(m_dense)} 行在一张卡上全部进入{ref_label}，"
         f"一个专家有 {rows_text(m_expert)} 行，{only}前者的 {d.pct(m_expert / m_dense, 1)}。")
else:
    d.md(f"本场景是稠密模型，没有专家：FFN 的一次 GEMM 有 b·S{'/c' if cp > 1 else ''} = {d.num(m_dense)} 行。")

# %% [markdown]
# 矩阵乘 (M × K)(K × N) 读两个输入、写一个输出，运算强度（每字节 HBM 流量做多少 FLOPs）是
# 2MNK / (β(MK + KN + MN))。把它和 GPU 的机器平衡点（峰值 / 带宽）相比：高于平衡点的受算力限制，
# 低于的受带宽限制。下表列出 FFN 的两个投影：门控 FFN 的 gate 与 up 共用输入，合成一个
# [M, hidden] × [hidden, 2w] 的 GEMM；down 是 [M, w] × [w, hidden]，w 是 FFN 的宽度。
# 课程拿"稠密 FFN"和专家对照；模型没有稠密 FFN 层时，改用它的共享专家（同样处理每个 token），
# 两者都没有时，对照的是一个**假想的**稠密 FFN：同一个 micro batch 的 b·S 行、宽度取专家宽度，
# 它不是模型里的 GEMM，只用来把"行数变少"这一项单独拿出来看。

# %%
BOUND = {"compute": "算力", "memory": "带宽"}


def shape_text(r):
    return f"[{rows_text(r['m'])}, {d.num(r['k'])}] × [{d.num(r['k'])}, {d.num(r['n'])}]"


def step_row(rows_m, r):
    """The course's whole-step view of a GEMM: all of a step's rows at once, same weight."""
    ai_ = float(moe.intensity(rows_m, r["k"], r["n"]))
    return {"m": rows_m, "k": r["k"], "n": r["n"], "intensity": ai_,
            "bound": "compute" if ai_ >= balance else "memory"}


ffn = [(f"{ref_label} gate + up（整步视角）", step_row(sc["tokens_per_step"], ref_up)),
       (f"{ref_label} gate + up（一次 GEMM）", ref_up), (f"{ref_label} down（一次 GEMM）", ref_down)]
if ref_kind == "dense" and "shared_down" in g:
    ffn += [("共享专家 gate + up（一次 GEMM）", g["shared_gate_up"]), ("共享专家 down（一次 GEMM）", g["shared_down"])]
if is_moe:
    ffn += [("单个专家 gate + up（整步视角）", step_row(step_view, g["expert_gate_up"])),
            ("单个专家 gate + up（一次 GEMM）", g["expert_gate_up"]), ("单个专家 down（一次 GEMM）", g["expert_down"])]
d.table([(label, shape_text(r), d.sci(2 * r["m"] * r["k"] * r["n"]), d.num(r["intensity"], 1),
          d.times(r["intensity"] / balance, 1), BOUND[r["bound"]]) for label, r in ffn],
        ["GEMM", "形状", "FLOPs", "运算强度 FLOP/byte", "相对平衡点", "受限于"],
        f"FFN 投影的形状与运算强度（{sc['gpu']} 平衡点 {d.num(balance, 1)} FLOP/byte）")
if is_moe:
    w_ref = ref_down["k"]
    if ref_kind == "hypothetical":
        width_text = f"宽度按假设相同（都是 {d.num(w_expert)}）"
    else:
        width_text = (("宽度也窄得多" if w_expert < w_ref / 2 else "宽度也更窄") if w_expert < w_ref else
                      "宽度相同" if w_expert == w_ref else "宽度反而更宽") + f"（{d.num(w_expert)} 对 {d.num(w_ref)}）"
    expert_bounds = {g[key]["bound"] for key in ("expert_gate_up", "expert_down")}
    ai_up, ai_down = g["expert_gate_up"]["intensity"], g["expert_down"]["intensity"]
    if expert_bounds == {"compute"}:
        roof_text = (f"但按 roofline，两个专家 GEMM 的运算强度（gate + up {d.num(ai_up, 1)}，down {d.num(ai_down, 1)}）"
                     "仍在平衡点之上：变瘦带来的是调度与 tile 利用率上的损失，不是带宽瓶颈。")
    elif expert_bounds == {"memory"}:
        roof_text = (f"它们的运算强度（gate + up {d.num(ai_up, 1)}，down {d.num(ai_down, 1)}）已经低于平衡点："
                     "这些 GEMM 受带宽限制，峰值算力用不满。")
    else:
        low_part = "down" if g["expert_down"]["bound"] == "memory" else "gate + up"
        roof_text = (f"按 roofline，专家的 {low_part} 已经低于平衡点（gate + up {d.num(ai_up, 1)}，down {d.num(ai_down, 1)}），"
                     "受带宽限制；另一个仍受算力限制。")
    course_text = ("" if ref_kind == "dense" else
                   "课程在这里拿 [D, hidden] × [hidden, 4·hidden] 的稠密 FFN 作对照，那是示意：本模型没有稠密 FFN 层，"
                   + ("表里换成了它的共享专家。" if ref_kind == "shared" else "表里换成了上面说的假想稠密 FFN。"))
    per_rank = sc["num_experts"] // ep_size
    rank_text = (f"一张卡上要依次跑 {per_rank} 个专家的 GEMM（或一个 grouped GEMM）" if per_rank > 1 else
                 "一张卡上只有 1 个专家")
    if m_expert < m_dense:
        shape_text_ = (f"专家 GEMM 的行数只有{spaced(ref_label)}的 {d.pct(m_expert / m_dense, 1)}，{width_text}。"
                       f"{rank_text}，每个都更难铺满所有 SM、更难隐藏启动和尾部开销。")
    else:
        shape_text_ = (f"本场景专家 GEMM 的行数是{spaced(ref_label)}的 {d.pct(m_expert / m_dense, 1)}，{width_text}：EP 组把 "
                       f"{ep_size} 张卡的 token 汇集到每个专家上，e_p·k/E = {d.num(m_expert / m_dense, 2)} ≥ 1，"
                       f"专家 GEMM 并不比{spaced(ref_label)}瘦；{rank_text}。")
        if expert_bounds == {"compute"}:
            roof_text = (f"按 roofline，两个专家 GEMM 的运算强度（gate + up {d.num(ai_up, 1)}，down {d.num(ai_down, 1)}）"
                         "在平衡点之上，受算力限制。")
    d.md(shape_text_ + roof_text + course_text)

# %% [markdown]
# ## 2. permute / unpermute：不产生 FLOPs 的搬运
#
# 进入专家之前，每个 token 按路由结果复制 k 份、按专家重排（permute）；专家算完，
# 再把 k 份输出按原顺序收回并加权合并（unpermute）。每个方向都要搬 tokens × hidden × β × k 字节，
# 不做任何乘加，是纯粹的访存操作，最好情况下的耗时就是字节数除以 HBM 带宽。

# %%
d.eq(r"\text{bytes}_{\text{one way}}", moe.permute_bytes)
if is_moe:
    # one GPU: its DP rank's share of the step's tokens, S / c of each sequence (CP), 1 / t with
    # sequence parallelism; the MoE layers of its pipeline stage (the larger share if uneven)
    tp, pp = sc["tensor_parallel"], sc["pipeline_parallel"]
    split_tp = tp if sc["sequence_parallel"] else 1
    tokens_per_gpu = sc["tokens_per_step"] / (sc["data_parallel"] * cp * split_tp)
    layers_here = -(-moe_layers // pp)
    per_way = float(moe.permute_bytes.subs({moe.tokens: tokens_per_gpu, h: hidden,
                                            bytes_per_element: 2, k_top: sc["experts_per_token"]}))
    movements = 2 * 2 * layers_here  # (permute + unpermute) x (forward + backward) x MoE layers
    total = per_way * movements
    seconds = total / sc["hbm_bandwidth"]
    d.table([("每卡每步的真实 token", d.num(tokens_per_gpu),
              "D / (DP × CP" + (" × TP，序列并行" if split_tp > 1 else "") + f") = D / {d.num(sc['tokens_per_step'] / tokens_per_gpu)}"),
             ("每层每个方向", d.gb(per_way, 2), "tokens × hidden × 2 字节 × k"),
             ("每步搬运次数", str(movements), f"(permute + unpermute) × (前向 + 反向) × {layers_here} 层"
              + (f"（PP = {pp}：一段上最多的 MoE 层数）" if pp > 1 else "")),
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
    d.md(f"本场景 EP 大小为 1（{ep_source}）：所有专家都在同一张卡上，不存在卡间的 straggler。")
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
qk, av, out = g["attention_scores"], g["attention_values"], g["attention_output"]
ai_qk, ai_av = qk["intensity"], av["intensity"]
assert abs(ai_qk - roofline.intensity(qk["m"], qk["n"], head_dim)) <= 1e-9 * ai_qk
text = (f"本场景 d_h = {d.num(head_dim)}、s = S = {d.num(qk['m'])}：QKᵀ 的运算强度是 {d.num(ai_qk, 1)} FLOP/byte，"
        f"{'高于' if ai_qk >= balance else '低于'} {sc['gpu']} 的平衡点 {d.num(balance, 1)}；")
if v_dim != head_dim:
    text += (f"A·V 是 [s, s] × [s, d_v]，d_v = {d.num(v_dim)}，强度同理封顶在 d_v 附近，本场景 {d.num(ai_av, 1)}"
             f"（{'高于' if ai_av >= balance else '低于'}平衡点）；")
text += (f"作为对照，同一个 micro batch 的注意力输出投影 {shape_text(out)} 是 {d.num(out['intensity'], 1)}。"
         "运算强度封顶在 d_h 附近，与序列多长无关。"
         + ("在这张卡上它仍受算力限制，扁形状的代价主要不在带宽，而在别处：" if ai_qk >= balance else
            "在这张卡上它受带宽限制；此外，")
         + "每个输出元素只累加 d_h 次乘积，QKᵀ 与 A·V 之间还夹着 softmax（求最大值、指数、归一化，"
         "都不在 tensor core 上）。FlashAttention 把 s × s 的分数块留在片上，HBM 流量比上式更少，"
         "但这些片上开销仍在，所以注意力 kernel 的实测效率通常低于大方阵 GEMM。")
if sc["attention_flops"] == "causal":
    text += ("本场景按 causal 计注意力 FLOPs（只算 s × s 的一半，对应跳过上三角整块的因果 kernel）："
             "被算的每一块形状不变，上式的强度大致不变，变的是 FLOPs 总数。")
if sc["batching"] == "packed":
    s_mean = sc["mean_tokens_per_sample"]
    ai_doc = roofline.intensity(s_mean, s_mean, head_dim)
    text += (f"本场景把样本打包（packed），注意力按文档计算，s 是每篇文档的长度而不是 S：按平均长度 "
             f"s̄ = {d.num(s_mean)}，QKᵀ 的强度是 {d.num(ai_doc, 1)}"
             f"（{'高于' if ai_doc >= balance else '低于'}平衡点；上限仍是 d_h）；GEMM 表按一条 S 长的序列列出这一行。")
d.md(text)

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
FFN_KEYS = ("dense_gate_up", "dense_down", "shared_gate_up", "shared_down", "expert_gate_up", "expert_down")
weights = {}  # (k, n) -> the FFN rows with that weight shape
for key in FFN_KEYS:
    if key in g:
        weights.setdefault((g[key]["k"], g[key]["n"]), []).append(key)
gpus = [sc["gpu"]] + [name for name in ("H20", "H100-SXM") if name != sc["gpu"]]
balances = {name: balance if name == sc["gpu"] else hardware.GPUS[name].balance for name in gpus}
rows = []
for (k_w, n_w), keys in weights.items():
    need = [moe.rows_for_intensity(balances[name], k_w, n_w) for name in gpus]
    rows.append([", ".join(keys), f"[{d.num(k_w)} × {d.num(n_w)}]"]
                + ["达不到" if x is None else d.num(x) for x in need])
d.table(rows, ["GEMM 表里的行", "权重 K × N"] + [f"M*，{name}（平衡点 {d.num(balances[name], 1)}）" for name in gpus],
        "FFN 权重 GEMM 跨过平衡点所需的最少 token 行数"
        + ("（假想的稠密 FFN 与专家同宽，不另列）" if ref_kind == "hypothetical" else ""))

# %%
batches = sorted({1, 2, 4, sc["micro_batch"]})
by_batch = {b: {r["key"]: r for r in gemm_rows(b)} for b in batches}
name = "专家" if is_moe else ref_label
b_lo, b_hi = batches[0], batches[-1]


def focus(rows):
    """The two FFN GEMMs this section follows: one expert's, or the dense FFN's."""
    if is_moe:
        return {"gate + up": rows["expert_gate_up"], "down": rows["expert_down"]}
    _, up, down = reference(rows)
    return {"gate + up": up, "down": down}


low = min(focus(by_batch[b_lo]), key=lambda part: focus(by_batch[b_lo])[part]["intensity"])
ai = {b: focus(by_batch[b])[low]["intensity"] for b in batches}
rows = []
for b in batches:
    rb = by_batch[b]
    _, up, down = reference(rb)
    row = [f"{b}" + ("（本场景）" if b == sc["micro_batch"] else ""), rows_text(up["m"]),
           d.num(up["intensity"], 1), d.num(down["intensity"], 1)]
    if is_moe:
        row += [rows_text(rb["expert_gate_up"]["m"]), d.num(rb["expert_gate_up"]["intensity"], 1),
                d.num(rb["expert_down"]["intensity"], 1)]
    rows.append(row + [d.num(rb["attention_scores"]["intensity"], 1)])
headers = ["micro batch", f"{spaced(ref_label)}行数", f"{ref_label} gate + up 强度", f"{ref_label} down 强度"]
headers += ["专家行数", "专家 gate + up 强度", "专家 down 强度"] if is_moe else []
d.table(rows, headers + ["QKᵀ 强度"], f"micro batch 对运算强度的影响（{sc['gpu']} 平衡点 {d.num(balance, 1)}）")


def gemm_label(r):
    return f"{r['key']}（[{rows_text(r['m'])}, {d.num(r['k'])}] × [{d.num(r['k'])}, {d.num(r['n'])}]，强度 {d.num(r['intensity'], 1)}）"


weight_lo = [r for r in by_batch[b_lo].values() if r["weights"]]
memory_lo = [r for r in weight_lo if r["bound"] == "memory"]
capped = [r for r in memory_lo if r["intensity_limit"] < balance]  # the ceiling as m grows
crossing = [r for r in memory_lo if by_batch[b_hi][r["key"]]["bound"] == "compute"]
memory_share = sum(r["forward_flops_per_token"] for r in memory_lo) / gemms.weight_flops_per_token(weight_lo)
text = (f"micro batch 从 {b_lo} 到 {b_hi}，{spaced(name)}的两个 GEMM 中强度较低的 {low} 从 {d.num(ai[b_lo], 1)} 升到 "
        f"{d.num(ai[b_hi], 1)}"
        + (f"（{d.times(ai[b_hi] / ai[b_lo], 2)}，而不是 {b_hi // b_lo}×：行数已经不小，强度在向上限饱和）；"
           if ai[b_hi] / ai[b_lo] < 0.9 * b_hi / b_lo else
           f"（{d.times(ai[b_hi] / ai[b_lo], 2)}，接近行数之比 {b_hi // b_lo}×：行数还小，强度几乎与行数成正比）；")
        + "QKᵀ 按序列逐头计算，强度不随 micro batch 变。")
if memory_lo:
    text += (f"GEMM 表里，micro batch = {b_lo} 时在 {sc['gpu']} 上低于平衡点的权重 GEMM 有 "
             + "、".join(gemm_label(r) for r in memory_lo)
             + f"，合计{'只' if memory_share < 0.01 else ''}占权重 GEMM 前向 FLOPs 的 {d.pct(memory_share, 3)}")
    if capped:
        text += ("；其中 " + "、".join(f"{r['key']}（K × N = {d.num(r['k'])} × {d.num(r['n'])}）" for r in capped)
                 + "的权重有一维很窄，强度上限 2KN/(β(K + N)) 本身就低于平衡点，行数再多也推不过去")
    if crossing:
        text += ("；" + "、".join(r["key"] for r in crossing) + f" 到 micro batch = {b_hi} 时跨过平衡点")
    text += "。"
else:
    text += f"GEMM 表里的权重 GEMM 在 micro batch = {b_lo} 时全部高于 {sc['gpu']} 的平衡点。"
if ai[b_lo] >= balance:
    text += (f"在 {sc['gpu']} 上，micro batch = {b_lo} 时{name} GEMM 已经高于平衡点 {d.num(balance, 1)}，"
             "按 roofline 它们并不受带宽限制；掉到平衡点以下的"
             + ("还有上一节的 QKᵀ 和" if ai_qk < balance else "主要是")
             + "没有权重复用的算子（norm、激活、残差加" + ("、permute" if is_moe else "")
             + "），后者的运算强度在 1 FLOP/byte 上下甚至更低，与 micro batch 无关。"
             + ("所以加大 micro batch 如果还有收益，多半来自摊薄每次 kernel 启动与同步的固定开销，"
                "而不是来自 roofline 上位置的移动。" if not crossing else
                "加大 micro batch 在 roofline 上只移动了上面那几个小 GEMM，其余的收益多半来自摊薄每次 kernel "
                "启动与同步的固定开销。"))
else:
    text += (f"在 {sc['gpu']} 上，micro batch = {b_lo} 时{spaced(name)}的 {low} GEMM 低于平衡点 {d.num(balance, 1)}，"
             "受带宽限制；加大 micro batch 会直接把它推向算力上限"
             + ("。" if ai[b_hi] >= balance else f"，但到 micro batch = {b_hi} 仍在平衡点以下。"))
d.md(text)

# %%
dots = [focus(by_batch[b])[low] for b in batches]
fig, ax = plt.subplots()
m_grid = np.geomspace(8, 4 * max(m_dense, *(r["m"] for r in dots)), 200)
for (k_w, n_w), keys in weights.items():
    ax.plot(m_grid, moe.intensity(m_grid, k_w, n_w), label=f"{', '.join(keys)} [{k_w} x {n_w}]")
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
# ## 本节要点

# %%
points = []
if is_moe:
    points += [
        f"- 整步看每个专家平均 {rows_text(step_view)} 个 token；按一次 GEMM 看，专家"
        f"{'只' if m_expert < m_dense else ''}有 {rows_text(m_expert)} 行，"
        f"是{spaced(ref_label)}的 {d.pct(m_expert / m_dense, 1)}（比值 e_p·k/E，EP = {ep_size}）。",
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
       if ai_qk >= balance else "，在这张卡上受带宽限制；片上还有累加维短、softmax 不在 tensor core 上的开销。"),
    f"- micro batch {b_lo} → {b_hi} 让{spaced(name)}的 {low} GEMM 的运算强度变成 {d.times(ai[b_hi] / ai[b_lo], 2)}；"
    + (f"在 {sc['gpu']} 上它本来就高于平衡点。" if ai[b_lo] >= balance
       else f"在 {sc['gpu']} 上这能把它推过平衡点。" if ai[b_hi] >= balance
       else f"在 {sc['gpu']} 上它仍低于平衡点。")
    + (f"受带宽限制的权重 GEMM 只有 {'、'.join(r['key'] for r in memory_lo)}，占权重 GEMM 前向 FLOPs 的 "
       f"{d.pct(memory_share, 3)}。" if memory_lo else ""),
]
d.md("\n".join(points))
