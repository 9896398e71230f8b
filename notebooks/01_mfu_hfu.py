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
# # 01 MFU 与 HFU
#
# 说“GPU 利用率是多少”之前，先要讲清楚分子数的是哪些运算。本节把两个最常见的指标拆开：MFU 只数模型在数学上非做不可的运算，HFU 在此之上再把重算（recompute）数进去。两者分母相同，差别全在分子上，而这点差别恰好是很多“我的 MFU 是多少”的讨论对不上号的原因。

# %% [markdown] tags=["lab-only"]
# **换成自己的场景**：下一个单元格是参数。本节最常改的键是 `step_time`（单步耗时）、`recompute`（none / selective / full）、`activated_params`（6ND 里的 N）和 `total_params`（练习 1 用到）。`scenario_file` 是一个 YAML 场景文件的路径：绝对路径，或相对于仓库根目录的路径（例如 `scenarios/llama-3.1-70b-512xH100.yaml`；在 notebook 所在的文件夹里能找到的相对路径优先）；`overrides` 只改单个键，例如 `{"step_time": 90}`。改完之后重启内核（Restart Kernel）并从头运行全部单元格（Run All）。
#
# 本页各个数的口径（N 怎么数、模型与硬件 FLOPs、注意力项）以及与 Megatron-LM、nanoGPT、torchtitan 等的差别，见 [docs/conventions.md](../docs/conventions.md)。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %% tags=["remove-input"]
import sympy as sp

from costmodel import course
from costmodel.derive import utilization as u
from costmodel.derive.flops import model_flops
from costmodel.derive.recompute import factor as policy_factor
from costmodel.derive.symbols import N, N_total, T, r
from costmodel.present import display as d
from costmodel.present.claims import reported_convention_row

sc, acc = d.load(scenario_file, overrides)

# %% tags=["remove-input"]
from costmodel.derive.recompute import POLICIES  # the policy names, defined there once

# r of this scenario's selective recompute: derived from the modules it redoes (02 explains)
fraction = acc["projections"]["selective_recompute"]["weights_fraction"]
f_now = acc["recompute_factor"]
full = policy_factor("full")
pad = acc["padding"]
pad_slots = pad["slots"] - sc.tokens_per_step
team = bool(sc.changed)
k = sc.total_params / sc.activated_params  # total over activated parameters

# %% [markdown]
# 场景：**{{ sc.name }}**（{{ sc.num_gpus|num }} × {{ sc.gpu }}，每步 {{ sc.step_time|num(1) }} 秒，recompute = {{ sc.recompute|code }}）。下面的每个数字都按这个场景现算。

# %% [markdown]
# ## 1. MFU：只数“必需”的运算
#
# MFU（Model FLOPs Utilization）的分子是模型 FLOPs：给定参数量 N 和这一步处理的真实 token 数 D，前向加反向在数学上必须完成的乘加次数，按 6ND 的口径计（推导见 02）。分母是同一段墙钟时间里，整个集群按稠密 BF16 峰值本可以完成的运算量。于是 MFU 回答的问题是：**这一步的有效产出，占硬件理论上限的多少**。

# %%
d.eq(r"\mathrm{MFU}", u.mfu)

# %% [markdown]
# **MFU 的分子与分母（本场景）**
#
# | 量 | 值 | 说明 |
# |---|---|---|
# | 每步真实 token 数 D | {{ sc.tokens_per_step|sci }} | 样本数 × 平均真实长度 |
# | 参数量 N（6ND 口径） | {{ sc.activated_params|sci }} | 每个 token 经过的矩阵乘参数 |
# | 模型 FLOPs 6ND | {{ acc.model_flops_per_step|sci }} | 每步 |
# | 单步耗时 T | {{ sc.step_time|num(1) }} s | 墙钟时间 |
# | 集群峰值 n·P | {{ (sc.num_gpus * sc.peak_flops)|tflops }} | {{ sc.num_gpus|num }} × {{ sc.peak_flops|tflops }} |
# | 有效算力 6ND / T | {{ acc.achieved_flops_per_s|tflops }} | 单卡 {{ acc.achieved_flops_per_s_per_gpu|tflops(2) }} |
# | MFU | {{ acc.mfu|pct }} | 有效算力 / 集群峰值 |
# | 总参数 total_params | {{ sc.total_params|sci }} | 模型的全部参数（MoE 含所有专家）；不进 6ND |

# %% [markdown] tags=["exercise"]
# ### 练习 1：把总参数当成 N
#
# 上表的 N 是每个 token 实际经过的参数；表的最后一行是模型的总参数。MoE 模型的配置里最显眼的往往是总参数，于是常有人把它直接代进 6ND。**先预测**：其余输入不变、只把 N 换成总参数，MFU 会变成多少？提示：看 MFU 的公式里 N 出现的方式，只用上表的三个数（MFU、N、总参数）就能算出来。然后对照解答核对。

# %% tags=["solution"]
mistake = u.mfu.subs(N, N_total)
d.eq(r"\frac{\mathrm{MFU}(N_{\mathrm{total}})}{\mathrm{MFU}(N)}", sp.simplify(mistake / u.mfu))
d.eq(r"\mathrm{MFU}(N_{\mathrm{total}})", r"\mathrm{MFU}\cdot N_{\mathrm{total}} / N",
     d.pct(acc["mfu_if_total_params"]))

# %% tags=["solution", "remove-input"]
wrong = acc["mfu_if_total_params"]
quoted = course.number(course.figures()["total_params_mistake"]["text"])
same_as_course = not team and d.pct(wrong, 0) == d.pct(quoted, 0)

# %% [markdown] tags=["solution"]
# {% if k > 1 %}
# MFU 与 N 成正比。本场景的总参数 {{ sc.total_params|sci }} 是 N = {{ sc.activated_params|sci }} 的 {{ k|num(2) }} 倍，所以误算的 MFU 也放大同样的倍数：从 {{ acc.mfu|pct }} 变成 **{{ wrong|pct }}**。{% if wrong > 1 %}这已超过 100%，物理上不可能，错误一眼可见。{% else %}它仍在 100% 以内，不会被任何检查拦下；把它当真，就会高估这次运行离硬件上限有多近，以为剩下的优化空间比实际小得多。{% endif %}
# {% else %}
# 本场景的总参数等于 N（{{ sc.activated_params|sci }}），代入哪个都一样，MFU 仍是 **{{ wrong|pct }}**。这个错只在总参数大于 6ND 的 N 时才有代价，典型情形是 MoE：每个 token 只经过少数几个专家，没被选中的专家不做任何乘法。
# {% endif %}
#
# 课程在误读清单里举过同一个错：总参数代进 6ND 得 {{ course.claim("total_params_mistake") }}。{% if same_as_course %}本页按同一算法由场景现算也是这个数。{% elif k > 1 %}那是课程那次运行的数；你的运行误算出的是 {{ wrong|pct }}。{% else %}那是课程那次运行的数；你的场景总参数等于 N，这样算也得 {{ wrong|pct }}，与正确值相同。{% endif %}

# %% [markdown]
# ## 2. MFU 刻意不数的三样东西
#
# “必需”二字把三类开销挡在了分子之外。它们都真实地消耗了时间，但只会体现为分母里的 T 变长：
#
# 1. **recompute**：为了省显存，反向时把一部分前向再算一遍。这些 FLOPs 硬件确实做了，但模型在数学上并不需要它们。
# 2. **padding**：按定长补齐时，pad 位置上也在做矩阵乘；D 只数真实 token，这些运算不进分子。
# 3. **非计算时间与低效计算**：没有被计算掩盖的通信、数据加载、等待，以及跑不满峰值的算子。
#
# 下面逐项用本场景的数字看一遍。

# %% tags=["remove-input"]
extra = acc["hardware_flops_per_step"] - acc["model_flops_per_step"]

# %% [markdown]
# {% if sc.recompute == "none" %}
# **recompute**：本场景不做重算（`recompute = none`），硬件执行的 FLOPs 与模型 FLOPs 相同，这一项为零。
# {% elif extra <= 0 %}
# **recompute**：本场景的策略是 {{ sc.recompute|code }}，重算的模块（{% for m in sc.recompute_modules or [] %}{{ m|code }}{% if not loop.last %}、{% endif %}{% endfor %}）不带权重，6ND 这一侧的重算系数是 1：硬件在权重矩阵乘上没有多做。它重做的是注意力核心（或只是逐元素运算），那部分在 6ND 之外，记在 05 的硬件 FLOPs 上，同样不进 MFU。
# {% else %}
# **recompute**：本场景的策略是 {{ sc.recompute|code }}，重算系数 {{ f_now|decimals(4) }}。每步硬件实际执行 {{ acc.hardware_flops_per_step|sci }} FLOPs，比模型必需的 {{ acc.model_flops_per_step|sci }} 多出 {{ extra|sci }}（{{ (extra / acc.model_flops_per_step)|pct }}）。这笔算力花掉了，MFU 却一分不记。
# {% endif %}
#
# {% if sc.batching == "packed" %}
# **padding**：本场景按 packing 组批（`batching = packed`），样本首尾相接地拼进序列，没有 pad 槽位，这一项为零。如果改成定长补齐，pad 上的运算同样不会进 MFU 的分子（见 04）。
# {% elif pad_slots <= 0 %}
# **padding**：本场景的平均真实长度等于配置长度，定长补齐也不会产生 pad 槽位。
# {% else %}
# **padding**：配置长度 {{ sc.seq_len|num }}，平均真实长度 {{ sc.mean_tokens_per_sample|count }}。如果每个样本都补齐到配置长度，每步要算 {{ pad.slots|num }} 个槽位，其中真实 token 只有 {{ sc.tokens_per_step|count }}，另外 {{ pad_slots|num }} 个是 pad（占 {{ pad.waste_fraction|pct }}）。pad 上的矩阵乘既不进 MFU 也不进 HFU 的分子，只让 T 变长。是否真的在补齐要去日志里确认（见 04）：若已做 packing，这一项不存在。
# {% endif %}

# %% [markdown]
# **非计算时间**最好用“理想单步耗时”来看：如果模型 FLOPs 全部以峰值速度完成，一步需要多久？这个理想时间除以实际单步耗时，恰好就是 MFU；同理，硬件 FLOPs 的理想时间除以实际单步耗时就是 HFU。实际单步耗时里剩下的部分，全是 MFU 和 HFU 都看不见的东西。

# %%
T_ideal = model_flops / u.cluster_peak
assert sp.simplify(T_ideal / T - u.mfu) == 0  # T_ideal = MFU * T, derived
ideal = acc["mfu"] * sc.step_time
ideal_hw = acc["hfu"] * sc.step_time
rest = sc.step_time - ideal_hw
d.eq(r"T_{\mathrm{ideal}}", T_ideal, r"\mathrm{MFU}\cdot T",
     d.num(ideal, 2).replace(",", "{,}") + r"\ \mathrm{s}")

# %% [markdown]
# 实际一步 {{ sc.step_time|num(1) }} 秒，其中以峰值折算，模型必需的运算只占 {{ ideal|num(2) }} 秒（MFU {{ acc.mfu|pct }}）；{% if sc.recompute != "none" %}recompute 再占 {{ (ideal_hw - ideal)|num(2) }} 秒（到此为 HFU {{ acc.hfu|pct }}）；{% endif %}其余 {{ rest|num(1) }} 秒（{{ (rest / sc.step_time)|pct }}）是通信、数据、等待、pad 上的运算（若按定长补齐）、6ND 没有计入的注意力核心（见 05），以及各种跑不满峰值的算子。MFU 不区分这些，只告诉你它们加起来有多大。

# %% tags=["remove-input"]
import matplotlib.pyplot as plt

d.setup_plots()
parts = [("model FLOPs at peak (MFU x T)", ideal, "#2b6cb0"),
         ("recompute at peak ((HFU - MFU) x T)", ideal_hw - ideal, "#dd6b20"),
         ("everything else (1 - HFU) x T", rest, "#a0aec0")]
fig, ax = plt.subplots(figsize=(7.5, 2.6))
left = 0.0
for label, width, color in parts:
    ax.barh(["one step"], [width], left=left, height=0.5, color=color, label=label)
    left += width
ax.set_xlim(0, sc.step_time)
ax.set_xlabel("seconds of one optimizer step")
ax.set_title("Where the step time goes, in peak-rate equivalents")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=1, fontsize=9)
plt.show()

# %% [markdown]
# 图注：横轴是一个优化器步的秒数；纵轴只有一根横条，按图例分成几段，每段是一步里按峰值折算的一部分时间。

# %% [markdown]
# ## 3. HFU：把重算也算进去
#
# HFU（Hardware FLOPs Utilization）与 MFU 分母相同，分子换成“硬件执行的 FLOPs”，按 6ND 的口径就是模型 FLOPs 乘上重算系数。重算系数来自 recompute 的调度（推导见 02）：反向期间把前向的比例 r 重做一遍。两式一除，HFU 与 MFU 之比只剩这个系数。

# %%
ratio = sp.simplify(u.hfu / u.mfu)
d.eq(r"\mathrm{HFU}", u.hfu)
d.eq(r"\frac{\mathrm{HFU}}{\mathrm{MFU}}", ratio)
d.eq(r"\left.\frac{\mathrm{HFU}}{\mathrm{MFU}}\right|_{r=1}", full)
d.eq(r"\left.\frac{\mathrm{HFU} - \mathrm{MFU}}{\mathrm{MFU}}\right|_{r=1}", full - 1,
     d.pct(float(full - 1)))

# %% [markdown]
# 本场景：recompute = {{ sc.recompute|code }}，系数 {{ f_now|decimals(4) }}，HFU = {{ acc.mfu|pct }} × {{ f_now|decimals(4) }} = **{{ acc.hfu|pct }}**。

# %% [markdown]
# 注意“硬件执行的 FLOPs”在这里仍是 6ND 口径下的估计：它只比 MFU 多数了重算，和参数量无关的注意力核心（QKᵀ 与 AV，见 05）、定长补齐时 pad 槽位上的运算，硬件同样执行了，却都不在 HFU 的分子里。所以 HFU 比 MFU 更接近“硬件忙不忙”，但只要有注意力核心或 pad 槽位，它就仍是偏低的读数。

# %% [markdown]
# ## 4. 为什么两者常被混用，混用差多少
#
# 两个指标名字只差一个字母、分母相同、都叫“利用率”，各家框架日志里打印的又不一定是同一个，所以报数时很容易只写一个百分比而不写口径。它们的差距就是重算系数减一：不重算时为零，全量重算时是上面 SymPy 得出的三分之一。也就是说，把 HFU 当 MFU 报，全量重算下会把效率高估三成多。
#
# 更隐蔽的问题是方向。HFU 把重算当作“有用功”，于是**减少重算**这个真正的提速手段在 HFU 上看不出来。下表假设单步耗时与 6ND 口径的硬件 FLOPs 成正比（只看重算系数，注意力核心的重算不算在内；08、09 按 FLOPs 等比的估算把它也算进去；单步耗时模型的预测见 08 的杠杆表），看换成不同策略时两个指标怎么动。其中 selective 的 r 由本场景重算的模块推出（见 02）。

# %% tags=["remove-input"]
rows = []
for policy in POLICIES:
    f = float(policy_factor(policy, fraction))
    r_value = {"none": 0.0, "selective": fraction, "full": 1.0}[policy]
    step = sc.step_time * f / f_now
    mark = "（本场景）" if policy == sc.recompute else ""
    rows.append((f"{policy}{mark}", f"{r_value:g}", f"{f:.4f}", d.pct(f - 1),
                 f"{d.num(step, 1)} s", d.pct(acc["mfu"] * f_now / f), d.pct(acc["hfu"])))
d.table(rows, ["策略", "重算比例 r", "系数", "HFU 比 MFU 高", "按 FLOPs 等比的单步耗时", "MFU", "HFU"],
        "同一个任务换 recompute 策略（单步耗时 ∝ 6ND 口径硬件 FLOPs 的简化假设）")
f_none = float(policy_factor("none"))
course_factor = course.number(course.figures()["nb02_selective_factor"]["text"])  # the course's ~1.1
off_lever = next(a for a in acc["advice"] if a["lever"] == "recompute_off")  # the model's answers
sel_lever = next(a for a in acc["advice"] if a["lever"] == "selective_recompute")

# %% [markdown]
# {% if f_now > f_none %}
# 按这个假设，本场景关掉重算能把一步从 {{ sc.step_time|num(1) }} 秒缩到 {{ (sc.step_time * f_none / f_now)|num(1) }} 秒，MFU 从 {{ acc.mfu|pct }} 升到 {{ (acc.mfu * f_now / f_none)|pct }}；而 HFU 始终是 {{ acc.hfu|pct }}。如果拿改动前的 HFU 对比改动后的 MFU，就会得出“没有变化”的错误结论。表里的单步耗时只是为了说明两个指标怎么动的假设；本次运行换策略后一步多久，全书只取单步耗时模型的答案（08 和报告）：关掉重算 {{ off_lever.step_time|num(1) }} 秒（{{ off_lever.gain|times }}{% if not off_lever.fits %}，显存放不下{% endif %}）{% if sc.recompute == "full" %}，换成 selective {{ sel_lever.step_time|num(1) }} 秒（{{ sel_lever.gain|times }}{% if not sel_lever.fits %}，显存放不下{% endif %}）{% endif %}。
# {% else %}
# {% if sc.recompute == "none" %}本场景已经不做重算{% else %}本场景的重算（{{ sc.recompute|code }}）不重做权重 GEMM，多出的运算只在注意力核心上（见 05）{% endif %}，MFU 与 HFU 相等（{{ acc.mfu|pct }}）。但若和一个全量重算的任务对比，对方报的 HFU 会比它的 MFU 高 {{ (full - 1)|float|pct }}，对比前先统一口径。
# {% endif %}

# %% [markdown]
# ## 5. 课程怎么说，本页算出多少
#
# 下表把课程关于 MFU 与 HFU 定义的说法逐条放在本场景的计算结果旁边。课程的数字说的是它自己那次运行；换成你的场景时，中间一列是你的数字。

# %% tags=["remove-input"]
def against(key, value, digits=2, note=""):
    """Verdict of a course figure against this scenario's value, compared at the course's
    precision (`digits` decimals of a percent)."""
    quoted = course.number(course.figures()[key]["text"])
    same = d.pct(value, digits) == d.pct(quoted, digits)
    if not team:
        return d.verdict(same, "按同一定义由场景现算，与课程一致" if same
                         else f"按同一定义现算为 {d.pct(value)}，与课程不符")
    if same:
        return d.verdict(True, f"你的运行按同一定义算得 {d.pct(value)}，与课程那次运行的相同{note}")
    return d.course_run(d.pct(value) + note)


# %% tags=["remove-input"]
ratio_now = acc["hfu"] / acc["mfu"]
if sc.recompute == "full":
    why_factor = d.verdict(abs(ratio_now - float(full)) < 1e-9,
                           "全量重算把前向整个重做一遍，硬件多做 2ND："
                           f"8ND / 6ND = {full}（第 3 节的 SymPy 结果）")
else:
    why_factor = d.verdict(True, f"公式本身成立（第 3 节 SymPy 在 r = 1 时得 {full}）；"
                           f"你的运行不是全量重算（recompute = {sc.recompute}），系数是 {f_now:.4f}，"
                           + ("HFU 等于 MFU" if f_now == 1 else f"HFU 比 MFU 高 {d.pct(f_now - 1)}"))

hfu_att = acc["attention"]["actual"]["hfu_with_attention"]
unseen = (hfu_att - acc["hfu"]) * sc.step_time * sc.num_gpus * sc.peak_flops
padded = sc.batching == "padded" and pad_slots > 0
sees_all = d.pct(hfu_att) == d.pct(acc["hfu"]) and not padded
why_hw = ("在你的运行里，" if team else "") + (
    "硬件在重算系数 × 6ND 之外几乎没有别的运算：计入注意力核心后 HFU 不变，且没有 pad 槽位"
    if sees_all else
    "HFU 的分子（重算系数 × 6ND，全量重算时即 8ND）只数与参数量成正比的矩阵乘；"
    f"硬件还执行了注意力核心（含线性注意力层，若有；按真实长度每步约 {d.sci(unseen)} FLOPs）"
    + (f"，以及定长补齐时占 {d.pct(pad['waste_fraction'])} 的 pad 槽位" if padded else "")
    + "，这些都不在 HFU 里（见 04、05）")

# %% tags=["remove-input"]
d.claims([
    ("MFU 只数模型必需的 6ND，不含重算、padding 与非计算时间；课程项目为 "
     + course.claim("nb01_mfu"),
     f"{d.pct(acc['mfu'])}（6ND / (T·n·P)）", against("nb01_mfu", acc["mfu"])),
    ("HFU 把重算也数进分子；课程项目为 " + course.claim("nb01_hfu"),
     f"{d.pct(acc['hfu'])}（recompute = {sc.recompute}）", against("nb01_hfu", acc["hfu"])),
    ("全量重算下 HFU = MFU × " + course.claim("nb01_full_recompute_factor"),
     f"HFU / MFU = {ratio_now:.4f}", why_factor),
    ("HFU 的分子是硬件实际执行的运算，全量重算时为 " + course.claim("nb01_hardware_flops"),
     f"HFU {d.pct(acc['hfu'])}；计入注意力核心后 {d.pct(hfu_att)}", d.verdict(sees_all, why_hw)),
    reported_convention_row(acc, sc),  # one verdict with 03's (present/claims.py)
], sc)

# %% [markdown]
# ## 本节要点
#
# - MFU = 6ND / (T·n·P)：本场景为 **{{ acc.mfu|pct }}**，相当于一步 {{ sc.step_time|num(1) }} 秒里只有 {{ ideal|num(2) }} 秒在以峰值做模型必需的运算。
# - HFU = MFU × 重算系数：本场景 recompute = {{ sc.recompute|code }}，HFU 为 **{{ acc.hfu|pct }}**{% if sc.recompute == "none" %}，与 MFU 相等{% else %}，比 MFU 高 {{ (f_now - 1)|pct }}{% endif %}{% if sc.recompute == "full" %}（全量重算：系数 {{ full }}，差距 {{ full - 1 }}）。{% else %}；全量重算时这个差距是 {{ (full - 1)|float|pct }}。{% endif %}
# - {% if pad_slots > 0 %}若按定长补齐，{{ pad.waste_fraction|pct }} 的槽位是 pad，它们既不进 MFU 也不进 HFU。{% else %}本场景没有 pad 槽位。{% endif %}
# - 两个指标都看不见的时间共 {{ rest|num(1) }} 秒（{{ (rest / sc.step_time)|pct }}）：通信、数据、等待、pad、注意力核心和低效算子都在里面，要靠测量再拆开。
# - N 取 6ND 口径的激活参数，不是总参数{% if k > 1 %}：误用总参数的后果见练习 1。{% else %}（本场景两者相等，误用也不改变结果）。{% endif %}
# - 报利用率时写明口径（MFU 还是 HFU、N 取激活参数、峰值取稠密 BF16），否则数字无法比较。

# %% [markdown] tags=["exercise"]
# ### 练习 2：单步耗时不变，只换重算策略
#
# 第 4 节假设关掉重算会让一步变短。现在换一个问法：假设两次运行的 N、D、T 和 GPU 完全相同，只是 recompute 策略不同（none、selective、full 各一次）。**先预测**：三次运行的 MFU 各是多少？HFU 呢？哪一个指标会随策略变化、按什么比例变？写下你的答案，再对照解答。

# %% tags=["solution"]
print("r appears in MFU:", r in u.mfu.free_symbols)
print("r appears in HFU:", r in u.hfu.free_symbols)

# %% tags=["solution", "remove-input"]
rows = []
for policy in POLICIES:
    f = float(policy_factor(policy, fraction))
    mark = "（本场景）" if policy == sc.recompute else ""
    rows.append((f"{policy}{mark}", f"{f:.4f}", d.pct(acc["mfu"]), d.pct(acc["mfu"] * f)))
d.table(rows, ["策略", "系数", "MFU", "HFU"],
        f"T 固定为 {d.num(sc.step_time, 1)} s 时换 recompute 策略")

# %% [markdown] tags=["solution"]
# MFU 的公式里根本没有 r：只要 N、D、T 不变，三种策略的 MFU 都是 {{ acc.mfu|pct }}。HFU 则等于 MFU 乘各自的系数，从不重算时的 {{ acc.mfu|pct }} 到全量重算时的 {{ (acc.mfu * full)|float|pct }}。所以同样快的两次运行，重算多的那次 HFU 反而更高：HFU 的差别只说明硬件多做了重算，不说明它更有效率；比较效率要看 MFU。表里 selective 的系数用的是本场景的 r = {{ fraction|sig(4) }}（由重算的模块推出，见 02）{% if (1 + fraction / 3)|round(2) != course_factor %}，所以不是课程说的约 {{ course.claim("nb02_selective_factor") }}：课程的约数相当于重做三成左右的权重 GEMM，它没说是哪些模块，而 Megatron-LM 默认的 selective 只重算不带权重的注意力核心{% endif %}。
