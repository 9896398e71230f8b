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
# 说"GPU 利用率是多少"之前，先要讲清楚分子数的是哪些运算。本节把两个最常见的指标拆开：
# MFU 只数模型在数学上非做不可的运算，HFU 数的是硬件实际执行的运算。两者分母相同，
# 差别全在分子上，而这点差别恰好是很多"我的 MFU 是多少"的讨论对不上号的原因。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %%
import sympy as sp

from costmodel.present import display as d
from costmodel.derive import utilization as u
from costmodel.derive.flops import model_flops
from costmodel.derive.recompute import factor as policy_factor
from costmodel.derive.symbols import T

sc, acc = d.load(scenario_file, overrides)
d.md(f"场景：**{d.text(sc['name'])}**（{sc['num_gpus']} × {sc['gpu']}，每步 {d.num(sc['step_time'], 1)} 秒，"
     f"recompute = `{sc['recompute']}`）。下面的每个数字都按这个场景现算。")

# %% [markdown]
# ## 1. MFU：只数"必需"的运算
#
# MFU（Model FLOPs Utilization）的分子是模型 FLOPs：给定参数量 N 和这一步处理的真实 token 数 D，
# 前向加反向在数学上必须完成的乘加次数，按 6ND 的口径计（推导见 02）。分母是同一段墙钟时间里，
# 整个集群按稠密 BF16 峰值本可以完成的运算量。于是 MFU 回答的问题是：
# **这一步的有效产出，占硬件理论上限的多少**。

# %%
d.eq(r"\mathrm{MFU}", u.mfu)
rows = [
    ("每步真实 token 数 D", d.sci(sc["tokens_per_step"]), "样本数 × 平均真实长度"),
    ("参数量 N（6ND 口径）", d.sci(sc["activated_params"]), "每个 token 经过的矩阵乘参数"),
    ("模型 FLOPs 6ND", d.sci(acc["model_flops_per_step"]), "每步"),
    ("单步耗时 T", f"{d.num(sc['step_time'], 1)} s", "墙钟时间"),
    ("集群峰值 n·P", d.tflops(sc["num_gpus"] * sc["peak_flops"]),
     f"{sc['num_gpus']} × {d.tflops(sc['peak_flops'])}"),
    ("有效算力 6ND / T", d.tflops(acc["achieved_flops_per_s"]),
     f"单卡 {d.tflops(acc['achieved_flops_per_s_per_gpu'], 2)}"),
    ("MFU", d.pct(acc["mfu"]), "有效算力 / 集群峰值"),
]
d.table(rows, ["量", "值", "说明"], "MFU 的分子与分母（本场景）")

# %% [markdown]
# ## 2. MFU 刻意不数的三样东西
#
# "必需"二字把三类开销挡在了分子之外。它们都真实地消耗了时间，但只会体现为分母里的 T 变长：
#
# 1. **recompute**：为了省显存，反向时把一部分前向再算一遍。这些 FLOPs 硬件确实做了，
#    但模型在数学上并不需要它们。
# 2. **padding**：按定长补齐时，pad 位置上也在做矩阵乘；D 只数真实 token，这些运算不进分子。
# 3. **非计算时间与低效计算**：没有被计算掩盖的通信、数据加载、等待，以及跑不满峰值的算子。
#
# 下面逐项用本场景的数字看一遍。

# %%
extra = acc["hardware_flops_per_step"] - acc["model_flops_per_step"]
if sc["recompute"] == "none":
    d.md("**recompute**：本场景不做重算（`recompute = none`），硬件执行的 FLOPs 与模型 FLOPs 相同，"
         "这一项为零。")
else:
    d.md(f"**recompute**：本场景的策略是 `{sc['recompute']}`，重算系数 "
         f"{acc['recompute_factor']:.4f}。每步硬件实际执行 {d.sci(acc['hardware_flops_per_step'])} "
         f"FLOPs，比模型必需的 {d.sci(acc['model_flops_per_step'])} 多出 {d.sci(extra)}"
         f"（{d.pct(extra / acc['model_flops_per_step'])}）。这笔算力花掉了，MFU 却一分不记。")

# %%
pad = acc["padding"]
pad_slots = pad["slots"] - sc["tokens_per_step"]
if pad_slots <= 0:
    d.md("**padding**：本场景的平均真实长度等于配置长度，定长补齐也不会产生 pad 槽位。")
else:
    d.md(f"**padding**：配置长度 {d.num(sc['seq_len'])}，平均真实长度 "
         f"{d.count(sc['mean_tokens_per_sample'])}。如果每个样本都补齐到配置长度，每步要算 "
         f"{d.num(pad['slots'])} 个槽位，其中真实 token 只有 {d.count(sc['tokens_per_step'])}，"
         f"另外 {d.num(pad_slots)} 个是 pad（占 {d.pct(pad['waste_fraction'])}）。"
         "pad 上的矩阵乘既不进 MFU 也不进 HFU 的分子，只让 T 变长。"
         "是否真的在补齐要去日志里确认（见 04）：若已做 packing，这一项不存在。")

# %% [markdown]
# **非计算时间**最好用"理想步长"来看：如果模型 FLOPs 全部以峰值速度完成，一步需要多久？
# 这个理想时间除以实际步长，恰好就是 MFU；同理，硬件 FLOPs 的理想时间除以实际步长就是 HFU。
# 实际步长里剩下的部分，全是 MFU 和 HFU 都看不见的东西。

# %%
T_ideal = model_flops / u.cluster_peak
assert sp.simplify(T_ideal / T - u.mfu) == 0  # T_ideal = MFU * T, derived
ideal = acc["mfu"] * sc["step_time"]
ideal_hw = acc["hfu"] * sc["step_time"]
rest = sc["step_time"] - ideal_hw
d.eq(r"T_{\mathrm{ideal}}", T_ideal, r"\mathrm{MFU}\cdot T",
     d.num(ideal, 2).replace(",", "{,}") + r"\ \mathrm{s}")
d.md(f"实际一步 {d.num(sc['step_time'], 1)} 秒，其中以峰值折算，模型必需的运算只占 "
     f"{d.num(ideal, 2)} 秒（MFU {d.pct(acc['mfu'])}）；"
     + (f"recompute 再占 {d.num(ideal_hw - ideal, 2)} 秒（到此为 HFU {d.pct(acc['hfu'])}）；"
        if sc["recompute"] != "none" else "")
     + f"其余 {d.num(rest, 1)} 秒（{d.pct(rest / sc['step_time'])}）是通信、数据、等待、"
     "pad 上的运算（若按定长补齐）、6ND 没有计入的注意力核心（见 05），以及各种跑不满峰值的算子。"
     "MFU 不区分这些，只告诉你它们加起来有多大。")

# %%
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
ax.set_xlim(0, sc["step_time"])
ax.set_xlabel("seconds of one optimizer step")
ax.set_title("Where the step time goes, in peak-rate equivalents")
ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncol=1, fontsize=9)
plt.show()

# %% [markdown]
# ## 3. HFU：把重算也算进去
#
# HFU（Hardware FLOPs Utilization）与 MFU 分母相同，分子换成硬件实际执行的 FLOPs，也就是
# 模型 FLOPs 乘上重算系数。重算系数来自 recompute 的调度（推导见 02）：反向期间把前向的比例 r
# 重做一遍。两式一除，HFU 与 MFU 之比只剩这个系数。

# %%
ratio = sp.simplify(u.hfu / u.mfu)
d.eq(r"\mathrm{HFU}", u.hfu)
d.eq(r"\frac{\mathrm{HFU}}{\mathrm{MFU}}", ratio)
full = policy_factor("full")
d.eq(r"\left.\frac{\mathrm{HFU}}{\mathrm{MFU}}\right|_{r=1}", full)
d.eq(r"\left.\frac{\mathrm{HFU} - \mathrm{MFU}}{\mathrm{MFU}}\right|_{r=1}", full - 1,
     d.pct(float(full - 1)))
d.md(f"本场景：recompute = `{sc['recompute']}`，系数 {acc['recompute_factor']:.4f}，"
     f"HFU = {d.pct(acc['mfu'])} × {acc['recompute_factor']:.4f} = **{d.pct(acc['hfu'])}**。")

# %% [markdown]
# ## 4. 为什么两者常被混用，混用差多少
#
# 两个指标名字只差一个字母、分母相同、都叫"利用率"，各家框架日志里打印的又不一定是同一个，所以报数时很容易
# 只写一个百分比而不写口径。它们的差距就是重算系数减一：不重算时为零，全量重算时是上面 SymPy
# 得出的三分之一。也就是说，把 HFU 当 MFU 报，全量重算下会把效率高估三成多。
#
# 更隐蔽的问题是方向。HFU 把重算当作"有用功"，于是**减少重算**这个真正的提速手段在 HFU 上
# 看不出来。下表假设步长与硬件 FLOPs 成正比（与库里其他投影相同的简化），看换成不同策略时
# 两个指标怎么动。

# %%
fraction = sc["selective_recompute_fraction"]
f_now = acc["recompute_factor"]
rows = []
for policy in ("none", "selective", "full"):
    f = float(policy_factor(policy, fraction))
    r_value = {"none": 0.0, "selective": fraction, "full": 1.0}[policy]
    step = sc["step_time"] * f / f_now
    mark = "（本场景）" if policy == sc["recompute"] else ""
    rows.append((f"{policy}{mark}", f"{r_value:g}", f"{f:.4f}", d.pct(f - 1),
                 f"{d.num(step, 1)} s", d.pct(acc["mfu"] * f_now / f), d.pct(acc["hfu"])))
d.table(rows, ["策略", "重算比例 r", "系数", "HFU 比 MFU 高", "投影步长", "MFU", "HFU"],
        "同一个任务换 recompute 策略（步长 ∝ 硬件 FLOPs 的简化假设）")

# %%
f_none = float(policy_factor("none"))
if f_now > f_none:
    d.md(f"按这个假设，本场景关掉重算能把一步从 {d.num(sc['step_time'], 1)} 秒缩到 "
         f"{d.num(sc['step_time'] * f_none / f_now, 1)} 秒，MFU 从 {d.pct(acc['mfu'])} 升到 "
         f"{d.pct(acc['mfu'] * f_now / f_none)}；而 HFU 始终是 {d.pct(acc['hfu'])}。"
         "如果拿改动前的 HFU 对比改动后的 MFU，就会得出\"没有变化\"的错误结论。")
else:
    d.md(f"本场景已经不做重算，MFU 与 HFU 相等（{d.pct(acc['mfu'])}）。但若和一个全量重算的任务"
         f"对比，对方报的 HFU 会比它的 MFU 高 {d.pct(float(full - 1))}，对比前先统一口径。")

# %% [markdown]
# ## 本节要点

# %%
points = [
    f"MFU = 6ND / (T·n·P)：本场景为 **{d.pct(acc['mfu'])}**，相当于一步 "
    f"{d.num(sc['step_time'], 1)} 秒里只有 {d.num(ideal, 2)} 秒在以峰值做模型必需的运算。",
    f"HFU = MFU × 重算系数：本场景 recompute = `{sc['recompute']}`，HFU 为 "
    f"**{d.pct(acc['hfu'])}**"
    + ("，与 MFU 相等" if sc["recompute"] == "none"
       else f"，比 MFU 高 {d.pct(acc['recompute_factor'] - 1)}")
    + (f"（全量重算：系数 {full}，差距 {full - 1}）。" if sc["recompute"] == "full"
       else f"；全量重算时这个差距是 {d.pct(float(full - 1))}。"),
    ("若按定长补齐，" + d.pct(pad["waste_fraction"]) + " 的槽位是 pad，它们既不进 MFU 也不进 HFU。")
    if pad_slots > 0 else "本场景没有 pad 槽位。",
    f"两个指标都看不见的时间共 {d.num(rest, 1)} 秒（{d.pct(rest / sc['step_time'])}）：通信、"
    "数据、等待、pad、注意力核心和低效算子都在里面，要靠测量再拆开。",
    "报利用率时写明口径（MFU 还是 HFU、N 取激活参数、峰值取稠密 BF16），否则数字无法比较。",
]
d.md("\n".join(f"- {p}" for p in points))
