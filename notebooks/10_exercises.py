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
# # 10 思考题：课程里 packing 之后再换 selective recompute 的两问
#
# 课程这一节最后留了两道思考题，本页把它们做成练习 1 和练习 2，再加上第三题，练习 3（packing 之后，单步耗时模型怎么说）：先用前面各节的方法自己估出数来、写在纸上，再对照解答核对。解答里的数字都按当前场景现算。有两个输入要按团队自己的训练来定：训练现在要跑多久（课程只说“一夜”），一步里有多少通信没被计算掩盖（课程给的是它那次训练的实测）。它们如今是场景的键 `training_hours` 和 `communication_share`，解答用到它们时都注明值从哪里来。教师版在练习之后给出解答、按本次运行排好的杠杆（`acc["advice"]`）看剩下的先做哪个，并把课程的说法与本页算出的数逐条对照；学生版只留题目和作答的空白。

# %% [markdown] tags=["lab-only"]
# **换成自己的场景。** 本节最可能要改的键：`mean_tokens_per_sample`（平均每个样本的真实 token 数，决定 packing 有没有收益可拿）、`recompute`（现在用的是 full、selective 还是不重算）、`training_hours`（整个训练现在的墙钟时长）、`communication_share`（实测的、没被计算掩盖的通信份额）。下面参数格里的 `scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 只改单个键，例如 `{"step_time": 90}`。改完之后重启内核并全部运行（Kernel → Restart Kernel and Run All Cells）。
#
# 本页各个数的口径（N 怎么数、模型与硬件 FLOPs、注意力项）以及与 Megatron-LM、nanoGPT、torchtitan 等的差别，见 [docs/conventions.md](../docs/conventions.md)。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}


# %% tags=["remove-input"]
import math
from functools import partial

import matplotlib.pyplot as plt
import sympy as sp

from costmodel import course
from costmodel.derive import exercises as x
from costmodel.derive import levers, padding, roofline
from costmodel.derive.symbols import D, T, m
from costmodel.errors import CostModelError
from costmodel.evaluate.simulate import gemms
from costmodel.evaluate.simulate.run import memory as gpu_memory
from costmodel.formats import decimals, short, sig
from costmodel.inputs import attention_kernels
from costmodel.evaluate.account.claims import communication_share_now
from costmodel.present import answers_zh
from costmodel.present import display as d
from costmodel.present import words
from costmodel.present.advice_zh import note as advice_note

sc, acc = d.load(scenario_file, overrides)
pad, proj = acc["padding"], acc["projections"]
source = {key: a["source"] for key, a in acc["assumptions"].items()}
by_lever = {a["lever"]: a for a in acc["advice"]}
own = bool(sc.changed)  # a team's scenario: the claims table shows the team's figures
moe = sc.num_experts > 0
packed = pad["batching"] == "packed"
padded = not packed and pad["slots"] > sc.tokens_per_step  # some slots hold padding
# the one answer to what packing and selective recompute give this run: the step-time model's
# levers, as section 04 and 08 and the report give them (the exercises' arithmetic is the course's)
pack = answers_zh.packing(acc)
pack_why = answers_zh.packing_why(acc) if pack else ""
sel_answer = answers_zh.selective(acc)
sel_why = answers_zh.selective_why(acc) if sel_answer else ""


def share(value):
    """A share of the step: one decimal, two below 1% (a small share does not print as 0.0%)."""
    return d.pct(value, 1 if value == 0 or value >= 0.01 else 2)


def seconds(value):
    """A time in seconds: one decimal, two significant digits below 0.1 s."""
    return f"{decimals(value, 1)} s" if value == 0 or value >= 0.1 else f"{sig(value, 2)} s"


def origin(key):
    """Where the value of `key` comes from, with the key to set when it is the course's."""
    if source.get(key) == "course":
        return f"按课程假设；设置 `{key}` 可改为你的实际值"
    return f"场景的 `{key}`"


step_said = "预测" if sc.step_time_from == "predicted" else "实测"  # step_time null: predicted
clash = "估计与实测矛盾" if step_said == "实测" else "估计与预测的单步耗时矛盾"

# %% [markdown]
# 场景：**{{ sc.name }}**。现在每步 {{ sc.step_time|short }} s{% if sc.step_time_from == "predicted" %}（单步耗时模型的预测：场景的 `step_time` 为 null）{% endif %}，MFU {{ acc.mfu|pct }}，HFU {{ acc.hfu|pct }}，recompute = {{ sc.recompute }}{% if moe %}，模型是 MoE（{{ sc.num_experts }} 个专家）{% else %}，模型是稠密的（没有专家）{% endif %}。

# %% [markdown]
# ## 做题用的三件工具
#
# - **单步耗时正比于算过的槽位**。定长补齐时一步算 $B \cdot S$ 个槽位，其中真实 token 只有 $D$ 个；MFU 的分子 6ND 只数真实 token，所以 pad 不进分子，只拉长耗时（第 04 节）。
# - **recompute 改的是每个槽位的 FLOPs**。硬件每个 token 做 $6N \cdot f$ 次运算：full recompute 的 $f = 4/3$，selective 只重算前向的一部分，$f$ 更小（第 02 节）。
# - **不缩短的那部分时间会变显眼**。如果一步里有一段时间（例如没被掩盖的通信）不随计算缩短，计算提速 $g$ 倍之后，整步的提速小于 $g$，这段时间的占比上升（Amdahl 定律，第 08 节）。

# %% [markdown] tags=["exercise"]
# ### 练习 1：packing 做成之后的账（思考题 1）
#
# 假设 packing 做成了，而且是完美 packing：样本首尾相接地装满每一行，一个 pad 都不剩。其中 (a) 单步耗时和 (c) MFU（6ND 口径）会变成多少，第 04 节已经算过（下表最后两行）：先不看解答，说清楚这两个数是怎么从上面几行来的；再用下表的数自己算 (b) 集群吞吐（每秒真实 token）变成多少，(d) 整个训练现在要跑的时长会变成多久。提示：想清楚 packing 改变的是哪一个量、6ND 的分子变不变；如果本场景已经在 packing，或者样本本来就填满了序列，答案又是什么？


# %% [markdown]
# **练习 1：本场景的输入**
#
# | 量 | 本场景 |
# |---|---|
# | 单步耗时 T | {{ sc.step_time|short }} s |
# | 每步算的槽位（{% if packed %}已 packing：就是 D{% else %}定长补齐：B·S{% endif %}） | {{ pad.slots|num }} |
# | 每步的真实 token D | {{ sc.tokens_per_step|count }} |
# | MFU（6ND 口径） | {{ acc.mfu|pct }} |
# | 训练现在的时长 | {{ sc.training_hours|short }} h（{{ origin("training_hours")|safe }}） |
# | (a) 第 04 节算过：完美 packing 后的单步耗时 | {{ pad.step_time_after_packing|decimals(1) }} s |
# | (c) 第 04 节算过：完美 packing 后的 MFU | {{ pad.mfu_after_packing|pct }} |

# %% tags=["solution"]
g_pack = pad["packing_speedup"]  # slots / D: the course's method, exercise 1's
t_pack = pad["step_time_after_packing"]  # T / g_pack
tok_pack = sc.tokens_per_step / t_pack  # D / T'
d.eq(r"g_{\mathrm{pack}}", padding.packing_speedup,
     rf"\frac{{{d.tex_num(pad['slots'])}}}{{{d.tex_num(sc.tokens_per_step)}}}", f"{decimals(g_pack, 3)}")
d.eq(r"T'", padding.step_time_after_packing, rf"{decimals(t_pack, 1)}\ \mathrm{{s}}")
d.eq(r"\tau'", D / sp.Symbol("T'"), rf"{d.tex_num(tok_pack)}\ \mathrm{{tok/s}}")
d.eq(r"\mathrm{MFU}'", padding.mfu_after_packing, d.pct(pad["mfu_after_packing"]))
hfu_pack = acc["hfu"] * g_pack

# %% [markdown] tags=["solution"]
# **练习 1 (a)–(c)：完美 packing 之后的账**
#
# | 量 | 现在 | 完美 packing 之后 |
# |---|---|---|
# | (a) 单步耗时 | {{ sc.step_time|decimals(1) }} s | {{ t_pack|decimals(1) }} s |
# | (b) 集群吞吐（真实 token） | {{ acc.tokens_per_s|num }} tok/s | {{ tok_pack|num }} tok/s |
# | 其中单卡吞吐 | {{ acc.tokens_per_s_per_gpu|num(1) }} tok/s | {{ (tok_pack / sc.num_gpus)|num(1) }} tok/s |
# | (c) MFU（6ND 口径） | {{ acc.mfu|pct }} | {{ pad.mfu_after_packing|pct }} |
# | HFU | {{ acc.hfu|pct }} | {{ hfu_pack|pct }} |
#
# {% if padded %}
# 每步要算的槽位从 {{ pad.slots|num }} 降到 {{ sc.tokens_per_step|count }}，提速 **{{ g_pack|times }}**：单步从 {{ sc.step_time|short }} s 变成 **{{ t_pack|decimals(1) }} s**，集群吞吐从 {{ acc.tokens_per_s|num }} 升到 **{{ tok_pack|num }} tok/s**，MFU 从 {{ acc.mfu|pct }} 升到 **{{ pad.mfu_after_packing|pct }}**。MFU 的分子（6ND）没有变，变的只是耗时：pad 上的运算本来就不计入 MFU，它们只是把时间拉长了。这是课程的算法（步时随槽位等比例缩短）的答案；本次运行 packing 后一步多久，全书只有一个答案，取单步耗时模型的（第 04、08 节和报告都用它）：{{ pack_why }}。{% if hfu_pack > 1 %}但这里 HFU 会到 {{ hfu_pack|pct }}，超过 100%，不可能：HFU 只数真实 token，若 pad 槽位现在也真的在算，GPU 现在就已经超过峰值了。所以本场景的“定长补齐”前提站不住（也许已在 packing 或 varlen），或 `step_time` 等输入需要核对；上表的“之后”一列不能当真。{% endif %}
# {% else %}
# {% if packed %}本场景已经在做 packing（`batching: packed`）{% else %}本场景的平均真实长度等于配置长度{% endif %}：每步的 {{ pad.slots|num }} 个槽位全是真实 token，没有 pad 可省。完美 packing 的提速是 {{ g_pack|times }}，单步仍是 {{ sc.step_time|short }} s，MFU 仍是 {{ acc.mfu|pct }}；下面 (d) 的训练时长也不变。
# {% endif %}

# %% [markdown] tags=["solution"]
# #### (d) 整个训练要跑多久
#
# 课程只说它的训练是 2 个 epoch、“跑一夜”，既没给数据集大小，也没给墙钟时间。场景的 `training_hours` 键把这段时长写成具体的小时数；课程场景里它是课程的假设，团队换成自己日志里的真实时长即可。步数不变时，墙钟时间与单步耗时同比例缩短。


# %% tags=["solution"]
current_run_hours = sc.training_hours  # the course's "overnight" unless the scenario sets it
run = x.run_after(current_run_hours, sc.step_time, sc.tokens_per_step, g_pack)
d.eq(r"H'", x.run_hours_after.subs(x.g, sp.Symbol(r"g_{\mathrm{pack}}")),
     rf"\frac{{{short(current_run_hours)}\ \mathrm{{h}}}}{{{decimals(g_pack, 3)}}}",
     rf"{decimals(run['hours_after'], 1)}\ \mathrm{{h}}")
course_epochs = 2  # the course's run: two epochs (the scenario has no key for it)
samples_per_epoch = run["steps"] * sc.samples_per_step / course_epochs

# %% [markdown] tags=["solution"]
# 现在要 **{{ current_run_hours|short }} 小时**（{{ origin("training_hours")|safe }}），{% if padded %}packing 之后约 **{{ run.hours_after|decimals(1) }} 小时**，省下 {{ (current_run_hours - run.hours_after)|decimals(1) }} 小时。{% else %}没有 pad 时 packing 不缩短单步，训练时长不变。{% endif %}这个时长同时意味着整个训练约 {{ run.steps|num }} 步、{{ run.tokens|sci }} 个真实 token；若像课程那样是 {{ course_epochs }} 个 epoch，每个 epoch 约 {{ samples_per_epoch|num }} 个样本。如果这与你们的数据量对不上，说明 `training_hours` 该改了。

# %% [markdown] tags=["solution"]
# 课程方法之外的一点提醒：上面的提速只看槽位数，也就是只看与参数成正比的那部分运算。{% if sc.attention_on_padding == "computed" %}本场景的注意力核（6ND 漏掉的 s² 项）在定长补齐时每条序列按 S² 算（`attention_on_padding: computed`{% if sc.sources.attention_on_padding == "course" %}，课程的前提{% endif %}），packing 并配合块对角注意力后只按每个样本自己的长度算（$\sum s_i^2 \le S \cdot D$），降得不比槽位数少；但实测一步里模型解释不了的那部分不一定随槽位缩短，所以单步耗时模型的答案与这里不同（见上）。{% else %}本场景的注意力 kernel 已经只算真实长度（`attention_on_padding: skipped`），packing 省不到它，实际提速比槽位之比小（见上）。{% endif %}注意力的 FLOPs 取自账本，按场景的 `attention_flops` 口径数（全方阵，或 causal 只数半个方阵）；模型若有线性注意力层，它的核与 token 数成正比，按槽位一起缩短。


# %% tags=["solution", "remove-input"]
att = acc["attention"]
linear = acc["linear_attention"]
f_lin = (linear or {}).get("flops_per_step") or 0.0
square = {"full": "全方阵 s×s，课程的口径",
          "causal": "causal 只数半个方阵，Megatron-LM 的口径"}[att["attention_flops"]]
if sc.lengths is None:
    actual_text = f"平均长度 {d.count(sc.mean_tokens_per_sample)}，Σs² 取 B·s̄²"
elif sc.lengths.exact_step:
    actual_text = "长度文件里这一步的真实长度，Σs_i²"
else:
    actual_text = "长度文件的分布，Σs_i² 取均方长度 × 每步样本数"
g_with_attention = 1.0  # no pad: the attention core is the same before and after packing
if padded:
    before = (acc["model_flops_per_step"] + f_lin) * g_pack + att["padded"]["flops_per_step"]
    after_packing = acc["model_flops_per_step"] + f_lin + att["actual"]["flops_per_step"]
    g_with_attention = before / after_packing

# %% [markdown] tags=["solution"]
# {% if padded %}
# 若耗时正比于“权重矩阵乘 FLOPs（6ND）+ 注意力核 FLOPs{% if f_lin %} + 线性注意力核 FLOPs{% endif %}”，注意力按{{ square }}，模型 FLOPs 记前向 × 3；packing 前每条序列按 S = {{ sc.seq_len|num }}，packing 后按{{ actual_text }}。这样算，提速是 **{{ g_with_attention|times }}**，而不是只看槽位的 {{ g_pack|times }}。{% if sc.lengths is none %}平均长度会低估 Σs²（第 04 节），所以这个数偏乐观；真实收益介于两者之间，要实测才知道。{% else %}耗时是否真的正比于 FLOPs（注意力 kernel 的效率通常低于大 GEMM），要实测才知道。{% endif %}{% if linear is not none and linear.flops_per_step is none %}模型的 {{ linear.layers }} 层线性注意力缺少头宽，它的核没有计入。{% endif %}
# {% elif packed %}
# 本场景已经在做 packing：注意力本来就按每个样本自己的长度算（Σs_i²），没有 pad 可省，把它放进耗时也还是 {{ g_with_attention|times }}。
# {% else %}
# 本场景没有 pad：每个样本都是满长 S，注意力核在 packing 前后一样，把它放进耗时也还是 {{ g_with_attention|times }}。
# {% endif %}

# %% [markdown] tags=["exercise"]
# ### 练习 2：packing 再加 selective recompute（思考题 2）
#
# 课程接着让两件事一起做：packing，以及把 full recompute 换成 selective recompute。下表是课程给这两项的数和本场景的数，外加 (c) 要用的通信份额；现在的单步耗时见页首的场景行。先不看解答，回答：(a) 两项收益是相乘还是相加？先把单步的计算时间写成几个因子的乘积，看每项改动改的是哪个因子。(b) 合起来单步耗时变成多少？(c) 做完这两项，下一个瓶颈会在哪里？提示：通信时间不随计算缩短，它在一步里的占比会怎么变；再看屋顶线上模型的矩阵乘离 GPU 的平衡点有多远。


# %% tags=["remove-input"]
# f: hardware FLOPs per step (attention core and linear attention included) over 6ND, the
# factor by which a step's work exceeds the model's; selective with the scenario's modules
sel = proj["selective_recompute"]
f_now = sp.Float(sel["hardware_flops_now"] / acc["model_flops_per_step"], 4)
f_sel = sp.Float(sel["hardware_flops_selective"] / acc["model_flops_per_step"], 4)
f_new = min(f_now, f_sel)  # the lever only ever lightens the recompute
g_rc = proj["selective_recompute"]["speedup"]
rc_factor_new = min(acc["recompute_factor"], sel["factor_selective"])  # HFU / MFU after the lever
comm = acc["communication"]
measured = comm["basis"] == "measured"
# an estimate longer than the measured step contradicts it: the lever is none, the share unknown
contradicted = comm["basis"] == "estimated" and comm["exceeds_step"]
# the share of today's step the communication is not hidden in: measured if the scenario gives
# it, else what the overlap rules leave exposed behind the step-time model's compute
# (a measured share goes through the overlap lever, which caps it), at most what the hardware
# FLOPs at the GPU's peak leave of the step
exposed_seconds = acc["time"]["parts"]["communication_exposed"]["seconds"]
now = communication_share_now(acc)  # the same share 08 and 09 judge the course's "under 3%" on
comm_share, capped_comm = now["share"], now["capped"]
basis_short = ("实测" if measured else
               f"估计比一步还长、{clash}，不用，按 0 计" if contradicted else "估计：重叠后暴露在外的部分")

# %% [markdown]
# **练习 2：输入（课程的数与本场景的数并列）**
#
# | 量 | 课程 | 本场景 |
# |---|---|---|
# | packing 的提速 | {{ course.claim("packing_speedup") }} | 你在练习 1 (a) 里算出的 T / T′ |
# | recompute：{{ sc.recompute }} → selective 的提速，按每份 6ND 的硬件 FLOPs 之比（课程的算法） | {{ course.claim("selective_recompute_worked") }} | {{ g_rc|times }}（{{ f_now }} → {{ f_new }}）{% if sel_answer %}；单步耗时模型给本次运行的答案是 {{ sel_answer.gain|times }}{% if not sel_answer.fits %}，而且放不下{% endif %}（第 08 节）{% endif %} |
# | 没被计算掩盖的通信份额 | {{ course.claim("communication_share_course") }} | {{ share(comm_share) }}（{{ basis_short }}） |

# %% [markdown] tags=["solution"]
# #### (a) 相乘还是相加
#
# 单步的计算时间可以写成“算多少个槽位 × 每个槽位硬件要做多少 FLOPs ÷ 实际算力”。packing 改的是第一个因子（B·S → D），recompute 策略改的是第二个（f：每份 6ND 硬件实际要做的 FLOPs，含注意力核心；full 的 f_now → selective 的 f_new）。课程只看 6ND 这一侧，f 就是它的重算系数；本库把注意力核心的重算也算进 f，因为 selective 默认重算的恰是注意力核心。两个因子各自缩小，乘积就按两者之积缩小，所以收益**相乘**。SymPy 直接从这个式子推出来：


# %% tags=["solution"]
slots_symbol, factor_symbol = sp.Symbol(r"\mathrm{slots}"), sp.Symbol("f")
d.eq(r"C(\mathrm{slots}, f)", x.compute_time(slots_symbol, factor_symbol))
d.eq(r"\frac{C(BS,\ f_{now})}{C(D,\ f_{new})}", x.combined_speedup_derived,
     r"g_{\mathrm{pack}} \cdot g_{\mathrm{rc}}")
d.eq(r"g_1 g_2 - \left(1 + (g_1 - 1) + (g_2 - 1)\right)",
     sp.factor(x.combined_multiply - x.combined_add))

# %% tags=["solution"]
g_both = proj["packing_and_selective_recompute"]["speedup"]  # g_pack * g_rc
g_add = float(x.combined_add.subs({x.g_1: g_pack, x.g_2: g_rc}))
d.eq(r"g_{\mathrm{rc}}", sp.Symbol(r"f_{now}") / sp.Symbol(r"f_{new}"),
     rf"\frac{{{sp.latex(f_now)}}}{{{sp.latex(f_new)}}}", f"{decimals(g_rc, 3)}")
combinations_differ = len({d.times(g, 3) for g in (g_pack, g_rc, g_both, g_add)}) > 1

# %% [markdown] tags=["solution"]
# {% if combinations_differ %}
# **练习 2 (a)：两项提速怎么合**
#
# | 组合 | 提速 |
# |---|---|
# | packing | {{ g_pack|times(3) }} |
# | selective recompute | {{ g_rc|times(3) }} |
# | 相乘（正确） | {{ g_both|times(3) }} |
# | 相加（错误） | {{ g_add|times(3) }} |
# {% else %}
# 本场景两项都是 {{ g_pack|times(3) }}，相乘、相加也都是 {{ g_pack|times(3) }}：两项都没有收益，组合方式无从区分。
# {% endif %}
#
# {% if sc.recompute == "full" %}本场景是 full recompute（f = {{ f_now }}）；腾出显存后换成 selective（重算 {% for module in sel.modules %}{{ module|code }}{% if not loop.last %}、{% endif %}{% endfor %}{% if sc.recompute_modules is none %}，Megatron-LM 的默认集合；设置 `recompute_modules` 可改{% else %}，场景的 `recompute_modules`{% endif %}；f = {{ f_sel }}），提速 {{ g_rc|times }}。{% elif sc.recompute == "selective" %}本场景已经是 selective recompute（f = {{ f_now }}），换成 selective 没有新的收益：这一项是 {{ g_rc|times }}，组合后只剩 packing 的收益。{% else %}本场景没有开 recompute（f = {{ f_now }}），换成 selective recompute 只会多做运算，不会提速：这一项记为 {{ g_rc|times }}，组合后只剩 packing 的收益。{% endif %}{% if g_rc > 1 and g_pack > 1 %}两者相乘得 **{{ g_both|times }}**；把收益相加（1 + {{ (g_pack - 1)|decimals(2) }} + {{ (g_rc - 1)|decimals(2) }}）只有 {{ g_add|times }}，少算的正是两份收益的交叉项 (g₁−1)(g₂−1)：packing 之后剩下的每个槽位，仍然享受 recompute 省下的那部分。{% else %}有一项是 1×，交叉项 (g₁−1)(g₂−1) 为零，相乘与相加都得 {{ g_both|times }}；两项都大于 1 时，相加会少算这个交叉项。{% endif %}相加只在两项改动各自砍掉互不相干的一段时间时才对（比如一项省通信、一项省计算）。

# %% [markdown] tags=["solution"]
# #### (b) 合起来单步多快


# %% tags=["solution"]
t_both = proj["packing_and_selective_recompute"]["step_time"]
mfu_both = proj["packing_and_selective_recompute"]["mfu"]
hfu_both = mfu_both * rc_factor_new  # HFU = MFU x the recompute factor in force
d.eq(r"T''", T / sp.Symbol(r"g_{\mathrm{pack}} g_{\mathrm{rc}}"),
     rf"\frac{{{short(sc.step_time)}\ \mathrm{{s}}}}{{{decimals(g_both, 3)}}}", rf"{decimals(t_both, 1)}\ \mathrm{{s}}")
mem_now = acc["memory"]
mem_sel = gpu_memory(sc, recompute="selective") if sc.recompute == "full" else None

# %% [markdown] tags=["solution"]
# {% if g_both > 1 %}单步从 {{ sc.step_time|short }} s 变成 **{{ t_both|decimals(1) }} s**，MFU 变成 **{{ mfu_both|pct }}**（HFU {{ hfu_both|pct }}），按前面的 {{ current_run_hours|short }} 小时，训练缩到约 **{{ (current_run_hours / g_both)|decimals(1) }} 小时**。{% else %}两项都没有收益：单步仍是 {{ sc.step_time|short }} s，MFU 仍是 {{ mfu_both|pct }}（HFU {{ hfu_both|pct }}），训练仍约 {{ current_run_hours|short }} 小时。{% endif %}{% if g_rc > 1 %}{% if (hfu_both - hfu_pack)|abs <= 1e-9 %}HFU 与只做 packing 时相同（{{ hfu_pack|pct }}）：selective recompute 的提速全部来自少做的重算，硬件的忙碌程度没有变。{% else %}HFU 从只做 packing 时的 {{ hfu_pack|pct }} 变成 {{ hfu_both|pct }}：HFU 只数 6ND 一侧，selective 仍要重做的注意力核心占着时间，却不在 HFU 的分子里。{% endif %}{% endif %}{% if hfu_both > 1 %}HFU 超过 100% 是不可能的：本场景的单步里没有这么多可省的时间，这两项收益至少有一项的前提不成立，或场景的输入需要核对。{% endif %}{% if g_both > 1 %}这里假设整个单步都随之缩短；(c) 去掉这个假设。{% endif %}
#
# {% if mem_sel is not none %}
# {% set where %}负载最重的卡要 {{ mem_sel.total|gb }}，{{ sc.gpu }} 可用 {{ mem_sel.capacity|gb }}；第 08 节细讲{% endset %}
# {% if mem_sel.fits %}这道题默认 selective recompute 做得成。按账里的显存模型，它在本场景**放得下**（{{ where|safe }}）。{% else %}这道题默认 selective recompute 做得成；但按账里的显存模型，它在本场景**放不下**（{{ where|safe }}）：{% if g_pack > 1 %}上面的 {{ g_both|times }} 只是题目的答案，照模型本次运行拿不到其中 selective recompute 的那 {{ g_rc|times }}。{% else %}照模型本次运行拿不到这 {{ g_rc|times }}。{% endif %}{% endif %}{% if not mem_sel.fits and not mem_now.fits %}不过按同一个模型，现在的 full recompute 也放不下（{{ mem_now.total|gb }}）：模型与这次实际在跑的训练对不上，多半是场景里有键与实际设置不同（例如 `attention_kernel`、并行方式），先按第 08 节核对场景，再看这个判断。{% elif mem_now.fits %}现在这套设置放得下：{{ ("framework: " ~ mem_now.settings.framework)|code }}、{{ ("attention_kernel: " ~ mem_now.settings.attention_kernel)|code }}、full recompute、{{ ("cross_entropy: " ~ mem_now.settings.cross_entropy)|code }}，峰值 {{ mem_now.total|gb }}（{{ d.PHASES[mem_now.peak_phase] }}时），可用 {{ mem_now.capacity|gb }}。{% endif %}
# {% endif %}

# %% [markdown] tags=["solution"]
# #### (c) 下一个瓶颈
#
# 两条线索：一是不随计算缩短的那部分时间（主要是没被计算掩盖的通信）占比会怎么变；二是屋顶线（roofline）：模型的矩阵乘在当前 micro batch 下，运算强度与 GPU 的平衡点比如何。
#
# 第一条要用练习 2 表里的通信份额（课程的数在同一张表里）。场景的 `communication_share` 键放团队自己的实测值；不给时，用账里按并行布局和重叠规则估出的、暴露在外的通信（第 08 节）：能藏多少按单步耗时模型预测的计算来定，链路按跑满峰值算，所以它偏乐观，实测可能更多。


# %% [markdown] tags=["solution"]
# {% if contradicted %}
# 按并行布局估出的通信要 {{ seconds(comm.seconds) }}，比{{ step_said }}的一步（{{ sc.step_time|short }} s）还长：{{ clash }}（多半是带宽、`gpus_per_node` 或并行布局与实际不符），这里不用它，通信按 0 计，下面只看计算；把实测值写进 `communication_share` 再算。
# {% else %}
# 本节用的通信份额：**{{ share(comm_share) }}**（{% if measured %}团队实测，场景的 `communication_share`{% else %}按并行布局和重叠规则的估计：暴露在外的 {{ seconds(exposed_seconds) }}，占{{ step_said }}一步的这个比例{% endif %}{% if capped_comm %}，并以 GPU 在峰值下算完这一步后剩下的时间为上限{% endif %}{% if not measured %}；设置 `communication_share` 可改为你的实测值{% endif %}）。
# {% endif %}

# %% tags=["solution"]
d.eq(r"T'", x.step_time_with_fixed_part)
d.eq(r"c'", x.fixed_share_after)
stages = [("现在", 1.0), ("packing", g_pack), ("packing 加 selective recompute", g_both)]
fixed = {label: x.with_fixed_part(sc.step_time, comm_share, g) for label, g in stages}
after = fixed["packing 加 selective recompute"]  # communication held fixed, both levers done

# %% tags=["solution", "remove-input"]
stage_rows = [(label, d.times(g), f"{decimals(sc.step_time / g, 1)} s", f"{decimals(fixed[label]['step_time'], 1)} s",
               d.times(fixed[label]["speedup"]), share(fixed[label]["fixed_share"])) for label, g in stages]
stages_differ = len({row[1:] for row in stage_rows}) > 1  # else three identical rows: one sentence
bound_after = levers.amdahl_bound(after["fixed_share"])  # overlap hiding all of it, after the two
done = ("packing", "selective_recompute", "recompute_off")
others = [a for a in acc["advice"] if a["feasible"] and a["speedup"] > 1 + 1e-9
          and a["lever"] not in (*done, "communication_overlap")]
best_other = max(others, key=lambda a: a["speedup"], default=None)
comm_first = comm_share > 0 and (best_other is None or bound_after >= best_other["speedup"])
no_comm = ("团队实测的暴露通信为 0：通信已全部藏在计算后面" if measured
           else f"按布局估出的通信比一步还长、{clash}，这里按 0 计，通信要先实测" if contradicted
           else "本场景没有集合通信" if comm["share_used"] == 0
           else "按重叠规则，通信全部藏在计算后面，暴露在外的为 0")
comm_seconds = comm_share * sc.step_time  # held fixed while the compute speeds up

# %% [markdown] tags=["solution"]
# {% if stages_differ %}
# **通信固定为今天一步的 {{ share(comm_share) }}（{% if measured %}实测{% else %}估计{% endif %}）**
#
# | 阶段 | 计算提速 | 单步（全部缩短） | 单步（通信不变） | 实际提速 | 通信占比 |
# |---|---|---|---|---|---|
# {% for row in stage_rows %}
# | {{ row[0] }} | {{ row[1] }} | {{ row[2] }} | {{ row[3] }} | {{ row[4] }} | {{ row[5] }} |
# {% endfor %}
# {% else %}
# 本场景 packing 与 selective recompute 都不缩短计算（{{ stage_rows[0][1] }}），三个阶段的单步都是 {{ stage_rows[0][3] }}，通信占比都是 {{ stage_rows[0][5] }}。
# {% endif %}
#
# {% set comm_verdict -%}
# {% if comm_share == 0 %}{{ no_comm }}{% if contradicted %}。{% else %}，它不会成为瓶颈。{% endif %}{% elif best_other is none %}此时把通信完全藏到计算后面最多再快 {{ bound_after|times(3) }}；除此之外没有别的既可行又有收益的杠杆，通信重叠是剩下唯一的一项。{% elif comm_first %}此时把通信完全藏到计算后面最多再快 {{ bound_after|times(3) }}，不短于其余可行杠杆里最长的 {{ best_other.lever|code }}（{{ best_other.speedup|times(3) }}，单步耗时模型预测）：通信重叠是下一个值得做的{% if measured %}。{% else %}（按估计；先实测暴露在外的部分）。{% endif %}{% else %}此时把通信完全藏到计算后面最多再快 {{ bound_after|times(3) }}，短于 {{ best_other.lever|code }}（{{ best_other.speedup|times(3) }}，单步耗时模型预测）：通信还不是下一个瓶颈。{% endif %}
# {%- endset %}
# {% if comm_share == 0 %}{{ comm_verdict|safe }}{% elif g_both > 1 %}通信时间（{{ seconds(comm_seconds) }}，{{ basis_short }}）不随计算缩短：计算提速 {{ g_both|times }} 之后，它的占比从 {{ share(comm_share) }} 升到 **{{ share(after.fixed_share) }}**，{% if after.speedup|times != g_both|times %}实际提速也从 {{ g_both|times }} 降到 {{ after.speedup|times }}（Amdahl 定律）。{% else %}份额不大，实际提速在两位小数上仍是 {{ after.speedup|times }}（Amdahl 定律）。{% endif %}{{ comm_verdict|safe }}{% else %}本场景的两项改动都没有收益，计算时间不变，通信（{{ seconds(comm_seconds) }}，{{ basis_short }}）的占比仍是 {{ share(comm_share) }}。只有计算先被压短，不随之缩短的通信占比才会上升（Amdahl 定律）。{{ comm_verdict|safe }}{% endif %}

# %% tags=["solution", "remove-input"]
d.setup_plots()
speedups = [1 + 0.05 * i for i in range(81)]
shares = [100 * x.with_fixed_part(1.0, comm_share, g)["fixed_share"] for g in speedups]
fig, ax = plt.subplots()
ax.plot(speedups, shares, color="tab:blue", label="fixed communication")
for (label, g), name in zip(stages[1:], ["packing", "packing + selective"]):
    ax.plot([g], [100 * fixed[label]["fixed_share"]], "o", label=name)
ax.set_title("Share of a fixed communication time as compute speeds up")
ax.set_xlabel("compute speedup (x)")
ax.set_ylabel("communication share of the step (%)")
ax.legend(loc="upper left")
plt.show()

# %% [markdown] tags=["solution"]
# 图注：横轴是计算的提速（倍），纵轴是固定的通信时间占一步的百分比。

# %% [markdown] tags=["solution"]
# 第二条线索：屋顶线。一个 (m×k)(k×n) 的矩阵乘读两个输入、写一个输出，运算强度是 FLOPs 除以搬运的字节数；低于 GPU 的平衡点（峰值 ÷ 显存带宽）就受带宽限制，高于它才有机会跑满算力。下表是模型在当前 micro batch 下的全部矩阵乘，与第 06、07、08 节是同一份清单（`costmodel.evaluate.simulate.gemms.model_gemms`）：带权重的每种一行，$m$ 是矩阵乘的行数（稠密层是每个 micro batch 的 token 数，即 micro batch × 序列长度；packing 之后每条序列仍是这么多槽位，只是都装满了真实 token）。最后两行是注意力核 QKᵀ 和 AV（一个头、一条序列，不带权重），它们的强度与 micro batch 无关。
#
# $m$ 变大，强度也只趋向一个由 $k$、$n$ 决定的上限：很窄的 GEMM 加大 micro batch 也跨不过拐点。


# %% tags=["solution"]
gemm_rows = gemms.model_gemms(sc)
balance = acc["machine_balance"]  # peak FLOP/s / memory bandwidth
d.eq(r"AI", roofline.gemm_intensity)
d.eq(r"\lim_{m \to \infty} AI", sp.limit(roofline.gemm_intensity, m, sp.oo))

# %% [markdown] tags=["solution"]
# **micro batch {{ sc.micro_batch }} 时 {{ sc.gpu }} 上的矩阵乘（平衡点 {{ balance|decimals(1) }} FLOP/byte，BF16）**
#
# | 矩阵乘 | m | k | n | 强度（FLOP/byte） | 强度 / 平衡点 | 受限于 | 带权重 | 形状来源 |
# |---|---|---|---|---|---|---|---|---|
# {% for g in gemm_rows %}
# | {{ words.gemm(g) }} | {{ g.m|num }} | {{ g.k|num }} | {{ g.n|num }} | {{ g.intensity|decimals(0) }} | {{ (g.intensity / balance)|decimals(1) }} | {% if g.bound == "compute" %}算力{% else %}带宽{% endif %} | {% if g.weights %}是{% else %}否{% endif %} | {{ words.shape_source(g.source) }} |
# {% endfor %}
# {% if moe %}
#
# 本场景是 MoE（{{ sc.num_experts }} 个专家，每个 token 选 {{ sc.experts_per_token }} 个）：专家 GEMM 的 $m$ 不是整条序列，而是一个 EP 组汇集到每个专家的 token 数，比稠密层的行数少。
# {% endif %}

# %% tags=["solution", "remove-input"]
weight_rows = [g for g in gemm_rows if g["weights"]]
core_rows = [g for g in gemm_rows if not g["weights"]]  # QK^T and AV: no weights
cap = {g["key"]: g["intensity_limit"] for g in weight_rows}  # the list's ceiling, BF16
pushable = [g for g in weight_rows if g["bound"] == "memory" and cap[g["key"]] > balance]
capped = [g for g in weight_rows if g["bound"] == "memory" and cap[g["key"]] <= balance]
below_core = [g for g in core_rows if g["bound"] == "memory"]
compute_rows = [g for g in gemm_rows if g["bound"] == "compute"]
lowest = min(compute_rows, key=lambda g: g["intensity"]) if compute_rows else None
capped_share = (sum(g["forward_flops_per_token"] for g in capped)
                / gemms.weight_flops_per_token(weight_rows))
listed = lambda rows: "、".join(f"“{words.gemm(g)}”" for g in rows)  # noqa: E731
kernels = "专家 GEMM、注意力核" if moe else "注意力核"
core_ai = min((g["intensity"] for g in below_core), default=None)
core_levels = len({round(g["intensity"]) for g in below_core})  # distinct intensities below
att_share = att["actual"]["share"]
lin_share = (linear or {}).get("share")
# the largest weight GEMM kind, as a share of all FLOPs (its part of 6ND)
matmul_share = 1 - att_share - (lin_share or 0)
largest = max(weight_rows, key=lambda g: g["forward_flops_per_token"])
largest_share = (matmul_share * largest["forward_flops_per_token"]
                 / gemms.weight_flops_per_token(weight_rows))
flash = attention_kernels.KIND[sc.attention_kernel] == "flash"  # flash2, flash3, cudnn too

# %% [markdown] tags=["solution"]
# {% set capped_text -%}
# {% if capped %}{% for g in capped %}“{{ words.gemm(g) }}”（{{ cap[g.key]|decimals(0 if cap[g.key] >= 10 else 2) }}）{% if not loop.last %}、{% endif %}{% endfor %}落在拐点左侧，但强度被自身较窄的 k 或 n 封顶（括号里是 m → ∞ 时的上限，都不到平衡点）：加大 micro batch 推不过拐点；{% if capped|length == 1 %}它{% else %}它们{% endif %}只占前向权重 FLOPs 的{% if capped_share >= 1e-4 %} {{ capped_share|pct }}{% else %}不到 0.01%{% endif %}。{% endif %}
# {%- endset %}
# {{ sc.gpu }} 的平衡点是 {{ balance|decimals(1) }} FLOP/byte；在 micro batch = {{ sc.micro_batch }} 时，{% if not pushable and not below_core and lowest is not none %}{% if capped %}除去下面说的窄 GEMM，{% else %}表中{% endif %}所有矩阵乘都在拐点右侧，最低的“{{ words.gemm(lowest) }}”也有 {{ lowest.intensity|decimals(0) }}，是平衡点的 {{ (lowest.intensity / balance)|decimals(1) }} 倍。{{ capped_text|safe }}也就是说，这些 GEMM 慢不是因为显存带宽：屋顶线只给上限，剩下的差距来自 kernel 自身的效率（{{ kernels }}），以及不产生 FLOPs 的访存型操作（{% if moe %}MoE 的 permute/unpermute、{% endif %}norm、激活函数）。加大 micro batch 在这里主要是让小矩阵乘更“胖”、kernel 更高效，而不是跨过拐点。{% else %}{% if pushable %}{{ listed(pushable)|safe }}落在拐点左侧，受显存带宽限制；它们的 m 随 micro batch 增大，上限（m → ∞）高于平衡点，加大 micro batch 能把它们推过拐点。{% else %}带权重的矩阵乘{% if capped %}除去下面说的窄 GEMM {% endif %}都在拐点右侧，加大 micro batch 不是为了跨过拐点。{% endif %}{{ capped_text|safe }}{% if below_core %}注意力核（{{ listed(below_core)|safe }}）{% if core_levels > 1 %}最低{% endif %}只有 {{ core_ai|decimals(0 if core_ai >= 10 else 2) }} FLOP/byte，在拐点左侧：它的运算强度由 head_dim 决定，与 micro batch 无关，{% if flash %}这是把分数矩阵写回显存的算法；本场景已用 FlashAttention（`attention_kernel: flash`），分数留在片上，这条屋顶线不适用，剩下的是片上开销（softmax、短累加维），要看 kernel 实测。{% else %}要靠 FlashAttention 这类把分数矩阵留在片上的融合 kernel 来提高。{% endif %}{% endif %}{% endif %}{% if core_rows and not below_core %}注意力核两行按“分数矩阵写回显存”计算；FlashAttention 把它留在片上，实际运算强度更高{% if flash %}（本场景的 `attention_kernel` 正是 flash）。{% else %}。{% endif %}{% endif %}另一方面，{% if padded %}packing 之后{% elif packed %}本场景已在 packing，{% endif %}注意力核占全部运算的 **{{ att_share|pct(0) }}**（按{{ actual_text }}；{{ square }}{% if lin_share %}；线性注意力核另占 {{ lin_share|pct(1) }}{% endif %}），而它不在 6ND 里{% if att_share > largest_share %}：它比任何一种带权重的 GEMM 都大，MFU 的提升空间有一部分要靠注意力 kernel 本身。{% else %}；它比最大的一种带权重 GEMM 小，不是这里的大头。{% endif %}

# %% tags=["solution", "remove-input"]
narrow = (f"（窄 GEMM 除外，但{'它' if len(capped) == 1 else '它们'}的 FLOPs 不到 1%）"
          if capped and capped_share < 0.01
          else "（窄 GEMM 除外）" if capped else "")

# %% [markdown] tags=["solution"]
# **(c) 的回答**：{% if comm_share == 0 %}{{ no_comm }}{% elif g_both <= 1 %}计算没有缩短，通信占比不变（{{ share(comm_share) }}，{{ basis_short }}）{% if comm_first %}，通信重叠是下一个值得做的{% else %}，还不是下一个瓶颈{% endif %}{% else %}通信占比 {{ share(comm_share) }} → {{ share(after.fixed_share) }}（{{ basis_short }}），升到原来的 {{ (after.fixed_share / comm_share)|decimals(1) }} 倍，{% if comm_first %}通信重叠是下一个值得做的{% else %}还不是下一个瓶颈{% endif %}{% endif %}；{% if pushable %}部分带权重的 GEMM 受带宽限制，加大 micro batch 是下一步{% elif below_core %}带权重的 GEMM 不受带宽限制{{ narrow }}；按屋顶线落在拐点左侧的是注意力核，{% if flash %}但本场景已用 flash kernel，分数留在片上，它的代价在片上而不在显存带宽{% else %}要靠融合的注意力 kernel{% endif %}{% else %}GEMM 不受带宽限制{{ narrow }}，瓶颈转到 kernel 效率（{{ kernels }}）和访存型操作{% endif %}；{% if att_share > largest_share %}注意力核占全部运算的 {{ att_share|pct(0) }}，比最大的一种带权重 GEMM（{{ largest.name|code }}，约 {{ largest_share|pct(0) }}）还大，是计算里最大的单项{% else %}注意力核占全部运算的 {{ att_share|pct(0) }}，不是最大的单项（{{ largest.name|code }} 约占 {{ largest_share|pct(0) }}）{% endif %}。具体先做哪一项，仍然要先量：profile 一步，看时间花在哪类 kernel 上。

# %% tags=["remove-input"]
# exercise 3's run: this one, or where it has no pad slots (packed, or samples that fill S: packing
# would change nothing, every answer "1.000x") a stated variant with the course's fill (mean length
# / S), padded to S, its step predicted (a measured step of full rows fits no padded batch)
ex_load, ex_sc, ex_acc = overrides, sc, acc
ex_variant = False  # the variant, where it resolves (a step the model cannot predict: the run's)
if not padded:
    from costmodel.inputs import scenario
    course_sc = scenario.resolve(None)
    ex_fill = course_sc.mean_tokens_per_sample / course_sc.seq_len
    variant = {**overrides, "batching": "padded", "sequence_lengths": None, "step_time": None,
               "measured_tokens_per_s": None, "mean_tokens_per_sample": round(sc.seq_len * ex_fill)}
    try:
        ex_sc, ex_acc = d.load(scenario_file, variant)
        ex_load, ex_variant = variant, True
    except CostModelError:
        pass
ex_padded = padded or ex_variant
ex_pad = ex_acc["padding"]

# %% [markdown] tags=["exercise"]
# ### 练习 3：packing 之后，单步耗时模型怎么说？
#
# {% if ex_variant %}本场景{% if packed %}已经在 packing{% else %}的样本都填满 $S$，没有 pad 槽位{% endif %}，改成 `batching: packed` 什么也不变，答案只会是“不变”；这道题改用课程场景的填充率：每个样本平均 {{ ex_sc.mean_tokens_per_sample|num }} 个 token（$S$ 的 {{ ex_fill|pct(1) }}，课程是 {{ course_sc.mean_tokens_per_sample|num }} / {{ course_sc.seq_len|num }}），定长补齐到 $S$ = {{ sc.seq_len|num }}，一步用单步耗时模型的预测（不用实测）。下表和解答都是这个变体的。{% endif %}练习 1 用的是“单步耗时正比于算过的槽位”这条规则。第 08 节的单步耗时模型把一步拆成几部分（带权重的 GEMM、注意力核心、线性注意力、受带宽限制的逐元素工作、重算、暴露在外的通信、流水线气泡），各部分按自己的规律变化。模型对 packing 的预测，第 08 节的杠杆表已经给出（下表最后两行：改后的一步和提速），这里不再问数，问为什么。先不看解答，说明：把场景改成 `batching: packed`，哪几部分随槽位一起缩短，哪几部分不变（提示：注意力核心按真实长度算，优化器更新按参数算）？模型的提速为什么比练习 1 的 $g_{\mathrm{pack}}$ 小（或大）？场景有实测的单步耗时时，再想一想：模型没有解释的那部分时间会不会随 packing 缩短，它让你的答案落在什么范围里？写下预测，再对照解答。


# %% tags=["remove-input"]
t_now = ex_acc["time"]
packing_lever = next((a for a in ex_acc["advice"] if a["lever"] == "packing"), None)  # 08's row
PART_ZH = {"gemms": "带权重的 GEMM", "attention": "注意力核心", "linear_attention": "线性注意力",
           "memory_bound": "受带宽限制的逐元素工作", "kernel_overhead": "kernel 启动的固定开销", "recompute": "重算",
           "communication_exposed": "暴露在外的通信", "pipeline_bubble": "流水线气泡"}
part_names = {name: PART_ZH.get(name, name) for name in t_now["parts"]}

# %% [markdown]
# **练习 3：本次运行一步里单步耗时模型的各部分（`acc["time"]`）**
#
# | 部分 | 现在 |
# |---|---|
# {% for name, part in t_now.parts.items() %}
# | {{ part_names[name] }} | {{ seconds(part.seconds) }} |
# {% endfor %}
# | 预测的一步（合计） | {{ seconds(t_now.predicted_seconds) }} |
# {% if t_now.measured_seconds is not none %}
# | 实测的一步（`step_time`） | {{ seconds(t_now.measured_seconds) }} |
# {% endif %}
# {% if packing_lever is not none %}
# | packing 后预测的一步（第 08 节的杠杆表） | {{ seconds(packing_lever.step_after) }} |
# | packing 的提速（预测的改前 / 改后） | {{ packing_lever.speedup|times(3) }} |
# {% endif %}

# %% tags=["solution"]
try:  # the same scenario re-resolved with packed rows, and its account
    sc_packed, acc_packed = d.load(scenario_file, {**ex_load, "batching": "packed"})
    t_packed = acc_packed["time"]
except CostModelError as error:
    t_packed, refused = None, str(error)
if t_packed is not None:
    g_model = t_now["predicted_seconds"] / t_packed["predicted_seconds"]  # the model's speedup
    d.eq(r"g_{\mathrm{model}}", r"\frac{T_{\mathrm{pred}}}{T'_{\mathrm{pred}}}",
         rf"\frac{{{sig(t_now['predicted_seconds'])}\ \mathrm{{s}}}}{{{sig(t_packed['predicted_seconds'])}\ \mathrm{{s}}}}",
         d.times(g_model, 3))

# %% tags=["solution", "remove-input"]
ex_g_pack = ex_pad["packing_speedup"]  # exercise 1's rule on exercise 3's run
ex_t_pack = ex_pad["step_time_after_packing"]


def ratio(name):
    now, then = t_now["parts"][name]["seconds"], t_packed["parts"][name]["seconds"]
    return now / then if then > 0 else (1.0 if now == 0 else float("inf"))


if t_packed is not None:
    live = [name for name in t_now["parts"] if t_now["parts"][name]["seconds"] > 0]
    slower = [part_names[name] for name in live if ratio(name) < ex_g_pack * (1 - 1e-3)]
    faster = [part_names[name] for name in live if ratio(name) > ex_g_pack * (1 + 1e-3)]
    unexplained = t_now["unexplained_seconds"]
    if ex_padded and unexplained is not None and unexplained >= 0:
        low_t = t_now["measured_seconds"] / g_model  # the unexplained part shrinks like the rest
        high_t = t_packed["predicted_seconds"] + unexplained  # it does not shrink at all

# %% [markdown] tags=["solution"]
# {% if t_packed is none %}
# 本场景改成 `batching: packed` 后不是一个有效的场景（{{ refused }}），这道题在这里无从算起。
# {% else %}
# **packing 前后的单步耗时模型（槽位之比 g_pack = {{ ex_g_pack|times(3) }}）**
#
# | 部分 | 现在 | packing 后 | 现在 / packing 后 |
# |---|---|---|---|
# {% for name in t_now.parts %}
# | {{ part_names[name] }} | {{ seconds(t_now.parts[name].seconds) }} | {{ seconds(t_packed.parts[name].seconds) }} | {% if t_packed.parts[name].seconds > 0 %}{{ ratio(name)|times(3) }}{% else %}-{% endif %} |
# {% endfor %}
# | 预测的一步 | {{ seconds(t_now.predicted_seconds) }} | {{ seconds(t_packed.predicted_seconds) }} | {{ g_model|times(3) }} |
#
# 按练习 1 的规则，packing 的提速是槽位之比 $g_{\mathrm{pack}}$ = {{ ex_g_pack|times(3) }}。{% if (g_model - 1)|abs <= 1e-3 %}单步耗时模型预测的一步改前改后都是 {{ seconds(t_now.predicted_seconds) }}。{% else %}单步耗时模型重新预测：改前 {{ seconds(t_now.predicted_seconds) }}，改后 {{ seconds(t_packed.predicted_seconds) }}，提速 **{{ g_model|times(3) }}**。{% endif %}{% if not ex_padded %}本场景{% if packed %}已经在 packing{% else %}的平均真实长度等于配置长度，没有 pad 槽位{% endif %}：改成 `batching: packed` 不减少要算的槽位，没有 pad 可省{% if (g_model - 1)|abs <= 1e-3 %}。{% else %}；模型的一步仍有变化，那不是来自 pad。{% endif %}{% elif (g_model / ex_g_pack - 1)|abs <= 1e-3 %}两者相同：按模型，这一步的每一部分都随槽位同比例缩短。{% else %}模型的提速比槽位之比{% if g_model < ex_g_pack %}小{% else %}大{% endif %}。{% if slower %}{{ slower|join("、") }}缩短得比槽位少，或者不变：它们全部或一部分不随 pad 槽位增减，packing 省不掉那一部分。{% endif %}{% if faster %}{{ faster|join("、") }}缩短得比槽位还多。{% endif %}{% endif %}{% if not ex_padded %}{% elif unexplained is none %}{% if not ex_variant %}本场景的一步本来就是预测的（`step_time` 为 null）{% else %}这个变体的一步是预测的{% endif %}，没有实测可以对照；量到实际的单步耗时后再做这道题，就能看出练习 1 的规则和模型差在哪里。{% elif unexplained >= 0 %}实测的一步里有 {{ seconds(unexplained) }} 是模型没有解释的（{{ t_now.unexplained_share|pct(1) }}）。它若和模型的各部分同比例变化，packing 后一步约 **{{ seconds(low_t) }}**；若它完全不随 packing 变，约 {{ seconds(high_t) }}{% if packing_lever is not none %}（上表里第 08 节杠杆表的那一步）{% endif %}。{% if not ex_variant %}练习 1 的答案是{% else %}按练习 1 的规则是{% endif %} {{ seconds(ex_t_pack) }}{% if low_t - 1e-9 <= ex_t_pack <= high_t + 1e-9 %}，落在这个范围里。{% elif ex_t_pack < low_t %}，比这个范围还短：它假设整步（连同没有解释的部分）都按槽位缩短，比模型乐观。{% else %}，比这个范围还长。{% endif %}哪一种更接近真实，只有量了 packing 之后的单步耗时才知道。{% else %}注意：实测的一步比模型预测的还短 {{ seconds(-unexplained) }}，模型预测的一步比实测的长（第 08 节），先核对场景和效率参数，再拿模型的提速去推算实测的单步耗时。{% endif %}
# {% endif %}

# %% [markdown] tags=["solution"]
# ## 本次运行：剩下的杠杆怎么排
#
# 账里按本次运行排好了每个杠杆（`acc["advice"]`，与第 08 节同一份）：按本场景算出的提速、是否可行（显存放得下、batch 能整除）、依赖哪些场景键。去掉练习 2 已经做的两项（recompute 的两个杠杆只取其一），剩下的按提速排如下；每个提速都是把改动放进场景、用单步耗时模型重新预测的比值（改前 / 改后），带 * 的键用的是课程的假设值。


# %% tags=["solution", "remove-input"]
def star(key):
    """A key as the table shows it, a code span: * when its value is the course's assumption."""
    if source.get(key) == "course":
        return f"`{key}`*"
    return f"`{key}`" + ("（估计）" if key == "communication_share" and source.get(key) == "derived" else "")


rest = [a for a in acc["advice"] if a["lever"] not in done]
combined = acc["advice_combined"]
plan = "、".join(f"`{name}`" for name in combined["levers"])
in_plan = [name for name in ("packing", "selective_recompute") if name in combined["levers"]]
leaning = sorted({key for name in combined["levers"] for key in by_lever[name]["rests_on"]
                  if source.get(key) == "course"})

# %% [markdown] tags=["solution"]
# **本次运行的其余杠杆，按提速排序（`acc["advice"]`）**
#
# | 杠杆 | 提速（预测的改前 / 改后） | 可行 | 依据（* 为课程的假设值） | 说明 |
# |---|---|---|---|---|
# {% for a in rest %}
# | {{ a.lever|code }} | {{ a.speedup|times(3) }} | {% if a.feasible %}是{% else %}否{% endif %} | {% for key in a.rests_on %}{{ star(key)|safe }}{% if not loop.last %}、{% endif %}{% endfor %} | {{ advice_note(a)|safe }} |
# {% endfor %}
#
# {% if combined.levers %}本次运行实际可行、能一起做的杠杆是 {{ plan|safe }}：一起放进场景、重新预测，预测的一步快 **{{ combined.speedup|times }}**，每步 {{ sc.step_time|short }} s → {{ combined.step_time|decimals(1) }} s（`acc["advice_combined"]`{% if combined.step_time_from == "measured - saved" %}；实测的一步减去预测省下的秒数，模型没有解释的部分原样留着{% endif %}）。{% if combined.get("capped") %}一起预测是 {{ combined.product|times }}，账里把合计封顶：再快，GPU 就要超过峰值算力{% if combined.ceiling_from == "hfu_with_attention" %}（按今天的硬件 FLOPs，含注意力）。{% else %}（按今天 6ND 的硬件 FLOPs；含注意力的计数比峰值下一步能做的还多，与单步耗时矛盾，不用它）。{% endif %}{% endif %}{% if in_plan|length == 2 %}它包含练习 2 的两项。{% elif in_plan %}它包含练习 2 里的 {% for name in in_plan %}{{ name|code }}{% if not loop.last %}、{% endif %}{% endfor %}，不含另一项（不可行或没有收益）。{% else %}练习 2 的两项都不在其中（不可行或没有收益）。{% endif %}{% else %}本次运行没有一个杠杆既可行又有收益。{% endif %}{% if leaning %}其中的提速依赖课程的假设值 {% for key in leaning %}{{ key|code }}{% if not loop.last %}、{% endif %}{% endfor %}：设置{% if leaning|length == 1 %}这个键{% else %}这些键{% endif %}可改为你的实测值。{% endif %}

# %% [markdown] tags=["solution"]
# ## 课程怎么说，本页算出什么
#
# 两道思考题的答案课程没有写出来，但它的正文已经给了答案要用的数（06.4 的 packing、06.8 的 selective recompute 和通信份额），题目本身也暗示了答案的方向（收益怎么合、瓶颈往哪里移）。下表把这些说法逐条与本页按场景算出的数对照。


# %% tags=["solution", "remove-input"]
judge = partial(d.judge, own=own)
quoted = course.figures()
no_pad = ("已经在 packing（batching: packed），没有 pad 可省" if packed else
          "平均长度等于配置长度，没有 pad 可省" if not padded else "")
course_product = course.number(quoted["packing_speedup"]["text"]) * course.number(
    quoted["selective_recompute_worked"]["text"])
sel_fits = mem_sel is None or mem_sel["fits"]
both_gain = g_pack > 1 and g_rc > 1
course_comm = quoted["communication_share_course"]["text"]
comm_small = None if contradicted else comm_share < course.number(course_comm)
comm_rises = g_both > 1 and comm_share > 0
next_holds = comm_first or bool(pushable)
assumed = [key for key in (best_other or {}).get("rests_on", ()) if source.get(key) == "course"]

# %% [markdown] tags=["solution"]
# {% macro word(holds) %}{% if holds is none %}无从判断{% elif holds %}成立{% else %}有出入{% endif %}{% endmacro %}
# {% set whose %}{% if own %}你的场景{% else %}本场景{% endif %}{% endset %}
# {% set differs_step %}{% if no_pad %}{{ no_pad }}{% else %}{{ pack_why }}；按课程的算法（单步随槽位等比例缩短）是 {{ t_pack|decimals(1) }} s{% endif %}{% endset %}
# {% set note_step %}{% if no_pad and course.agrees(sc.step_time, "nb04_step_after_packing") %}；{{ no_pad }}，这就是它现在的单步{% endif %}{% endset %}
# {% set differs_mfu %}{% if no_pad %}{{ no_pad }}{% else %}MFU {{ acc.mfu|pct }} 乘以提速 {{ pack.gain|times }}（{{ pack_why }}）{% endif %}{% endset %}
# {% set note_mfu %}{% if pack and pack.mfu > 1 %}；超过 100%，不可能：先核对是否真在补齐{% elif no_pad and course.agrees(acc.mfu, "nb04_mfu_after_packing") %}；{{ no_pad }}，这就是它现在的 MFU{% endif %}{% endset %}
# {% set differs_pack %}{% if no_pad %}{{ no_pad }}{% else %}{{ pack_why }}；课程的 {{ g_pack|times }} 是槽位与真实 token 之比，{{ pad.slots|num }} ÷ {{ sc.tokens_per_step|count }}{% endif %}{% endset %}
# {% set differs_rc %}{% if sc.recompute == "full" %}full 与 selective 每份 6ND 的硬件 FLOPs（含注意力核心）之比，{{ f_now }} ÷ {{ f_sel }}；课程按它假设的系数 {{ course.claim("nb02_selective_factor") }}只算 6ND 这一侧{% elif sc.recompute == "selective" %}已经是 selective recompute（f = {{ f_now }}），没有可换的{% else %}现在不重算，换成 selective 只会多算，不会提速{% endif %}{% endset %}
# {% set fit_note %}{% if not sel_fits %}；但按账里的显存模型，selective recompute 在{{ whose }}放不下{% if not mem_now.fits %}（现在的 full recompute 按模型也放不下，先核对场景）{% endif %}{% endif %}{% endset %}
# {% set comm_then %}{% if comm_rises %}通信占比升到 {{ share(after.fixed_share) }}{% else %}通信占比仍是 {{ share(comm_share) }}{% endif %}{% endset %}
# {% set why_next %}{% if next_holds %}{% if comm_first %}{{ comm_then }}，全藏到计算后面最多再快 {{ bound_after|times(3) }}，不短于其余可行杠杆：通信重叠是下一步{% endif %}{% if comm_first and pushable %}；{% endif %}{% if pushable %}{{ pushable|map(attribute="name")|join("、") }} 在 micro batch = {{ sc.micro_batch }} 时受带宽限制，加大 micro batch 能推过拐点{% endif %}{% elif best_other is none %}按{{ whose }}，{{ no_comm }}，带权重的 GEMM 都在拐点右侧{{ narrow }}，也没有别的可行杠杆{% else %}按{{ whose }}，{% if comm_share > 0 %}{{ comm_then }}，全藏起来最多再快 {{ bound_after|times(3) }}，短于 {{ best_other.lever }} 的 {{ best_other.speedup|times(3) }}{% else %}{{ no_comm }}{% endif %}；屋顶线上带权重的 GEMM 都在拐点右侧{{ narrow }}，加大 micro batch 跨不了拐点：剩下最长的可行杠杆是 {{ best_other.lever }}{% if best_other.lever == "attention_kernel" and att_share > largest_share %}（注意力核占全部运算的 {{ att_share|pct(0) }}，是最大的单项）{% endif %}{% if below_core and flash %}，不在通信；按屋顶线落在拐点左侧的只有注意力核（按分数写回显存算），本场景已用 flash kernel，它的代价在片上{% elif below_core %}，不在通信；按屋顶线落在拐点左侧的只有注意力核，要靠融合的注意力 kernel{% else %}，不在通信或显存带宽{% endif %}{% if assumed %}；它的提速依赖课程的假设 {{ assumed|join("、") }}{% endif %}{% endif %}{% endset %}
# **课程怎么说 / 本页算出 / 出入**{% if own %}（本页按你的场景计算：中间一列是你的数字，与课程的说法对照）{% endif %}
#
# | 课程怎么说 | 本页算出 | 出入 |
# |---|---|---|
# | 思考题 1 (a)：完美 packing 后的单步耗时，{{ course.claim("nb04_step_after_packing") }} | {% if pack %}{{ sc.step_time|short }} s → {{ pack.step_time|decimals(1) }} s（单步耗时模型）{% else %}{{ sc.step_time|short }} s（不变）{% endif %} | {% if pack %}{{ judge("nb04_step_after_packing", pack.step_time, pack.step_time|decimals(1) ~ " s", differs_step, note_step)|safe }}{% else %}{{ judge("nb04_step_after_packing", sc.step_time, sc.step_time|decimals(1) ~ " s", differs_step, note_step)|safe }}{% endif %} |
# | 思考题 1 (c)：packing 后的 MFU（6ND 口径），{{ course.claim("nb04_mfu_after_packing") }} | {% if pack %}{{ acc.mfu|pct }} → {{ pack.mfu|pct }}（单步耗时模型）{% else %}{{ acc.mfu|pct }}（不变）{% endif %} | {% if pack %}{{ judge("nb04_mfu_after_packing", pack.mfu, pack.mfu|pct, differs_mfu, note_mfu)|safe }}{% else %}{{ judge("nb04_mfu_after_packing", acc.mfu, acc.mfu|pct, differs_mfu, note_mfu)|safe }}{% endif %} |
# | 思考题 1 (d)：{{ course_epochs }} 个 epoch 的训练现在要跑{{ course.claim("nb10_overnight") }}，packing 后按单步等比缩短 | {% if padded %}{{ current_run_hours|short }} h → {{ run.hours_after|decimals(1) }} h{% else %}{{ current_run_hours|short }} h（不变）{% endif %} | {{ word(padded) }}：{% if padded %}步数不变，墙钟时间与单步一样缩短 {{ g_pack|times }}{% else %}{{ no_pad }}，单步不变，时长也不变{% endif %}；课程没有给小时数，{{ current_run_hours|short }} h 是 training_hours{% if source.get("training_hours") == "course" %}（课程的假设值）{% else %}（你的场景的值）{% endif %} |
# | 思考题 2：packing 的收益，{{ course.claim("packing_speedup") }} | {% if pack %}{{ pack.gain|times }}（单步耗时模型）{% else %}{{ g_pack|times }}{% endif %} | {% if pack %}{{ judge("packing_speedup", pack.gain, pack.gain|times, differs_pack)|safe }}{% else %}{{ judge("packing_speedup", g_pack, g_pack|times, differs_pack)|safe }}{% endif %} |
# | 思考题 2：full 换成 selective recompute 的收益，{{ course.claim("selective_recompute_worked") }} | {% if sel_answer %}{{ sel_answer.gain|times }}（单步耗时模型）{% if not sel_answer.fits %}，显存放不下{% endif %}{% else %}{{ g_rc|times }}{% endif %} | {% if sel_answer %}{{ judge("selective_recompute_worked", sel_answer.gain, sel_answer.gain|times, sel_why)|safe }}{% else %}{{ judge("selective_recompute_worked", g_rc, g_rc|times, differs_rc, fit_note)|safe }}{% endif %} |
# | 思考题 2 (a)：{{ course.claim("nb10_combined_gains") }}，两项收益相乘 | {{ g_pack|times }} × {{ g_rc|times }} = {{ g_both|times }}（相加得 {{ g_add|times }}） | 成立：单步计算时间 = 槽位 × 每槽位的 FLOPs ÷ 算力，packing 改槽位、recompute 改系数，SymPy 推出两者的比值正是乘积；{% if both_gain %}相加少算了交叉项 (g₁−1)(g₂−1){% else %}{{ whose }}有一项是 1×，相乘与相加相同，两项都大于 1 时相加才会少算交叉项{% endif %}。课程的两个数相乘约 {{ course_product|times }}{% if own %}，你的场景是 {{ g_both|times }}{% endif %} |
# | 通信只占一步的不到 {{ course.claim("communication_share_course") }} | 今天 {{ share(comm_share) }}（{{ basis_short }}）{% if comm_rises %}，做完两项后 {{ share(after.fixed_share) }}{% endif %} | {{ word(comm_small) }}：{% if own %}课程的 {{ course_comm }} 是课程那次训练的实测；你的场景{% else %}本页算出{% endif %}今天是 {{ share(comm_share) }}（{{ basis_short }}），{% if contradicted %}与它比不了{% elif comm_small %}不到 {{ course_comm }}{% else %}超过 {{ course_comm }}{% endif %}{% if comm_rises %}；做完两项后升到 {{ share(after.fixed_share) }}{% endif %} |
# | 思考题 2 (c) 的提示：做完两项后，下一个瓶颈到这两处去找：{{ course.claim("nb10_next_bottleneck") }} | 剩下最长的可行杠杆：{% if best_other %}{{ best_other.lever }} {{ best_other.speedup|times(3) }}{% else %}无{% endif %}{% if comm_share > 0 %}；通信全藏最多再快 {{ bound_after|times(3) }}{% else %}；没有暴露的通信{% endif %}；受带宽限制、能被 micro batch 推过拐点的带权重 GEMM：{% if pushable %}{{ pushable|map(attribute="name")|join("、") }}{% else %}无{% endif %} | {{ word(next_holds) }}：{{ why_next|safe }} |

# %% [markdown] tags=["solution"]
# ## 本节要点
#
# - {% if padded %}完美 packing：{{ g_pack|times }}，单步 {{ sc.step_time|short }} s → {{ t_pack|decimals(1) }} s，吞吐 {{ tok_pack|num }} tok/s，MFU {{ acc.mfu|pct }} → {{ pad.mfu_after_packing|pct }}{% if hfu_pack > 1 %}（HFU 会超过 100%，不可能：补齐的前提站不住，见上文）{% endif %}。{% else %}完美 packing：本场景{% if packed %}已在 packing{% else %}没有 pad{% endif %}，{{ g_pack|times }}，单步仍是 {{ sc.step_time|short }} s。{% endif %}
# - 训练现在跑 {{ current_run_hours|short }} 小时（{{ origin("training_hours")|safe }}）{% if padded %}，packing 后约 {{ run.hours_after|decimals(1) }} 小时{% else %}，packing 不改变它{% endif %}{% if g_both > g_pack %}，两项都做约 {{ (current_run_hours / g_both)|decimals(1) }} 小时。{% else %}。{% endif %}
# - packing × selective recompute = {{ g_pack|times }} × {{ g_rc|times }} = **{{ g_both|times }}**（相加得 {{ g_add|times }}），单步 {{ t_both|decimals(1) }} s，MFU {{ mfu_both|pct }}{% if hfu_both > 1 %}（HFU 会超过 100%，不可能，见上文）{% endif %}{% if not sel_fits %}；但按显存模型 selective recompute 在本场景放不下{% if not mem_now.fits %}（现在的设置按模型也放不下，先核对场景）{% endif %}{% endif %}。
# - {% if comm_share == 0 %}{{ no_comm }}。{% elif g_both > 1 %}固定 {{ share(comm_share) }} 的通信（{{ basis_short }}）在两项提速后占 {{ share(after.fixed_share) }}，实际提速 {{ after.speedup|times }}；{% if comm_first %}通信重叠是下一个值得做的。{% else %}通信还不是下一个瓶颈。{% endif %}{% else %}计算没有提速，通信占比仍是 {{ share(comm_share) }}（{{ basis_short }}）；{% if comm_first %}通信重叠是下一个值得做的。{% else %}通信还不是下一个瓶颈。{% endif %}{% endif %}
# - {% if combined.levers %}本次运行可行的杠杆（{{ plan|safe }}）合计 {{ combined.speedup|times }}{% if combined.get("capped") %}（一起预测后封顶于峰值算力）{% endif %}，每步 {{ combined.step_time|decimals(1) }} s。{% else %}本次运行没有既可行又有收益的杠杆。{% endif %}
# - {{ sc.gpu }} 平衡点 {{ balance|decimals(1) }} FLOP/byte；{% if lowest %}算力受限的 GEMM 里强度最低的是“{{ words.gemm(lowest) }}”，{{ lowest.intensity|decimals(0) }} FLOP/byte{% else %}没有算力受限的 GEMM{% endif %}{% if pushable or capped %}；受带宽限制的带权重 GEMM：{{ listed(pushable + capped)|safe }}{% endif %}{% if below_core %}；注意力核（{{ listed(below_core)|safe }}）按分数矩阵写回显存算低于平衡点{% if flash %}，但本场景用 flash kernel，分数留在片上，不受显存带宽限制{% endif %}{% endif %}{% if not (pushable or capped or below_core) %}；没有受带宽限制的 GEMM{% endif %}。
