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
# # 03 把场景的数字代进去：MFU、HFU 与三路对账
#
# 前两节讲了 MFU/HFU 的定义和 6ND 的来历。这一节只做一件事：把场景的输入一个个代进公式，算出 MFU 和 HFU，再用另外两条路线把结果核对一遍。之后看几个口径问题：MoE 误用总参数会把 MFU 夸大多少；用模型真实配置里的精确激活参数重算，结论会变多少；项目自报的利用率更像哪个口径。
#
# 本页所有数字都由 `costmodel` 按当前场景算出；换一个场景文件重跑，文字会跟着变。

# %% [markdown] tags=["lab-only"]
# **换成自己的场景**：下一个单元格是参数。本节最常改的键是 `step_time`（单步耗时 T）、`measured_tokens_per_s`（训练日志里的集群吞吐，对账要用）、`activated_params`（6ND 里的 N）和 `recompute`（none / selective / full，决定 HFU）；有模型的 `config.json` 时再加上 `model`。`scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 只改单个键，例如 `{"step_time": 90}`。改完之后重启内核（Restart Kernel）并从头运行全部单元格（Run All）。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %% tags=["remove-input"]
import sympy as sp

from costmodel import course
from costmodel.derive import recompute, utilization
from costmodel.derive.symbols import N, N_total, P, T, r
from costmodel.present import display as d
from costmodel.present.claims import reported_convention_row, total_params_verdict
from costmodel.evaluate.account.claims import throughput_rounding

sc, acc = d.load(scenario_file, overrides)
subs = sc.substitutions()

# %% tags=["remove-input"]
from costmodel.inputs.model_shape import matching_shape
from costmodel.inputs.assumptions import COURSE_MODEL
from costmodel.derive.flops import model_flops
from costmodel.derive.symbols import B, D, s_mean

own = bool(sc.changed)  # a team's scenario: its figures, not the course's run

# %% [markdown]
# 场景：**{{ sc.name }}**{% if own %}（与课程不同：改动了 {% for key in sc.changed %}{{ key|code }}{% if not loop.last %}, {% endif %}{% endfor %}）。下面的数字都按这个场景重新算过。{% else %}（课程的场景）。{% endif %}

# %% [markdown]
# ## 1. 输入
#
# MFU 只需要很少几个输入：每步的样本数和平均真实长度（合起来是 token 数 D）、激活参数 N、单步耗时 T、GPU 数和单卡峰值。recompute 策略只影响 HFU；实测吞吐只用来对账。

# %% tags=["remove-input"]
SOURCE = {"course": "课程", "file": "场景文件", "--set": "覆盖参数", "model": "模型配置",
          "gpu table": "GPU 表", "derived": "推导", "sequence_lengths": "长度文件",
          "predicted": "单步耗时模型预测"}
measured = sc.measured_tokens_per_s
src = {key: SOURCE[where] for key, where in sc.sources.items()}  # where each input came from

# %% [markdown]
# **MFU 与 HFU 用到的场景输入**
#
# | 输入 | 符号 | 值 | 来源 |
# |---|---|---|---|
# | 每步样本数 | B | {{ sc.samples_per_step|num }} | {{ src.samples_per_step }} |
# | 每个样本的平均真实 token 数 | s̄ | {{ sc.mean_tokens_per_sample|count }} | {{ src.mean_tokens_per_sample }} |
# | 激活参数（6ND 的 N） | N | {{ sc.activated_params|sci }} | {{ src.activated_params }} |
# | 总参数 | N_total | {{ sc.total_params|sci }} | {{ src.total_params }} |
# | 单步耗时 | T | {{ sc.step_time|short }} s | {{ src.step_time }} |
# | GPU 数 | n_gpu | {{ sc.num_gpus|num }} | {{ src.num_gpus }} |
# | GPU 型号 | | {{ sc.gpu }} | {{ src.gpu }} |
# | 单卡 BF16 稠密峰值 | P | {{ sc.peak_flops|tflops }} | {{ src.peak_flops }} |
# | recompute 策略 | | {{ sc.recompute }} | {{ src.recompute }} |
# | 实测集群吞吐 | τ | {% if measured is none %}未提供{% else %}{{ measured|num }} tok/s{% endif %} | {{ src.measured_tokens_per_s }} |

# %% [markdown]
# ## 2. 逐步计算
#
# 每步真实 token 数 D 是样本数乘平均长度；模型必需的 FLOPs 是 6ND；除以单步耗时得到实际达到的算力（集群和单卡），再除以峰值得到 MFU。HFU 在 MFU 上乘 recompute 系数。库里的两个公式是 SymPy 表达式，代入场景的数就得到结果：

# %%
mfu = float(utilization.mfu.subs(subs))  # 6ND / (T · n_gpu · P)
hfu = float(utilization.hfu.subs(subs))  # recompute factor × 6ND / (T · n_gpu · P)
d.eq(r"\mathrm{MFU}", utilization.mfu, d.pct(mfu))
d.eq(r"\mathrm{HFU}", utilization.hfu, d.pct(hfu))

# %% [markdown]
# 下面把 MFU 拆成几步，每一步都代入数字：

# %% tags=["remove-input"]
tokens = sc.tokens_per_step
flops = acc["model_flops_per_step"]
cluster_peak = float(utilization.cluster_peak.subs(subs))
d.eq(D, B * s_mean, rf"{d.tex_num(sc.samples_per_step)} \times "
     rf"{d.count(sc.mean_tokens_per_sample).replace(',', '{,}')}", d.tex_sci(tokens))
d.eq(r"C_{\mathrm{model}}", model_flops,
     rf"6 \times {d.tex_sci(sc.activated_params)} \times {d.tex_sci(tokens)}", d.tex_sci(flops, 4))
d.eq(r"\mathrm{FLOP/s}_{\mathrm{cluster}}", utilization.achieved_flops_per_s,
     rf"\frac{{{d.tex_sci(flops, 4)}}}{{{sc.step_time:g}\ \mathrm{{s}}}}",
     rf"{d.tex_sci(acc['achieved_flops_per_s'], 4)}\ \mathrm{{FLOP/s}}")
d.eq(r"\mathrm{FLOP/s}_{\mathrm{GPU}}", utilization.achieved_flops_per_s_per_gpu,
     rf"{d.tex_sci(acc['achieved_flops_per_s_per_gpu'])}\ \mathrm{{FLOP/s}}")
d.eq(r"P_{\mathrm{cluster}}", utilization.cluster_peak,
     rf"{d.tex_num(sc.num_gpus)} \times {d.tex_sci(sc.peak_flops, 4)}",
     rf"{d.tex_sci(cluster_peak, 4)}\ \mathrm{{FLOP/s}}")
d.eq(r"\mathrm{MFU}", utilization.mfu,
     rf"\frac{{{d.tex_sci(acc['achieved_flops_per_s'], 4)}}}{{{d.tex_sci(cluster_peak, 4)}}}",
     d.pct(acc["mfu"]))

# %% tags=["remove-input"]
r_w = sc.recompute_weights_fraction  # the weight GEMMs' share of the forward redone
factor_exact = (recompute.recompute_factor.subs(r, int(r_w)) if r_w in (0, 1)
                else sp.Float(acc["recompute_factor"], 4))
d.eq(r"\mathrm{HFU}", sp.Symbol(r"\mathrm{MFU}") * factor_exact, d.pct(acc["hfu"]))

# %% [markdown]
# 集群每秒做了 **{{ acc.achieved_flops_per_s|tflops }}** 的有效运算，合每卡 **{{ acc.achieved_flops_per_s_per_gpu|tflops(2) }}**；集群峰值是 {{ sc.num_gpus|num }} × {{ sc.peak_flops|tflops }} = **{{ cluster_peak|tflops }}**。于是 MFU = **{{ acc.mfu|pct }}**。{% if sc.recompute == "full" and r_w == 1 %}本场景开的是 full recompute：反向时把整个前向再跑一遍，硬件多做 2ND，系数 8ND/6ND = {{ factor_exact }}。{% elif sc.recompute == "full" %}本场景开的是 full recompute，但只重算每个流水线段的前 {{ sc.recompute_num_layers }} 层，占前向的 {{ r_w|pct(0) }}，系数为 {{ factor_exact }}。{% elif sc.recompute == "selective" %}本场景开的是 selective recompute，重算的模块是 {% for m in sc.recompute_modules or [] %}{{ m|code }}{% if not loop.last %}、{% endif %}{% endfor %}：{% if r_w > 0 %}它们的权重占前向 FLOPs 的 {{ r_w|pct(1) }}，{% else %}它们不带权重，{% endif %}系数为 {{ factor_exact }}{% if sc.recompute_fraction_from == "scenario" %}（占比由场景键 selective_recompute_fraction 直接给定）{% endif %}。{% else %}本场景没有 recompute：硬件做的就是模型必需的 6ND，HFU 与 MFU 相等。{% endif %}HFU = **{{ acc.hfu|pct }}**。

# %% [markdown]
# ## 3. 三路对账
#
# 一个 MFU 数字只有在另一条独立的路也走得通时才可信。这里走三条：
#
# 1. **FLOPs 路线（集群）**：6ND 除以单步耗时，再除以集群峰值，就是上面的算法；
# 2. **吞吐路线**：D / T 得到每秒 token 数，和训练日志里的实测吞吐比；再把实测吞吐乘每 token 的 FLOPs（6N）反推一个 MFU；
# 3. **单卡路线**：每卡 token/s 和每卡实测比；每卡 FLOP/s 除以单卡峰值，应与集群口径相同。
#
# 每一行比较的是相对差，落在本页自定的容差之内记为 ✓，否则记为 ✗；后面所有“对上”“对不上”的说法都只跟着这一列走。

# %%
TOLERANCE = 0.01  # this page's choice: within ±1% counts as agreeing


def gap(computed, reference):
    """Relative difference computed / reference - 1; None without a reference."""
    return None if reference is None else computed / reference - 1


def agrees(rel):
    return rel is not None and abs(rel) <= TOLERANCE

# %% tags=["remove-input"]
def rounding_note():
    """Whether a gap beyond the tolerance is still within what the inputs' rounding explains
    (costmodel.evaluate.account.claims.throughput_rounding): only beyond it are the inputs inconsistent."""
    rounding = throughput_rounding(sc)
    bound = sum(rounding.values())
    parts = "、".join(f"`{key}` ±{100 * r:.2g}%" for key, r in rounding.items())
    if abs(checks["tokens"]) <= bound:
        return (f"；但输入是取整后写的（{parts}），取整就能造成 ±{100 * bound:.2g}% 的差，"
                "所以只能说差这么多，不能说这组输入不自洽")
    return f"，也超出输入取整能解释的 ±{100 * bound:.2g}%（{parts}）：这组输入不自洽，先查 D 和 T"


# %% tags=["remove-input"]
measured_gpu = acc["measured_tokens_per_s_per_gpu"]
mfu_measured = acc["mfu_from_measured_tokens_per_s"]
per_gpu_mfu = float((utilization.achieved_flops_per_s_per_gpu / P).subs(subs))
checks = {  # name -> relative difference (None: nothing to compare with)
    "tokens": gap(acc["tokens_per_s"], measured),
    "mfu_from_tau": None if mfu_measured is None else gap(mfu_measured, acc["mfu"]),
    "tokens_gpu": gap(acc["tokens_per_s_per_gpu"], measured_gpu),
    "flops_gpu": gap(per_gpu_mfu, acc["mfu"]),
}
ok = {name: agrees(rel) for name, rel in checks.items()}
tol = d.pct(TOLERANCE, 0)


def cells(name):
    rel = checks[name]
    return ("—", "无实测值") if rel is None else (f"{100 * rel:+.2f}%", "✓" if ok[name] else "✗")


d.table([
    ("① FLOPs（集群）", "6ND / T ÷ (n_gpu·P)", d.pct(acc["mfu"]), "—", "基准", ""),
    ("② 吞吐", "D / T  vs  实测 τ", f"{d.num(acc['tokens_per_s'])} tok/s",
     "—" if measured is None else f"{d.num(measured)} tok/s", *cells("tokens")),
    ("② 吞吐反推 MFU", "6N·τ ÷ (n_gpu·P)  vs  ①", d.pct(mfu_measured) if mfu_measured else "—",
     d.pct(acc["mfu"]), *cells("mfu_from_tau")),
    ("③ 单卡吞吐", "D / T / n_gpu  vs  τ / n_gpu", f"{d.num(acc['tokens_per_s_per_gpu'], 1)} tok/s",
     "—" if measured_gpu is None else f"{d.num(measured_gpu, 1)} tok/s", *cells("tokens_gpu")),
    ("③ 单卡 FLOPs", "(6ND / T / n_gpu) ÷ P  vs  ①", d.pct(per_gpu_mfu), d.pct(acc["mfu"]),
     *cells("flops_gpu")),
], ["路线", "算式", "计算值", "对照值", "相对差", "结论"], f"三路对账（容差 {tol}）")

# %% [markdown]
# {% if measured is none %}
# 本场景没有提供实测吞吐（`measured_tokens_per_s` 为空），吞吐路线无从对照，只剩下 ① 和 ③ 两条路。单卡 FLOPs 路线与集群路线在代数上是同一个式子（分子分母同除以 GPU 数），它只能查出算术错误，不提供新的证据。要让对账真正有用，请从训练日志里读出集群的 tok/s 填进场景，再重跑本页。
# {% else %}
# 由 D / T 算出的吞吐是 **{{ acc.tokens_per_s|num }} tok/s**，实测 **{{ measured|num }} tok/s**，相对差 **{{ "%+.2f"|format(100 * checks.tokens) }}%**，{% if ok.tokens %}在 ±{{ tol }} 的容差之内：D、T 与日志里的吞吐互相印证。{% elif checks.tokens > 0 %}超出 ±{{ tol }} 的容差：D / T 比实测高，要么 D 数多了（例如把补齐的 pad 槽位也当成了 token），要么 T 比真实的单步耗时短。{% else %}超出 ±{{ tol }} 的容差：D / T 比实测低，要么 T 里混进了评估、存盘等非训练时间，要么 D 数少了（例如日志的吞吐把 pad 槽位也算成了 token）。{% endif %}用实测吞吐反推的 MFU 是 {{ mfu_measured|pct }}，与 FLOPs 路线的 {{ acc.mfu|pct }} 相差 {{ "%+.2f"|format(100 * checks.mfu_from_tau) }}%，{% if ok.mfu_from_tau == ok.tokens %}{% if ok.mfu_from_tau %}同样在容差之内。{% else %}同样超出容差：两处偏差来自同一个原因，D / T 与实测吞吐不符。{% endif %}{% else %}{% if ok.mfu_from_tau %}在容差之内{% else %}超出容差{% endif %}：这两行比较的是同一对数，只是一个除以另一个，相对差恰在容差边界附近时，可能一行过、一行不过。{% endif %}单卡 FLOPs 路线与集群路线在代数上是同一个式子（分子分母同除以 GPU 数），它只能查出算术错误，不提供新的证据。
# {% endif %}

# %% [markdown]
# ## 4. 一个必须避开的错算：用总参数
#
# MoE 每个 token 只经过被路由到的少数专家，6ND 里的 N 应该是激活参数。Hugging Face 配置和模型名里最显眼的却是总参数；把它代进去，MFU 会按 N_total / N 的倍数被放大。

# %%
mfu_wrong = utilization.mfu.subs(N, N_total)  # the same formula with the total parameters
d.eq(r"\mathrm{MFU}_{\mathrm{wrong}}", mfu_wrong, sp.Symbol(r"\mathrm{MFU}") * N_total / N,
     d.pct(acc["mfu_if_total_params"], 1))

# %% tags=["remove-input"]
ratio = sc.total_params / sc.activated_params
wrong = acc["mfu_if_total_params"]

# %% [markdown]
# {% if sc.num_experts > 0 %}
# 本场景是 MoE（{{ sc.num_experts|num }} 个专家，每 token 激活 {{ sc.experts_per_token|num }} 个），总参数是激活参数的 **{{ ratio|decimals(2) }} 倍**。误用总参数得到的“MFU”是 **{{ wrong|pct(1) }}**，正确值是 **{{ acc.mfu|pct }}**。{% if wrong > 1 %}它超过了 100%，比硬件峰值还多，错误一眼可见；危险的是倍数小一些、算出的数仍在 100% 以内的情形，那时没有任何检查会拦下它。{% elif wrong > 0.5 %}这个数会让人以为已经接近硬件极限、没什么可优化了，而真实的 MFU 只有它的 1/{{ ratio|decimals(1) }}。{% else %}真实的 MFU 只有它的 1/{{ ratio|decimals(1) }}。{% endif %}
# {% elif ratio > 1 %}
# 本场景是稠密模型，总参数是 N 的 {{ ratio|decimals(2) }} 倍（多出的是输入 embedding 这类不参与矩阵乘的参数），误用总参数得到 {{ wrong|pct }}，对比正确的 {{ acc.mfu|pct }}，高估 {{ (ratio - 1)|pct(1) }}。在 MoE 上这个倍数是总参数与激活参数之比，大得多。
# {% else %}
# 本场景是稠密模型，总参数与 N 相同，误用总参数也得到 {{ acc.mfu|pct }}；这个坑主要出在 MoE 上。
# {% endif %}

# %% [markdown]
# ## 5. 真实配置里的激活参数
#
# 激活参数有三种常见的数法，差别在两个“词表大小 × hidden”的矩阵上：
#
# - **6ND 的 N**（本项目的约定，见 [docs/conventions.md](../docs/conventions.md)）：每个 token 真正参与矩阵乘的参数，包括注意力和线性注意力的投影、路由器、被激活的专家、共享专家和输出层 lm_head；不含输入 embedding（它是查表，没有 FLOPs）和 norm 之类的向量。
# - **模型卡上的公开激活数**（"A3B" 的那个 3B）：除路由专家外的全部参数，加上路由专家的 k/E；它含输入 embedding。
# - **总参数**：每个专家都算。
#
# 下面直接从模型的 `config.json` 数出来（`costmodel.inputs.models`），与场景用的 N 放在一起。

# %% tags=["remove-input"]
shape = matching_shape(sc.values)
reference = sc.model or COURSE_MODEL
mtp = bool(sc.count_mtp) and shape is not None and shape.mtp_activated_params > 0
if shape is not None:
    exact_n = shape.activated_params + (shape.mtp_activated_params if mtp else 0)
    config_total = shape.total_params + (shape.mtp_params if mtp else 0)
    counts = [
        ("场景使用的 N", sc.activated_params, SOURCE[sc.sources["activated_params"]]),
        ("精确 N（矩阵乘参数，含 lm_head，不含 embedding）" + ("，含 MTP" if mtp else ""),
         exact_n, "config.json"),
        *([("其中：MTP 模块（count_mtp）", shape.mtp_activated_params, "config.json")] if mtp else []),
        ("公开激活数（含 embedding，不含 MTP）" if mtp else "公开激活数（含 embedding）",
         shape.activated_params_published, "config.json"),
        ("其中：输入 embedding", shape.embedding_params, "config.json"),
        ("其中：lm_head", shape.lm_head_params, "config.json"),
        ("总参数（场景）", sc.total_params, SOURCE[sc.sources["total_params"]]),
        ("总参数（config）" + ("，含 MTP" if mtp else ""), config_total, "config.json"),
    ]
    d.table([(label, d.sci(n, 4), d.num(n), source) for label, n, source in counts],
            ["参数口径", "约数", "精确值", "来源"], f"{shape.name}（{shape.model_type}）的参数计数")

# %% tags=["remove-input"]
def utilization_with(n_params):
    values = {**subs, N: n_params}
    return float(utilization.mfu.subs(values)), float(utilization.hfu.subs(values))


if shape is not None:
    variants = [("场景的 N", sc.activated_params), ("精确 N", exact_n),
                ("公开激活数", shape.activated_params_published),
                ("config 总参数（错误口径）", config_total)]
    by_n = {label: utilization_with(n) for label, n in variants}
    d.table([(label, d.sci(n, 4), d.pct(by_n[label][0]), d.pct(by_n[label][1]),
              f"{100 * (n / sc.activated_params - 1):+.1f}%") for label, n in variants],
            ["N 的口径", "N", "MFU", "HFU", "相对场景的 N"],
            "N 的各种数法下的 MFU 与 HFU（D、T 与集群相同）")
    exact_rel = exact_n / sc.activated_params - 1
    published_rel = shape.activated_params_published / shape.activated_params - 1
    mfu_pub, mfu_exact = by_n["公开激活数"][0], by_n["精确 N"][0]
    low_n, high_n = sorted([mfu_exact, acc["mfu"]])
    over = sc.activated_params / exact_n - 1  # the course's N against the exact count

# %% [markdown]
# {% if shape is none %}
# 本场景的模型形状（hidden、层数、专家数、词表）与配置 {{ reference|code }} 不一致，这里没有它的精确计数。在场景文件里写 `model: 路径/config.json`（或预置名），本节就会改用那个配置数出的激活参数。
# {% else %}
# {% if exact_rel|abs < 5e-4 %}场景的 N 与配置数出的精确 N（{{ exact_n|sci(4) }}）一致，相差不到 0.05%。{% else %}配置数出的精确 N 比场景的 N {% if exact_rel < 0 %}低{% else %}高{% endif %} **{{ (100 * exact_rel|abs)|decimals(1) }}%**：MFU 从 {{ acc.mfu|pct }} 变成 **{{ mfu_exact|pct }}**，HFU 从 {{ acc.hfu|pct }} 变成 **{{ by_n["精确 N"][1]|pct }}**。{% endif %}{% if mtp %}这里的精确 N 按场景的 `count_mtp` 算进了 MTP 模块（{{ shape.mtp_activated_params|sci }}）。{% endif %}精确 N 里有 {{ shape.lm_head_params|sci }} 是 lm_head（每个 token 都要乘的输出层）。公开激活数 {{ shape.activated_params_published|sci }} 比{% if shape.mtp_activated_params > 0 %}不含 MTP 的{% endif %}矩阵乘参数（{{ shape.activated_params|sci }}）多 **{{ (100 * published_rel)|decimals(1) }}%**，多出的主要是输入 embedding（{{ shape.embedding_params|sci }}）；用它算，MFU 是 {{ mfu_pub|pct }}，{% if mfu_pub > acc.mfu %}高于{% elif mfu_pub < acc.mfu %}低于{% else %}等于{% endif %}场景的 N 算出的 {{ acc.mfu|pct }}。用 config 的总参数犯第 4 节的错，则得到 {{ by_n["config 总参数（错误口径）"][0]|pct(1) }}。
# {% if not own and exact_rel|abs >= 5e-4 %}
#
# 对课程来说：课程的 N = {{ sc.activated_params|sci(2) }} 是个取整，比矩阵乘参数的精确值{% if over > 0 %}高{% else %}低{% endif %} {{ (100 * over|abs)|decimals(1) }}%，MFU 因此落在 {{ low_n|pct }} 到 {{ high_n|pct }} 之间，结论不变；真正要小心的是别把模型卡上的公开激活数当成 6ND 的 N，更别用总参数。
# {% endif %}
# {% endif %}

# %% [markdown]
# ## 6. 项目自报的“8–10%”是哪个口径？
#
# 课程说项目自报的利用率是一个区间——这是课程引用的项目数字，不是本页算出来的。把这个区间与几个候选口径对比：离区间最近的那个，最可能是项目实际用的算法。距离按百分点计，落在区间内记为 0。

# %% tags=["remove-input"]
reported_by_project = course.figures()["project_reported_mfu"]["range"]  # the course's quote
low, high = map(course.number, reported_by_project)
reported_range = f"{reported_by_project[0].rstrip('%')}–{reported_by_project[1]}"  # "8–10%"


def distance(x):
    return max(low - x, 0.0, x - high)


candidates = [("MFU（场景的 N）", "MFU (scenario N)", acc["mfu"]),
              ("HFU（场景的 N）", "HFU (scenario N)", acc["hfu"])]
if shape is not None:
    candidates += [("MFU（公开激活数，含 embedding）", "MFU (published active)", by_n["公开激活数"][0]),
                   ("HFU（公开激活数，含 embedding）", "HFU (published active)", by_n["公开激活数"][1])]
mfu_gap, hfu_gap = distance(acc["mfu"]), distance(acc["hfu"])
closer = "HFU" if hfu_gap < mfu_gap else "MFU" if mfu_gap < hfu_gap else None
best_label, _, best_value = min(candidates, key=lambda c: distance(c[2]))
inside = [label for label, _, value in candidates if distance(value) == 0]
if not own:
    d.table([(label, d.pct(value), f"{100 * distance(value):.2f} pp",
              "是" if distance(value) == 0 else "否") for label, _, value in candidates],
            ["候选口径", "值", f"到 [{', '.join(reported_by_project)}] 的距离", "在区间内"],
            f"项目自报的 {reported_range}（课程引用）可能是哪个口径")
else:
    d.table([(label, d.pct(value)) for label, _, value in candidates], ["候选口径", "本场景的值"],
            "本场景在各口径下的利用率")

# %% [markdown]
# {% if not own %}
# 项目自报的是 {{ reported_range }}。两个标准口径里，MFU（{{ acc.mfu|pct }}）离区间 {{ (100 * mfu_gap)|decimals(2) }} 个百分点，HFU（{{ acc.hfu|pct }}）离区间 {{ (100 * hfu_gap)|decimals(2) }} 个百分点：{% if closer %}项目报的数更可能是 **{{ closer }}** 口径。{% else %}两者离区间一样远，分不出口径。{% endif %}{% if inside %}把 N 换成模型卡上的公开激活数后，{{ inside|join("、") }}落进了区间；最贴合的解释是“{{ best_label }}”（{{ best_value|pct }}）。{% else %}所有候选里最近的是“{{ best_label }}”（{{ best_value|pct }}）。{% endif %}
# {% else %}
# “{{ reported_range }}”是课程项目自报的数，只对应课程的场景，这里不拿它和本场景比较。上表列出了本场景在各口径下的数值，可以拿来和你们自己报告的利用率对照：先弄清报告用的是 MFU 还是 HFU、N 取的是哪一种。
# {% endif %}

# %% tags=["remove-input"]
import matplotlib.pyplot as plt

d.setup_plots()
fig, ax = plt.subplots()
values = [100 * value for _, _, value in candidates]
ax.barh([english for _, english, _ in candidates], values, color="tab:blue")
if not own:
    ax.axvspan(100 * low, 100 * high, color="tab:orange", alpha=0.25,
               label="reported by the project (course quote)")
    ax.legend(loc="upper right")
ax.set_xlim(0, 1.4 * max(values + ([] if own else [100 * high])))
ax.invert_yaxis()
ax.set_title("Utilization under each convention")
ax.set_xlabel("utilization (%)")
ax.set_ylabel("convention")
plt.show()

# %% [markdown]
# 图注：横轴是利用率（%），纵轴是各种口径（每行一种，标签是英文名）。

# %% [markdown]
# ## 7. 课程怎么说，本页算出什么
#
# 课程在这一小节里给出的每个数和判断，与本页按场景算出的值并排放在下表。对课程的场景，第三列判断课程的说法是否成立；对你们自己的场景，中间一列是你们的数，第三列把它与课程那次运行的说法对照。

# %% tags=["remove-input"]
FIG = course.figures()


def quoted(key):
    """A course figure as the course writes it, without its section (the row quotes it once)."""
    return FIG[key]["text"]


def versus(value_text, key, note=""):
    """A team's figure against the course's (a figure of the course's run), as a verdict."""
    if value_text == quoted(key):
        return d.verdict(True, "你们的场景按同一算法得到的数与课程那次运行的相同" + note)
    return d.course_run(value_text + note)


def unjudged(why):
    return f"无从判断：{why}"


def recomputed(value_text, key):
    """The course's scenario: does the recomputed figure round to the course's?"""
    same = value_text == quoted(key)
    return "按课程的输入重算，" + ("取整后正是这个数" if same else f"得到的是 {value_text}")


run = "你们的运行" if own else "按课程的输入重算"
mfu_text, hfu_text = d.pct(acc["mfu"]), d.pct(acc["hfu"])
rows = [
    ("MFU = 6ND / (T·n_gpu·P) = " + course.claim("nb01_mfu"), mfu_text,
     versus(mfu_text, "nb01_mfu") if own
     else d.verdict(mfu_text == quoted("nb01_mfu"), recomputed(mfu_text, "nb01_mfu"))),
    ("HFU = MFU × 4/3（full recompute）= " + course.claim("nb01_hfu"),
     f"{hfu_text}（系数 {factor_exact}，{sc.recompute}）",
     versus(hfu_text, "nb01_hfu", f"（本场景 recompute = {sc.recompute}）") if own
     else d.verdict(hfu_text == quoted("nb01_hfu"), recomputed(hfu_text, "nb01_hfu"))),
]
tokens_text = f"{d.num(acc['tokens_per_s'])} tok/s"
if measured is None:
    rows.append((f"吞吐对账：D / T = {quoted('nb03_tokens_per_s')} 对实测 "
                 + course.claim("nb03_measured_tokens_per_s") + "，对得上，输入自洽",
                 f"{tokens_text}，无实测值",
                 unjudged("场景没有 measured_tokens_per_s，吞吐这条独立的对账做不了")))
else:
    rows.append((f"吞吐对账：D / T = {quoted('nb03_tokens_per_s')} 对实测 "
                 + course.claim("nb03_measured_tokens_per_s") + "，对得上，输入自洽",
                 f"{tokens_text} 对 {d.num(measured)} tok/s（{100 * checks['tokens']:+.2f}%）",
                 d.verdict(ok["tokens"], f"{run}，D / T 与实测相差 {100 * checks['tokens']:+.2f}%，"
                           + (f"在本页 ±{tol} 的容差之内" if ok["tokens"] else f"超出本页 ±{tol} 的容差")
                           + ("" if ok["tokens"] else rounding_note()))))

# %% tags=["remove-input"]
gpu_claim = (f"单卡：{quoted('nb03_tokens_per_s_per_gpu')} 对实测 "
             + course.claim("nb03_measured_tokens_per_s_per_gpu"))
if measured is None:
    rows.append((gpu_claim, f"{d.num(acc['tokens_per_s_per_gpu'], 1)} tok/s，无实测值",
                 unjudged("场景没有实测吞吐")))
else:
    note = ("" if own else f"；实测的每卡吞吐是 {d.num(measured_gpu, 1)} tok/s，"
            f"课程写作 {quoted('nb03_measured_tokens_per_s_per_gpu')}，只差取整")
    rows.append((gpu_claim, f"{d.num(acc['tokens_per_s_per_gpu'], 1)} 对 {d.num(measured_gpu, 1)} tok/s"
                 f"（{100 * checks['tokens_gpu']:+.2f}%）",
                 d.verdict(ok["tokens_gpu"], "与集群吞吐是同一个比较（两边都除以 GPU 数），"
                           + ("在容差之内" if ok["tokens_gpu"] else "同样超出容差") + note)))
rows.append((f"单卡 {course.claim('nb03_per_gpu_route')} ÷ 单卡峰值，与集群口径的 MFU 一致",
             f"{d.tflops(acc['achieved_flops_per_s_per_gpu'], 2)} ÷ {d.tflops(sc.peak_flops)} "
             f"= {d.pct(per_gpu_mfu)}",
             d.verdict(ok["flops_gpu"], "这条路与集群路线是同一个式子（分子分母同除以 GPU 数），总会相等，"
                       "只验证算术，不算独立证据；"
                       + ("能独立印证输入的只有实测吞吐那一条" if measured is not None
                          else "本场景没有实测吞吐，三条路里没有一条独立的"))))
wrong_text = d.pct(wrong, 0)
rows.append(("MoE 误把总参数代进 6ND，得到 " + course.claim("total_params_mistake"),
             f"{d.pct(wrong, 1)}（N_total / N = {ratio:.2f}）",
             total_params_verdict(sc, acc) if own else
             d.verdict(wrong_text == quoted("total_params_mistake"),
                       recomputed(wrong_text, "total_params_mistake")
                       + f"（{d.pct(wrong, 1)}）；正确的 MFU 只有它的 1/{ratio:.1f}")))

# %% tags=["remove-input"]
rows.append(reported_convention_row(acc, sc))  # one verdict with 01's (present/claims.py)
d.claims(rows, sc)

# %% [markdown]
# ## 本节要点
#
# - D = {{ tokens|num }} token，6ND = {{ flops|sci(4) }} FLOPs；集群实际 {{ acc.achieved_flops_per_s|tflops }}，每卡 {{ acc.achieved_flops_per_s_per_gpu|tflops(2) }}。
# - MFU = **{{ acc.mfu|pct }}**，HFU = **{{ acc.hfu|pct }}**（recompute 系数 {{ factor_exact }}，集群峰值 {{ cluster_peak|tflops }}）。
# - {% if measured is none %}吞吐路线没有实测值可比：请补上 measured_tokens_per_s。{% else %}吞吐路线：{{ acc.tokens_per_s|num }} vs 实测 {{ measured|num }} tok/s，相对差 {{ "%+.2f"|format(100 * checks.tokens) }}%，{% if ok.tokens %}在容差之内。{% else %}超出容差{{ rounding_note()|safe }}。{% endif %}{% endif %}
# - {% if ratio > 1 %}误用总参数：{{ wrong|pct(1) }}，是正确值的 {{ ratio|decimals(2) }} 倍。{% else %}本场景总参数等于 N，误用总参数不改变结果。{% endif %}
# {% if shape is not none %}
# - 配置里的精确 N = {{ exact_n|sci(4) }}，对应 MFU {{ by_n["精确 N"][0]|pct }}；用公开激活数（含 embedding）算是 {{ by_n["公开激活数"][0]|pct }}。
# {% endif %}
# {% if not own and closer %}
# - 项目自报的 {{ reported_range }}（课程引用）更接近 {{ closer }} 口径。
# {% endif %}

# %% [markdown] tags=["exercise"]
# ### 练习 1：单步耗时多算了一截
#
# 假设日志里记下的单步耗时比真实的训练时间长了 10%（比如把存盘和评估的时间也算了进去），而 D 和日志里的实测吞吐都不变。**先预测**，再对照解答：(a) 按 6ND / T 算出的 MFU 和 HFU 各变成多少？(b) 第 3 节吞吐对账的相对差变成多少，还在容差之内吗？(c) 单卡 FLOPs 那一行会报警吗？

# %% tags=["solution"]
stretch = 1.10  # the logged step time is 10% longer than the real one
slow = {**subs, T: sc.step_time * stretch}
mfu_slow, hfu_slow = float(utilization.mfu.subs(slow)), float(utilization.hfu.subs(slow))
tokens_slow = float(utilization.tokens_per_s.subs(slow))
rel_slow = gap(tokens_slow, measured)
d.eq(r"\mathrm{MFU}'", sp.Symbol(r"\mathrm{MFU}") / sp.nsimplify(stretch), d.pct(mfu_slow))

# %% [markdown] tags=["solution"]
# - (a) MFU 和 HFU 都与 T 成反比，各除以 {{ stretch|short }}：MFU 从 {{ acc.mfu|pct }} 变成 **{{ mfu_slow|pct }}**，HFU 从 {{ acc.hfu|pct }} 变成 **{{ hfu_slow|pct }}**。
# {% if measured is none %}
# - (b) 本场景没有实测吞吐，吞吐对账无从做起，多算的这一截不会被发现。
# - (c) 不会：单卡 FLOPs 路线和集群路线一起变，永远相等。这正是要把日志里的 tok/s 填进场景的原因。
# {% else %}
# - (b) D / T 变成 {{ tokens_slow|num }} tok/s，与实测 {{ measured|num }} tok/s 相差 **{{ "%+.2f"|format(100 * rel_slow) }}%**（原来是 {{ "%+.2f"|format(100 * checks.tokens) }}%），{% if agrees(rel_slow) %}在容差之内{% else %}超出容差{% endif %}。{% if ok.tokens and not agrees(rel_slow) %}对账从 ✓ 变成 ✗：多出来的时间被吞吐路线抓住了。{% elif not ok.tokens and agrees(rel_slow) %}原先超出容差的偏差恰好被这一截抵消了：对得上只说明两边一致，不保证 D 和 T 各自正确。{% elif not ok.tokens %}原来就对不上，现在仍对不上，对账只告诉你有问题，不告诉你问题在哪。{% endif %}
# - (c) 不会：单卡 FLOPs 路线与集群路线一起变，永远相等，它查不出输入错误。
# {% endif %}

# %% tags=["remove-input"]
# exercise 2's recompute: this run's, or where it redoes no weight GEMM (turning it off would change
# nothing: every answer "unchanged") the course's, which the prompt says
ex_own = float(factor_exact) > 1
if ex_own:
    ex_factor = factor_exact
else:
    from costmodel.evaluate.account.account import account
    from costmodel.inputs.scenario import resolve as resolve_course
    course_sc = resolve_course()
    course_r = course_sc.recompute_weights_fraction
    ex_factor = (recompute.recompute_factor.subs(r, int(course_r)) if course_r in (0, 1)
                 else sp.Float(account(course_sc)["recompute_factor"], 4))

# %% [markdown] tags=["exercise"]
# ### 练习 2：关掉 recompute 之后，旧的实测吞吐还能对账吗
#
# {% if not ex_own %}{% if sc.recompute == "none" %}本场景本来就没有 recompute{% else %}本场景的 recompute（{{ sc.recompute|code }}）不重做权重 GEMM{% endif %}，关掉它什么也不变；这道题改用课程场景的 {{ course_sc.recompute|code }} recompute（系数 {{ ex_factor }}）：假设本场景的单步耗时和实测吞吐是开着它量的。{% endif %}01 的第 4 节已经按“硬件一样忙”的假设算过关掉 recompute 的账：硬件每秒做的 FLOPs 不变，单步耗时随硬件 FLOPs 同比缩短，MFU 升到原来的 HFU，HFU 不变。现在把它接到本节的对账上：假设显存腾出来了，recompute 真的关掉了，场景里的 `measured_tokens_per_s` 却还是关掉之前从日志里抄来的。**先预测**：(a) 按 D / T 算出的集群吞吐变成多少？(b) 第 3 节的吞吐对账会怎么说？毛病出在哪个输入上？

# %% tags=["solution"]
factor_now = float(ex_factor)
no_recompute = {**subs, r: 0, T: sc.step_time / factor_now}  # same hardware FLOP/s
mfu_off = float(utilization.mfu.subs(no_recompute))
hfu_off = float(utilization.hfu.subs(no_recompute))
tokens_off = float(utilization.tokens_per_s.subs(no_recompute))  # D / T with the shorter step
rel_off = gap(tokens_off, measured)  # against the throughput logged before the change
d.eq(r"\tau_{\mathrm{off}}", r"\frac{D}{T / f}", rf"{d.tex_num(tokens_off)}\ \mathrm{{tok/s}}")

# %% [markdown] tags=["solution"]
# {% if not ex_own %}按题设，本场景的单步是开着课程的 recompute 量的。{% endif %}按 01 的假设，单步从 {{ sc.step_time|short }} s 缩到 {{ (sc.step_time / factor_now)|decimals(1) }} s（除以系数 {{ ex_factor }}），MFU 升到 {{ mfu_off|pct }}，HFU 仍是 {{ hfu_off|pct }}。
# - (a) D 不变、T 变短，D / T 从 {{ acc.tokens_per_s|num }} 升到 **{{ tokens_off|num }} tok/s**，同样是系数 {{ ex_factor }} 倍。
# {% if measured is none %}
# - (b) 本场景没有实测吞吐，对账无从做起；关掉 recompute 之后要量的正是它。
# {% else %}
# - (b) 与场景里旧的实测 {{ measured|num }} tok/s 相差 **{{ "%+.2f"|format(100 * rel_off) }}%**，{% if not agrees(rel_off) %}超出容差，对账报警。{% else %}居然仍在容差之内，对账不报警。{% endif %}可 D 和新的 T 都没有错，错的是实测吞吐：它量的是关掉之前的运行。改了设置就要重新从日志里读吞吐，再填回场景；对账只说明几个输入彼此不一致，不说明哪一个过时了。
# {% endif %}
