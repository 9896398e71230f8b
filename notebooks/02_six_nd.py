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
# MFU 的分子几乎总写成 6ND。这一节不把它当口诀，而是从一个线性层的三次矩阵乘出发，让 SymPy 把系数 2、4、6 推出来；再看 MoE 里 N 该取哪个数，以及 recompute 如何把 6ND 变成 8ND，选择性重算又落在两者之间的什么位置。

# %% [markdown] tags=["lab-only"]
# **换成你自己的场景。** 这一页最可能要改的场景键是 `activated_params`（6ND 里的 N：每个 token 经过的矩阵乘参数）、`total_params`（全部参数，MoE 时含所有专家）、`recompute`（`none`、`selective` 或 `full`）和 `selective_recompute_fraction`（选择性重算重做的前向比例 r）。下面参数格里的 `scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 用来单独改几个键，例如 `{"step_time": 90}`。改完之后重启内核并全部重新运行（Kernel → Restart Kernel and Run All Cells）。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %% tags=["remove-input"]
import sympy as sp

from costmodel import course
from costmodel.present import display as d
from costmodel.present.claims import total_params_verdict
from costmodel.derive.flops import (backward_flops, forward_flops, gemm_flops,
                                    linear_layer_flops, model_flops, network_flops)
from costmodel.derive.recompute import (factor, fraction_for_factor,
                                        hardware_flops_with_recompute, recompute_factor)
from costmodel.derive.symbols import D, E, h, i_in, k_dim, k_top, m, n, o_out, r

sc, acc = d.load(scenario_file, overrides)
subs = sc.substitutions()

# %% [markdown]
# 场景：**{{ sc.name }}**（N = {{ sc.activated_params|sci }}，每步 D = {{ sc.tokens_per_step|sci }} 个真实 token，recompute = {{ sc.recompute|code }}）。

# %% [markdown]
# ## 1. 计数约定：一次乘加算 2 个 FLOP
#
# 一个 (m × k) 乘 (k × n) 的矩阵乘，输出有 m·n 个元素，每个元素是 k 次乘加。把乘和加各算一次，就得到下式。后面所有的系数都从这一条约定出发。

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

# %% [markdown]
# 把每一项除以“参数个数 i·o × token 数 b”，就是每个参数、每个 token 花的 FLOPs：

# %%
params_tokens = b * i_in * o_out  # (parameters i*o) x (tokens b)
fwd_coef = sp.simplify(layer["forward"] / params_tokens)
bwd_coef = sp.simplify((layer["backward_input"] + layer["backward_weight"]) / params_tokens)
d.eq(r"\frac{F_{\mathrm{fwd}}}{(i\,o)\cdot b}", fwd_coef)
d.eq(r"\frac{F_{dX} + F_{dW}}{(i\,o)\cdot b}", bwd_coef)

# %% [markdown]
# 一层有 i·o 个参数、处理 b 个 token：每个参数对每个 token，前向 2 FLOPs，反向 4 FLOPs。反向之所以是前向的两倍，是因为它要同时算两组梯度（对输入的和对权重的），各自都是一次与前向等大的 GEMM。
#
# ## 3. 从一层到整个网络：2ND + 4ND = 6ND
#
# 把网络里每个权重矩阵逐个相加，N 就是所有矩阵乘参数之和。下面用一个 Transformer 块的形状验证：四个注意力投影（h × h）和 SwiGLU 前馈网络的三个矩阵（h × f、h × f、f × h），每个 GEMM 都单独算，再看总数是不是 2ND 和 4ND。

# %%
f = sp.Symbol("f", positive=True)  # FFN intermediate width
block = [(h, h)] * 4 + [(h, f), (h, f), (f, h)]
net = network_flops(block, tokens=D)
N_block = sp.Symbol(r"N_{\mathrm{block}}")
d.eq(r"N_{\mathrm{block}}", net["params"])
for name, key in ((r"F_{\mathrm{fwd}}", "forward"), (r"F_{\mathrm{bwd}}", "backward")):
    coef = sp.simplify(net[key] / (net["params"] * D))  # FLOPs per block parameter per token
    d.eq(name, sp.factor(net[key]), coef * N_block * D)
d.eq(r"F_{\mathrm{train}}", sp.Add(forward_flops, backward_flops, evaluate=False), model_flops)

# %% [markdown]
# 这里的 N 只数参与矩阵乘的权重：输入 embedding 是查表（gather），不做乘法，不计入；输出层（lm_head）是一次真正的矩阵乘，计入。归一化、激活函数、softmax 这类逐元素运算与矩阵乘相比量级很小，6ND 也不计。注意力里 QKᵀ 和 A·V 两次乘法乘的是激活而不是权重，同样不在 N 里，长序列下它们并不小（见 05）。逐项的计数口径见 [docs/conventions.md](../docs/conventions.md)。
#
# 代入本场景：

# %%
values = {name: float(expr.subs(subs)) for name, expr in
          [("fwd", forward_flops), ("bwd", backward_flops), ("train", model_flops)]}
assert abs(values["train"] - acc["model_flops_per_step"]) <= 1e-9 * values["train"]

# %% [markdown]
# **本场景的模型 FLOPs**
#
# | 量 | 每步 FLOPs |
# |---|---|
# | 前向 2ND | {{ values.fwd|sci }} |
# | 反向 4ND | {{ values.bwd|sci }} |
# | 合计 6ND | {{ values.train|sci }} |
# | 每 token 6N | {{ (values.train / sc.tokens_per_step)|sci }} |

# %% [markdown]
# ## 4. MoE：N 取激活参数，不取总参数
#
# MoE 层里每个 token 只被路由到 E 个专家中的 k 个，没被选中的专家对这个 token 一次乘法也没做。所以 6ND 里的 N 是**每个 token 实际经过的**矩阵乘参数：注意力投影、路由器、共享专家，加上 k 个被选中的路由专家。总参数则把所有专家都数进去，只决定显存，不决定每个 token 的算力。从专家的角度看，一步里每个专家平均分到的 token 数是 D·k/E。

# %%
tokens_per_expert = D * k_top / E
d.eq(r"D_{\mathrm{expert}}", tokens_per_expert)

# %% tags=["remove-input"]
ratio = sc.total_params / sc.activated_params
gap = sc.total_params - sc.activated_params

# %% [markdown]
# {% if sc.num_experts > 0 %}
# 本场景是 MoE：每层 {{ sc.num_experts|num }} 个路由专家，每个 token 选 {{ sc.experts_per_token|num }} 个（占 {{ (sc.experts_per_token / sc.num_experts)|pct }}）。激活参数 N = {{ sc.activated_params|sci }}，总参数 {{ sc.total_params|sci }}，后者是前者的 {{ ratio|times(1) }}。每个专家每步平均只拿到 {{ acc.tokens_per_expert|num }} 个 token，而稠密 FFN 的 GEMM 要处理全部 {{ sc.tokens_per_step|count }} 个：专家的 GEMM 更“瘦”（见 06）。若把总参数代进 6ND，模型 FLOPs 会虚增到正确值的 {{ ratio|times(1) }}（见 09）。
# {% else %}
# 本场景是稠密模型（num_experts = 0）：每个 token 经过全部权重，没有路由，也就没有“每个专家分到多少 token”的问题，上式不适用。{% if gap > 0 %}激活参数 N = {{ sc.activated_params|sci }} 比总参数 {{ sc.total_params|sci }} 少 {{ gap|sci }}，差额应当是不做矩阵乘的参数，例如输入 embedding。{% else %}激活参数 N 与总参数相同（{{ sc.activated_params|sci }}）：场景把每个参数都算作矩阵乘参数；若模型有输入 embedding（查表，没有 FLOPs），N 应当比总参数少这一块。{% endif %}
# {% endif %}

# %% [markdown]
# ## 5. 全量重算：8ND 与 4/3
#
# 显存放不下全部激活时，可以在前向只保留少量检查点，反向时把需要的前向再跑一遍。设重算的部分占前向 FLOPs（也就是 6ND 里那 2ND）的比例为 r，硬件一步执行的是“前向 + r × 前向 + 反向”。模型 FLOPs 不变，两者之比就是重算系数，也就是 HFU 与 MFU 之比（见 01）。

# %%
d.eq(r"F_{\mathrm{hw}}(r)", hardware_flops_with_recompute)
d.eq(r"\frac{F_{\mathrm{hw}}(r)}{6ND}", recompute_factor)
d.eq(r"F_{\mathrm{hw}}(1)", sp.factor(hardware_flops_with_recompute.subs(r, 1)))
d.eq(r"\frac{F_{\mathrm{hw}}(1)}{6ND}", factor("full"), d.num(float(factor("full")), 4))

# %% [markdown]
# 全量重算（r = 1）把整个前向多算一遍：2ND + 2ND + 4ND = 8ND，系数 4/3。这是为了省显存**自愿**多付的算力，所以 MFU 不数它，HFU 数它。
#
# ## 6. 选择性重算：系数随 r 线性变化
#
# 选择性重算只重做一部分算子，系数就取决于重做了多少。要放进 1 + r/3 这个式子，r 必须是 6ND 里那 2ND 前向的一个份额，也就是**权重矩阵乘的前向**：若反向时重新跑前向的那些权重矩阵合计 N_re 个参数，那么 r = N_re / N。例如只重算 FFN 的 up/gate 投影，或者像 DeepSeek-V3 那样重算 MLA 的上投影，都是在重做一部分权重 GEMM 的前向，r 就是这些矩阵在 N 里所占的比例。
#
# 注意力核心（QKᵀ 与 A·V）不在这里：它乘的是激活，不在 6ND 里，重算它多出的运算也就不进上面的系数，而是记在 05 的注意力硬件 FLOPs 上（那里按 (1 + r_core + κ) 倍注意力前向计，r_core 是注意力核心自己被重做的份额：重算了核心或整层时为 1，否则为 0）。Megatron-LM 的 selective 默认只重算注意力核心（模块名 `core_attn`）；这样的设置在 6ND 这一侧的 r 是 0。
#
# 所以重算哪些算子要写明，本库用 Megatron-LM 的模块名（场景键 `recompute_modules`）：`mlp`、`moe`、`shared_experts`、`mla_up_proj` 带权重，各自的矩阵乘参数占 N 的份额加起来就是 r；`core_attn` 决定 r_core；`layernorm`、`moe_act` 只重做逐元素运算，不添 GEMM FLOPs。显存也由同一组模块决定：重算的模块不再保存它的中间张量（见 08）。
#
# 课程给选择性重算的系数是一个约数，没有说重算了哪些算子。反解 1 + r/3 等于这个约数，就知道它假设了多大的 r：

# %%
selective_quote = course.figures()["nb02_selective_factor"]["text"]  # the course's figure
course_selective = sp.nsimplify(course.number(selective_quote))
r_course = fraction_for_factor(course_selective)
d.eq(sp.latex(sp.Eq(recompute_factor, course_selective)) + r"\;\Rightarrow\; r", r_course)

# %% tags=["remove-input"]
sel = acc["projections"]["selective_recompute"]
fraction = sel["weights_fraction"]  # r of this scenario's selective recompute, derived
modules = "、".join(sel["modules"])  # the claims table is HTML: no code spans
origin = ("由场景键 selective_recompute_fraction 直接给定" if sel["fraction_from"] == "scenario" else
          f"由重算的模块 {modules} 推出")  # for the claims table
same_r = abs(fraction - float(r_course)) < 1e-12

# %% [markdown]
# 选择性重算的系数约为 {{ course.claim("nb02_selective_factor") }}，这意味着 r = {{ r_course }}：反向时重做了 {{ r_course|float|pct(0) }} 的权重矩阵乘前向，即 N_re = {{ r_course }}·N。这只是由课程的约数反推出来的假设，课程没有说重做了哪些算子。本场景的 r = {{ fraction|sig }}，{% if sel.fraction_from == "scenario" %}由场景键 `selective_recompute_fraction` 直接给定{% else %}由重算的模块 {% for m in sel.modules %}{{ m|code }}{% if not loop.last %}、{% endif %}{% endfor %} 推出{% endif %}{% if same_r %}，与课程的假设相同。{% else %}，与课程的假设不同。{% endif %}

# %% tags=["remove-input"]
rows = []
for policy, r_value in (("none", 0.0), ("selective", fraction), ("full", 1.0)):
    f_policy = float(factor(policy, fraction))
    mark = "（本场景）" if policy == sc.recompute else ""
    rows.append((policy + mark, f"{r_value:g}", f"{f_policy:.4f}",
                 d.sci(f_policy * acc["model_flops_per_step"])))
d.table(rows, ["策略", "重算比例 r", "系数 1 + r/3", "每步硬件 FLOPs（不含注意力核心）"],
        "三种策略下本场景的硬件 FLOPs（模型 FLOPs 始终是 6ND）")
f_sel = float(factor("selective", fraction))

# %% [markdown]
# 本场景的选择性重算 r = {{ fraction|sig }}（{% if sel.fraction_from == "scenario" %}由场景键 `selective_recompute_fraction` 直接给定{% else %}由重算的模块 {% for m in sel.modules %}{{ m|code }}{% if not loop.last %}、{% endif %}{% endfor %} 推出{% endif %}），对应系数 {{ f_sel|decimals(4) }}；当前策略 {{ sc.recompute|code }} 的系数是 {{ acc.recompute_factor|decimals(4) }}。

# %% tags=["remove-input"]
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
x_now = points[sc.recompute]
ax.plot([x_now], [curve(x_now)], "o", markersize=14, markerfacecolor="none",
        markeredgecolor="#dd6b20", markeredgewidth=2, label=f"this scenario ({sc.recompute})")
ax.set_xlabel("r = share of the weight GEMMs' forward (2ND) recomputed")
ax.set_ylabel("hardware FLOPs / model FLOPs")
ax.set_title("Recompute factor against the recomputed share of the forward")
ax.set_ylim(0.95, 1.4)
ax.legend(loc="upper left")
plt.show()

# %% [markdown]
# 图注：横轴是重算的比例 r（权重 GEMM 的前向 2ND 里被重做的份额），纵轴是硬件 FLOPs 与模型 FLOPs 之比（重算系数）；三个圆点是 none、selective、full 三种策略，橙色圆圈是本场景的策略。

# %% [markdown]
# ## 7. 课程怎么说，本页算出什么
#
# 下表把课程在这个话题上的说法与本页的推导、本场景的数字并排放：推导出的系数与场景无关，课程那次运行的具体数字则只对课程场景才能直接比较。

# %% tags=["remove-input"]
own = bool(sc.changed)
f_full = factor("full")
sel_close = abs(f_sel - float(course_selective)) < 0.05
wrong, right = acc["mfu_if_total_params"], acc["mfu"]
wrong_close = abs(wrong - course.number(course.figures()["total_params_mistake"]["text"])) < 0.005
moe = sc.num_experts > 0
rows = [
    (f"训练一步 = 前向 2ND + 反向 4ND：{course.claim('nb02_six_nd')}",
     f"每参数每 token {fwd_coef} + {bwd_coef} = {fwd_coef + bwd_coef}；本场景 6ND = {d.sci(values['train'])}",
     d.verdict(fwd_coef == 2 and bwd_coef == 4,
               "反向对输入、对权重各做一次与前向等大的 GEMM；系数只由 GEMM 形状决定，与场景无关")),
    (f"全量重算：2 + 2 + 4 = 8ND，系数 {course.claim('nb02_full_recompute_factor')}",
     f"1 + r/3 在 r = 1 时为 {f_full} = {float(f_full):.4f}；本场景 `recompute: {sc.recompute}` "
     f"的系数 {acc['recompute_factor']:.4f}",
     d.verdict(f_full == sp.Rational(4, 3), "把整个前向再跑一遍；这个系数与场景无关"
               + ("" if sc.recompute == "full" else f"，但本场景用的是 `{sc.recompute}`，不是全量重算"))),
    (f"换成选择性重算后系数约为 {course.claim('nb02_selective_factor')}",
     f"r = {fraction:.4g}（{origin}）时 1 + r/3 = {f_sel:.4f}；课程的约数对应 r = {r_course}",
     d.verdict(sel_close,
               (f"{'你的' if own else '本'}场景的系数 {f_sel:.4f}，"
                + ("与课程的约数相符" if sel_close else "与课程的约数相差明显") + "。")
               + "系数只看重做了多少权重 GEMM 的前向；Megatron-LM 默认的 selective 只重算注意力核心（在 6ND 之外），"
               "这一侧的系数是 1，多出的运算记在 05 的硬件 FLOPs 上；课程的约数要求重做约三成的权重 GEMM，它没说是哪些")),
    (f"MoE 的 N 取激活参数，不取总参数：N = {course.claim('nb02_activated_params')}",
     (f"激活 {d.sci(sc.activated_params)}，总参数 {d.sci(sc.total_params)}（{d.times(ratio, 1)}）"
      if moe else f"稠密模型：N = {d.sci(sc.activated_params)}，总参数 {d.sci(sc.total_params)}"),
     d.verdict(True, ("没被路由到的专家对这个 token 不做乘法，6ND 只数每个 token 经过的矩阵乘参数"
                      + ("；课程的 3e9 是课程那次运行的数，中间一列是你的模型" if own else ""))
               if moe else "稠密模型没有路由，规则同样适用，N 与总参数之间只差不做乘法的参数")),
    (f"误把总参数代进 6ND，MFU 成了 {course.claim('total_params_mistake')}",
     f"按总参数 {d.pct(wrong)}，按激活参数 {d.pct(right)}（{d.times(ratio, 1)}）",
     total_params_verdict(sc, acc) if own else
     d.verdict(wrong_close, f"总参数是激活参数的 {d.times(ratio, 1)}，错算就把 MFU 放大同样的倍数"
               + ("，超过 100%，一眼可见是错的" if wrong > 1 else ""))),
]
d.claims(rows, sc)

# %% [markdown]
# ## 8. 换一个 hidden_size：一次扫描
#
# `costmodel sweep` 能改变任何数值键，包括模型的形状和并行布局。下表把本场景的 `hidden_size` 换成它的 0.5 到 3 倍（取 256 的整数倍）、其余键不变：每一行是本场景只换掉 `hidden_size` 的那个场景，场景没有给定 N 时，N 按新形状重新数出（这一点与 `costmodel report --set hidden_size=…` 不同，后者保留原来的 N）。单步耗时取每个点自己的预测值（实测的单步耗时和吞吐只属于原来那个模型），列出 N、预测的单步耗时、按预测单步耗时算的 MFU 和最忙那块 GPU 的显存峰值；换了 `hidden_size` 的点，模型形状不再取自模型配置，而是由 `hidden_size` 和场景的其余键重新构造（场景没有给定的宽度按课程的规则推出），所以这些点描述的是按规则构造的另一族模型，不一定和本场景自己的数落在同一条平滑的曲线上。布局不能整除、或形状被校验拒绝的点不会让整个扫描中断，而是留下一行，写明拒绝的原因。命令行上的同一件事是 `costmodel sweep --set step_time=null --vary hidden_size=… --plot h.svg --plot-y predicted_step`。

# %% tags=["remove-input"]
from costmodel.errors import CostModelError
from costmodel.evaluate.sweep import sweep as grid_sweep
from costmodel.inputs.fields import FIELDS
from costmodel.present import words

measured_only = {"step_time": None, "measured_tokens_per_s": None}  # the measured model's
try:  # each point's own predicted step
    sweep_base, _ = d.load(scenario_file, {**overrides, **measured_only})
except CostModelError:  # an N too far from the shape for a predicted step: the scenario's step
    sweep_base = sc
predicted_base = sweep_base.step_time_from == "predicted"
widest = FIELDS["hidden_size"].maximum  # the key's bound: a point past it is no scenario
widths = sorted({min(widest, max(256, round(sc.hidden_size * f / 256) * 256))
                 for f in (0.5, 0.75, 1.5, 2, 3)})
hidden_axis = grid_sweep.parse_axis("hidden_size=" + ",".join(map(str, widths)))
hidden_grid = grid_sweep.evaluate_grid(sweep_base, [hidden_axis])
x = hidden_grid.extra
kept = [i for i in range(len(hidden_grid)) if not hidden_grid.refused[i]]
d.table([(widths[i], d.sci(x["scenario.activated_params"][i]),
          f"{x['time.predicted_seconds'][i]:.2f} s", d.pct(x["mfu_on_predicted_step"][i]),
          f"{d.gb(x['memory.total'][i])}（{words.PHASES[x['memory.peak_phase'][i]]}）",
          "是" if x["memory.fits"][i] == "true" else "否") if i in kept
         else (widths[i], "", "", "", "", hidden_grid.refused[i])
         for i in range(len(hidden_grid))],
        ["hidden_size", "N", "预测单步耗时", "按预测单步耗时的 MFU", "显存峰值（阶段）", "放得下？或拒绝原因"],
        "对 hidden_size 的一次扫描（其余键同本场景）")


def monotone(values):
    """'up', 'down' or 'mixed' over the kept points, in the order of hidden_size."""
    pairs = list(zip(values, values[1:]))
    return "up" if all(a < b for a, b in pairs) else "down" if all(a > b for a, b in pairs) else "mixed"


n_trend = monotone([x["scenario.activated_params"][i] for i in kept])
step_trend = monotone([x["time.predicted_seconds"][i] for i in kept])
mfu_trend = monotone([x["mfu_on_predicted_step"][i] for i in kept])
fitting = sum(x["memory.fits"][i] == "true" for i in kept)
refused_points = len(hidden_grid) - len(kept)

# %% [markdown]
# {% if not predicted_base %}本场景的 N 与它的形状相差太多，不能用预测的单步耗时，下表的点沿用场景的单步耗时。{% endif %}{% if kept|length > 1 %}在这 {{ kept|length }} 个校验通过的点上，{% if n_trend == "up" %}每个 token 的矩阵乘参数 N 随 hidden_size 增多，6ND 随之变大{% else %}N 并不随 hidden_size 单调增多（比如场景给定了 `activated_params`），6ND 也就不跟着变{% endif %}；预测的单步耗时{% if step_trend == "up" %}随之单调变长{% elif step_trend == "down" %}反而单调变短{% else %}不单调{% endif %}，按预测单步耗时算的 MFU {% if mfu_trend == "up" %}随之升高{% elif mfu_trend == "down" %}随之降低{% else %}不单调{% endif %}。MFU 怎么走取决于两件事：更宽的矩阵乘离峰值更近还是更远，以及不随 N 增长的部分（注意力核心、通信、流水线气泡）在单步耗时里的占比怎样变化。{% else %}这组 hidden_size 里校验通过的点不到两个，看不出趋势；原因见表中最后一列。{% endif %}{% if kept %}{% if fitting == kept|length %}每个校验通过的点都放得下。{% else %}其中 {{ kept|length - fitting }} 个点在最忙的 GPU 上放不下，要配合重算、ZeRO 或更大的并行度才能跑。{% endif %}{% endif %}{% if refused_points %}另有 {{ refused_points }} 个点被校验拒绝，表中写了拒绝的原因。{% endif %}

# %% [markdown]
# ## 本节要点
#
# - 一次 GEMM 是 2mnk；线性层的前向 1 次、反向 2 次，每参数每 token 为 {{ fwd_coef }} + {{ bwd_coef }} = {{ fwd_coef + bwd_coef }} FLOPs。
# - 本场景 6ND = {{ acc.model_flops_per_step|sci }} FLOPs/步（前向 {{ values.fwd|sci }}，反向 {{ values.bwd|sci }}）。
# - {% if sc.num_experts > 0 %}MoE 的 N 取激活参数 {{ sc.activated_params|sci }}，不是总参数 {{ sc.total_params|sci }}；每个专家每步平均 {{ acc.tokens_per_expert|num }} 个 token。{% else %}稠密模型：N = {{ sc.activated_params|sci }}，每个 token 经过全部矩阵乘权重。{% endif %}
# - 全量重算是 8ND，系数 {{ factor("full") }}；一般地系数为 {{ sp.sstr(recompute_factor) }}，r 是重做的权重矩阵乘前向所占的比例，由重算的模块推出，本场景（{{ sc.recompute|code }}）的系数为 {{ acc.recompute_factor|decimals(4) }}。注意力核心的重算不在这个系数里，记在 05 的硬件 FLOPs 上。

# %% [markdown]
# ## 练习

# %% [markdown] tags=["exercise"]
# ### 练习 1：冻结一层的权重
#
# 微调时常把某些线性层的权重冻结（不更新，也就不需要它的权重梯度），但它前面还有要训练的层。先别看解答：这样一层每个参数、每个 token 要花多少 FLOPs？如果它前面已经没有任何要训练的参数，又是多少？写下答案，再对照解答。

# %% tags=["solution"]
frozen = layer["forward"] + layer["backward_input"]  # no dW for a frozen weight
d.eq(r"\frac{F_{\mathrm{fwd}} + F_{dX}}{(i\,o)\cdot b}", sp.simplify(frozen / params_tokens))
d.eq(r"\frac{F_{\mathrm{fwd}}}{(i\,o)\cdot b}", sp.simplify(layer["forward"] / params_tokens))

# %% [markdown] tags=["solution"]
# 冻结的权重省掉 dW = Xᵀ dY 这一次 GEMM，但误差还得穿过它传给前面要训练的层，dX = dY Wᵀ 照算：前向加反向共 4 FLOPs，是 6 的三分之二。前面再没有可训练参数时，dX 也没人要，只剩前向那一次。注意 MFU 的分子若仍写 6ND，会把冻结层没做的那部分也算进去。

# %% tags=["remove-input"]
# exercise 2's r: the scenario's selective r, or where its modules redo no weight GEMM (r = 0:
# every answer would be zero) the course's assumed r, said so on the page
r_own = acc["projections"]["selective_recompute"]["weights_fraction"]
r_sel = r_own if r_own > 0 else float(r_course)

# %% [markdown] tags=["exercise"]
# ### 练习 2：{% if r_own > 0 %}本场景的选择性重算重做了多少{% else %}课程假设的选择性重算重做了多少{% endif %}
#
# {% if r_own > 0 %}取本场景选择性重算的 r（第 6 节的表里有它的值，由重算的模块推出）{% else %}本场景的选择性重算只重做不带权重的模块（r = 0，第 6 节），下面三问的答案都会是零；这里改用课程的系数 {{ course.claim("nb02_selective_factor") }}反推出的 r = {{ r_course }}{% endif %}，假设策略是 `selective`。先用本页的式子算出：(a) 反向时被重新跑前向的权重矩阵合计多少参数；(b) 每步比 6ND 多做多少 FLOPs；(c) 系数，也就是 HFU 与 MFU 之比。再对照解答核对。

# %% tags=["solution"]
extra = float((hardware_flops_with_recompute - model_flops).subs({**subs, r: r_sel}))
d.eq(r"F_{\mathrm{hw}} - 6ND", sp.factor(hardware_flops_with_recompute - model_flops), d.sci(extra))
d.table([("N_re = r·N", d.sci(r_sel * sc.activated_params)),
         ("每步多做 2rND", d.sci(extra)),
         ("系数 1 + r/3", f"{float(factor('selective', r_sel)):.4f}")],
        ["量", f"r = {r_sel:g}"], "选择性重算的额外开销（本场景的 N 与 D）")

# %% [markdown] tags=["solution"]
# 被重做的 N_re = rN 个参数对 D 个 token 各做一次前向，多出的正好是 2rND；系数 1 + r/3 只看 r，与 N、D 都无关。注意力核心若也被重算，那部分不在这里，要到 05 的硬件 FLOPs 里找。
