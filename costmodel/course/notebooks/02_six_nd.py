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
# # 02 6ND 从哪来
#
# MFU 的分子几乎总写成 6ND。这一节不把它当口诀，而是从一个线性层的三次矩阵乘出发，让 SymPy
# 把系数 2、4、6 推出来；再看 MoE 里 N 该取哪个数，以及 recompute 如何把 6ND 变成 8ND，
# 选择性重算又落在两者之间的什么位置。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %%
import sympy as sp

from costmodel.present import display as d
from costmodel.derive.flops import (backward_flops, forward_flops, gemm_flops,
                             linear_layer_flops, model_flops, network_flops)
from costmodel.derive.recompute import (factor, fraction_for_factor, hardware_flops_with_recompute,
                                 recompute_factor)
from costmodel.derive.symbols import D, E, N, N_total, h, i_in, k_dim, k_top, m, n, o_out, r

sc, acc = d.load(scenario_file, overrides)
subs = sc.substitutions()
d.md(f"场景：**{d.text(sc['name'])}**（N = {d.sci(sc['activated_params'])}，"
     f"每步 D = {d.sci(sc['tokens_per_step'])} 个真实 token，recompute = `{sc['recompute']}`）。")

# %% [markdown]
# ## 1. 计数约定：一次乘加算 2 个 FLOP
#
# 一个 (m × k) 乘 (k × n) 的矩阵乘，输出有 m·n 个元素，每个元素是 k 次乘加。把乘和加各算一次，
# 就得到下式。后面所有的系数都从这一条约定出发。

# %%
d.eq(r"F_{\mathrm{GEMM}}(m, n, k)", gemm_flops(m, n, k_dim))

# %% [markdown]
# ## 2. 一个线性层，三次 GEMM
#
# 线性层 Y = XW 中，X 是 b 个 token 的输入（b × i），W 是权重（i × o）。训练一步里它参与三次矩阵乘：
#
# - 前向：Y = X W，得到输出；
# - 反向对输入求梯度：dX = dY Wᵀ，把误差继续往前一层传；
# - 反向对权重求梯度：dW = Xᵀ dY，交给优化器更新参数。
#
# 三次乘法的三个维度都是 b、i、o 的某种排列，所以大小完全一样。

# %%
b = sp.Symbol("b", positive=True)  # tokens in the GEMM
layer = linear_layer_flops(b=b)
d.eq(r"F_{\mathrm{fwd}}\;(Y = XW)", layer["forward"])
d.eq(r"F_{dX}\;(dX = dY\,W^{\top})", layer["backward_input"])
d.eq(r"F_{dW}\;(dW = X^{\top} dY)", layer["backward_weight"])
params_tokens = b * i_in * o_out  # (parameters i*o) x (tokens b)
fwd_coef = sp.simplify(layer["forward"] / params_tokens)
bwd_coef = sp.simplify((layer["backward_input"] + layer["backward_weight"]) / params_tokens)
d.eq(r"\frac{F_{\mathrm{fwd}}}{(i\,o)\cdot b}", fwd_coef)
d.eq(r"\frac{F_{dX} + F_{dW}}{(i\,o)\cdot b}", bwd_coef)

# %% [markdown]
# 一层有 i·o 个参数、处理 b 个 token：每个参数对每个 token，前向 2 FLOPs，反向 4 FLOPs。
# 反向之所以是前向的两倍，是因为它要同时算两组梯度（对输入的和对权重的），各自都是一次与前向
# 等大的 GEMM。
#
# ## 3. 从一层到整个网络：2ND + 4ND = 6ND
#
# 把网络里每个权重矩阵逐个相加，N 就是所有矩阵乘参数之和。下面用一个 Transformer 块的形状
# 验证：四个注意力投影（h × h）和 SwiGLU 前馈网络的三个矩阵（h × f、h × f、f × h），
# 每个 GEMM 都单独算，再看总数是不是 2ND 和 4ND。

# %%
f = sp.Symbol("f", positive=True)  # FFN intermediate width
block = [(h, h)] * 4 + [(h, f), (h, f), (f, h)]
net = network_flops(block, tokens=D)
d.eq(r"N_{\mathrm{block}}", net["params"])
d.eq(r"F_{\mathrm{fwd}}", sp.factor(net["forward"]),
     sp.simplify(net["forward"] / (net["params"] * D)) * sp.Symbol(r"N_{\mathrm{block}}") * D)
d.eq(r"F_{\mathrm{bwd}}", sp.factor(net["backward"]),
     sp.simplify(net["backward"] / (net["params"] * D)) * sp.Symbol(r"N_{\mathrm{block}}") * D)
d.eq(r"F_{\mathrm{train}}", sp.Add(forward_flops, backward_flops, evaluate=False), model_flops)

# %% [markdown]
# 这里的 N 只数参与矩阵乘的权重：输入 embedding 是查表（gather），不做乘法，不计入；
# 输出层（lm_head）是一次真正的矩阵乘，计入。归一化、激活函数、softmax 这类逐元素运算
# 与矩阵乘相比量级很小，6ND 也不计。注意力里 QKᵀ 和 A·V 两次乘法乘的是激活而不是权重，
# 同样不在 N 里，长序列下它们并不小（见 05）。
#
# 代入本场景：

# %%
values = {name: float(expr.subs(subs)) for name, expr in
          [("fwd", forward_flops), ("bwd", backward_flops), ("train", model_flops)]}
d.table([("前向 2ND", d.sci(values["fwd"])),
         ("反向 4ND", d.sci(values["bwd"])),
         ("合计 6ND", d.sci(values["train"])),
         ("每 token 6N", d.sci(values["train"] / sc["tokens_per_step"]))],
        ["量", "每步 FLOPs"], "本场景的模型 FLOPs")
assert abs(values["train"] - acc["model_flops_per_step"]) <= 1e-9 * values["train"]

# %% [markdown]
# ## 4. MoE：N 取激活参数，不取总参数
#
# MoE 层里每个 token 只被路由到 E 个专家中的 k 个，没被选中的专家对这个 token 一次乘法也没做。
# 所以 6ND 里的 N 是**每个 token 实际经过的**矩阵乘参数：注意力投影、路由器、共享专家，
# 加上 k 个被选中的路由专家。总参数则把所有专家都数进去，只决定显存，不决定每个 token 的算力。
# 从专家的角度看，一步里每个专家平均分到的 token 数是 D·k/E。

# %%
tokens_per_expert = D * k_top / E
if sc["num_experts"] > 0:
    ratio = sc["total_params"] / sc["activated_params"]
    d.eq(r"D_{\mathrm{expert}}", tokens_per_expert, d.num(acc["tokens_per_expert"]).replace(",", "{,}"))
    d.md(f"本场景是 MoE：每层 {sc['num_experts']} 个路由专家，每个 token 选 "
         f"{sc['experts_per_token']} 个（占 {d.pct(sc['experts_per_token'] / sc['num_experts'])}）。"
         f"激活参数 N = {d.sci(sc['activated_params'])}，总参数 {d.sci(sc['total_params'])}，"
         f"后者是前者的 {d.times(ratio, 1)}。每个专家每步平均只拿到 "
         f"{d.num(acc['tokens_per_expert'])} 个 token，而稠密 FFN 的 GEMM 要处理全部 "
         f"{d.count(sc['tokens_per_step'])} 个：专家的 GEMM 更\"瘦\"（见 06）。"
         f"若把总参数代进 6ND，模型 FLOPs 会虚增到 {d.times(ratio, 1)}（见 09）。")
else:
    ratio = sc["total_params"] / sc["activated_params"]
    gap = sc["total_params"] - sc["activated_params"]
    d.md(f"本场景是稠密模型（num_experts = 0）：每个 token 经过全部权重，没有路由，也就没有"
         f"\"每个专家分到多少 token\"的问题。"
         + (f"激活参数 N = {d.sci(sc['activated_params'])} 比总参数 "
            f"{d.sci(sc['total_params'])} 少 {d.sci(gap)}，差额应当是不做矩阵乘的参数，例如输入 embedding。"
            if gap > 0 else
            f"激活参数 N 与总参数相同（{d.sci(sc['activated_params'])}）：场景把每个参数都算作矩阵乘参数；"
            "若模型有输入 embedding（查表，没有 FLOPs），N 应当比总参数少这一块。"))

# %% [markdown]
# ## 5. 全量重算：8ND 与 4/3
#
# 显存放不下全部激活时，可以在前向只保留少量检查点，反向时把需要的前向再跑一遍。设重算的部分
# 占前向 FLOPs 的比例为 r，硬件一步执行的是"前向 + r × 前向 + 反向"。模型 FLOPs 不变，
# 两者之比就是重算系数，也就是 HFU 与 MFU 之比（见 01）。

# %%
d.eq(r"F_{\mathrm{hw}}(r)", hardware_flops_with_recompute)
d.eq(r"\frac{F_{\mathrm{hw}}(r)}{6ND}", recompute_factor)
d.eq(r"F_{\mathrm{hw}}(1)", sp.factor(hardware_flops_with_recompute.subs(r, 1)))
d.eq(r"\frac{F_{\mathrm{hw}}(1)}{6ND}", factor("full"), d.num(float(factor("full")), 4))

# %% [markdown]
# 全量重算（r = 1）把整个前向多算一遍：2ND + 2ND + 4ND = 8ND，系数 4/3。
# 这是为了省显存**自愿**多付的算力，所以 MFU 不数它，HFU 数它。
#
# ## 6. 选择性重算：系数随 r 线性变化
#
# 选择性重算只重做一部分算子（典型的是激活最占显存、重算又相对便宜的那些，例如注意力核心）。
# 它的系数取决于这些算子占前向 FLOPs 的比例 r，并不是一个固定值。课程对选择性重算给的是
# "约 1.1"（课程数字）；反解方程即可知道这对应重做了多少前向。

# %%
course_selective = sp.Rational(11, 10)  # the course's "about 1.1" (a quote of the course)
d.eq(sp.latex(sp.Eq(recompute_factor, course_selective)) + r"\;\Rightarrow\; r",
     fraction_for_factor(course_selective))
fraction = sc["selective_recompute_fraction"]
rows = []
for policy, r_value in (("none", 0.0), ("selective", fraction), ("full", 1.0)):
    f_policy = float(factor(policy, fraction))
    mark = "（本场景）" if policy == sc["recompute"] else ""
    rows.append((policy + mark, f"{r_value:g}", f"{f_policy:.4f}",
                 d.sci(f_policy * acc["model_flops_per_step"])))
d.table(rows, ["策略", "重算比例 r", "系数 1 + r/3", "每步硬件 FLOPs"],
        "三种策略下本场景的硬件 FLOPs（模型 FLOPs 始终是 6ND）")
d.md(f"本场景把选择性重算的比例设为 r = {fraction:g}（场景键 `selective_recompute_fraction`），"
     f"对应系数 {float(factor('selective', fraction)):.4f}；当前策略 `{sc['recompute']}` 的系数是 "
     f"{acc['recompute_factor']:.4f}。")

# %%
import matplotlib.pyplot as plt
import numpy as np

d.setup_plots()
curve = sp.lambdify(r, recompute_factor, modules="numpy")
grid = np.linspace(0.0, 1.0, 101)
points = {"none": 0.0, "selective": fraction, "full": 1.0}
fig, ax = plt.subplots()
ax.plot(grid, curve(grid), color="#2b6cb0", label=f"factor(r) = {sp.sstr(recompute_factor)}")
for name, x in points.items():
    ax.plot([x], [curve(x)], "o", color="#4a5568")
    ax.annotate(f"{name}: {curve(x):.3f}", (x, curve(x)), textcoords="offset points",
                xytext=(-78, 4) if x > 0.8 else (6, -14), fontsize=9)
x_now = points[sc["recompute"]]
ax.plot([x_now], [curve(x_now)], "o", markersize=14, markerfacecolor="none",
        markeredgecolor="#dd6b20", markeredgewidth=2, label=f"this scenario ({sc['recompute']})")
ax.set_xlabel("r = share of forward FLOPs recomputed")
ax.set_ylabel("hardware FLOPs / model FLOPs")
ax.set_title("Recompute factor against the recomputed share of the forward")
ax.set_ylim(0.95, 1.4)
ax.legend(loc="upper left")
plt.show()

# %% [markdown]
# ## 本节要点

# %%
points_md = [
    f"一次 GEMM 是 2mnk；线性层的前向 1 次、反向 2 次，每参数每 token 为 {fwd_coef} + {bwd_coef}"
    f" = {fwd_coef + bwd_coef} FLOPs。",
    f"本场景 6ND = {d.sci(acc['model_flops_per_step'])} FLOPs/步"
    f"（前向 {d.sci(values['fwd'])}，反向 {d.sci(values['bwd'])}）。",
    (f"MoE 的 N 取激活参数 {d.sci(sc['activated_params'])}，不是总参数 "
     f"{d.sci(sc['total_params'])}；每个专家每步平均 {d.num(acc['tokens_per_expert'])} 个 token。")
    if sc["num_experts"] > 0 else
    f"稠密模型：N = {d.sci(sc['activated_params'])}，每个 token 经过全部矩阵乘权重。",
    f"全量重算是 8ND，系数 {factor('full')}；一般地系数为 {sp.sstr(recompute_factor)}，"
    f"本场景（`{sc['recompute']}`）为 {acc['recompute_factor']:.4f}。",
]
d.md("\n".join(f"- {p}" for p in points_md))
