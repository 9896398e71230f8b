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
# # 09 常见坑：错的算法和对的算法各算一遍
#
# 前面几节把 MFU 的每个组成部分都推导过了。这一节反过来：把常见的算错方式逐条摆出来，
# 每一条都按本场景把"错的"和"对的"各算一遍，再看错了多少。错误的大小取决于场景，
# 所以同一个坑，在 MoE 长序列上可能是一个数量级，在稠密短序列上可能无关紧要。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %%
import math

import sympy as sp

from costmodel.derive import attention
from costmodel.inputs import hardware
from costmodel.inputs.assumptions import assumed
from costmodel.present import display as d
from costmodel.derive import utilization as u
from costmodel.derive.recompute import factor as policy_factor
from costmodel.derive.symbols import B, D, F_lin, N, N_total, P, sum_sq

sc, acc = d.load(scenario_file, overrides)
subs = sc.substitutions()
summary = []  # (pitfall, plot label or None, wrong value, right value)
d.md(f"场景：**{d.text(sc['name'])}**。正确的 MFU（6ND 口径、激活参数、稠密峰值）为 "
     f"**{d.pct(acc['mfu'])}**，下面每个坑都拿它作对照。")

# %% [markdown]
# ## 坑 1：MoE 用总参数代替激活参数
#
# 6ND 里的 N 是每个 token 实际经过的矩阵乘参数。MoE 的配置文件和模型名里最醒目的却是总参数，
# 把它代进去，MFU 就被放大了"总参数 / 激活参数"倍：

# %%
wrong, right = acc["mfu_if_total_params"], acc["mfu"]
d.eq(r"\frac{\mathrm{MFU}(N_{\mathrm{total}})}{\mathrm{MFU}(N)}",
     sp.simplify(u.mfu.subs(N, N_total) / u.mfu), d.num(wrong / right, 2))
if sc["num_experts"] > 0:
    if wrong >= 1:
        verdict = "超过 100%，一眼就能看出不可能"
    elif wrong >= 0.5:
        verdict = "已经过半，看上去离硬件上限不远，很容易让人得出\"没有优化空间\"的结论"
    else:
        verdict = "会让剩下的优化空间显得小得多"
    d.md(f"本场景是 MoE（{sc['num_experts']} 选 {sc['experts_per_token']}）：用总参数 "
         f"{d.sci(sc['total_params'])} 算出 MFU = **{d.pct(wrong)}**，正确值（激活参数 "
         f"{d.sci(sc['activated_params'])}）是 **{d.pct(right)}**，高估 {d.times(wrong / right, 1)}。"
         f"错的数字{verdict}。")
else:
    d.md(f"本场景是稠密模型：总参数与激活参数只差不做矩阵乘的部分，用总参数算出 {d.pct(wrong)}，"
         f"正确值 {d.pct(right)}，"
         + (f"只高估 {d.pct(wrong / right - 1)}。" if wrong > right else "两者相同。")
         + "这个坑主要出在 MoE 上："
         "专家越多、每个 token 选中的越少，总参数与激活参数之比越大，误差就是这个比值。")
summary.append(("N 用总参数", "N = total params", wrong, right))

# %% [markdown]
# ## 坑 2：MFU 和 HFU 混用
#
# HFU 把重算也算作产出，比 MFU 多一个重算系数。两个任务、两份报告，只要一个报 MFU、一个报 HFU，
# 差距就等于系数减一。

# %%
f_now = acc["recompute_factor"]
f_full = policy_factor("full")
f_none = float(policy_factor("none"))
if f_now > f_none:
    d.md(f"本场景 recompute = `{sc['recompute']}`，把 HFU **{d.pct(acc['hfu'])}** 当成 MFU 报，"
         f"比正确的 **{d.pct(acc['mfu'])}** 高 {d.pct(f_now - 1)}"
         + ("（全量重算，差距正是 " + str(f_full - 1) + "）" if sc["recompute"] == "full"
            else f"（全量重算时为 {d.pct(float(f_full - 1))}）")
         + f"。方向也可能反过来：关掉重算后（假设步长与硬件 FLOPs 成正比），"
         f"一步从 {d.num(sc['step_time'], 1)} 秒缩到 {d.num(sc['step_time'] / f_now, 1)} 秒，"
         f"新的 MFU 是 {d.pct(acc['mfu'] * f_now)}，恰好等于改动前的 HFU：用旧 HFU 对比新 MFU，"
         "会把一次真实的提速读成\"没有变化\"。")
else:
    d.md(f"本场景不重算，MFU 与 HFU 相等（{d.pct(acc['mfu'])}），自己报数不会出这个错。但与一个"
         f"全量重算的任务比较时，对方报的 HFU 比它的 MFU 高 {d.pct(float(f_full - 1))}，"
         "要先换算到同一口径。")
summary.append(("HFU 当 MFU 报", "HFU reported as MFU", acc["hfu"], acc["mfu"]))

# %% [markdown]
# ## 坑 3：拿自己的 MFU 和别的设定比
#
# 课程给过一个参照：稠密模型在 H100 上、4K 序列、精调过的配置，6ND 口径的 MFU 典型为 40–50%
# （课程数字）。直接拿它比是不公平的，原因之一是口径本身随序列长度变：6ND 不含注意力核心，
# 而注意力核心在总运算里的占比随序列长度上升。同样的模型、同样的硬件实际吞吐，
# 序列越长，报出的 6ND MFU 就越低。

# %%
REFERENCE_SEQ_LEN = 4096  # the "4K" of the course's dense short-sequence reference


lin = acc["linear_attention"]
lin_per_token = (lin["flops_per_step"] or 0.0) / sc["tokens_per_step"] if lin else 0.0
share_of_one = attention.share(attention.attention_actual)


def attention_share(seq_len):
    """Share of the attention core in all FLOPs for one sequence of seq_len tokens, in the
    scenario's attention_flops count, the linear-attention term included when the model has one."""
    one = {B: 1, D: seq_len, sum_sq: seq_len**2, F_lin: lin_per_token * seq_len}
    return float(share_of_one.subs({**subs, **one}))


share_here = attention_share(sc["mean_tokens_per_sample"])
share_ref = attention_share(REFERENCE_SEQ_LEN)
if sc.lengths is None:  # every sample at the mean length: the account's own reading
    assert math.isclose(share_here, acc["attention"]["actual"]["share"], rel_tol=1e-9)
hw_view = acc["attention"]["actual"]["mfu_with_attention"]
mfu_ref = hw_view * (1 - share_ref)
d.table([(f"本场景均长 {d.count(sc['mean_tokens_per_sample'])}", d.pct(share_here), d.pct(acc["mfu"])),
         (f"参照长度 {d.num(REFERENCE_SEQ_LEN)}", d.pct(share_ref), d.pct(mfu_ref))],
        ["序列长度", "注意力核心占总 FLOPs", "同等硬件吞吐下的 6ND MFU"],
        f"同一模型、计入注意力后利用率同为 {d.pct(hw_view)} 时，6ND MFU 随序列长度的变化")
ref_gpu = hardware.GPUS["H100-SXM"]
gpu_note = (f"卡型与参照相同（都是 {ref_gpu.name}）" if sc["gpu"] == ref_gpu.name else
            f"卡型也不同：{sc['gpu']} 的 machine balance 是 {acc['machine_balance']:.0f} FLOP/byte，"
            f"{ref_gpu.name} 是 {ref_gpu.balance:.0f}")
d.md(f"仅口径一项：同样的硬件吞吐，换到 {d.num(REFERENCE_SEQ_LEN)} 序列会报出 {d.pct(mfu_ref)}，"
     f"是本场景 {d.pct(acc['mfu'])} 的 {d.times(mfu_ref / acc['mfu'])}。"
     f"此外{gpu_note}；模型是否 MoE、micro batch 多大也都会改变 GEMM 的形状（见 06、07）。"
     "比较之前，模型形状、序列长度、卡型和口径都要对齐。")
summary.append((f"与 {d.num(REFERENCE_SEQ_LEN)} 序列的 MFU 直接比", None, acc["mfu"], mfu_ref))

# %% [markdown]
# ## 坑 4：长序列下仍把 6ND 当作全部运算
#
# 这是上一个坑的另一面。短序列时注意力核心（QKᵀ 与 A·V）可以忽略，6ND 是好近似；
# 长序列时它按 s² 增长，把 6ND 口径的 MFU 当作"硬件真实利用率"就会低估。下式把注意力核心
# 加回分子，口径由场景的 `attention_flops` 决定（式中 $a$：课程默认 1，即整块 s×s、
# 训练 3 倍前向；`causal` 时为 1/2，见 05）；混合模型的线性注意力项 $F_{lin}$ 也一并计入：

# %%
d.eq(r"\mathrm{MFU}_{+\mathrm{attn}}", attention.mfu_with_attention(attention.attention_actual))
att = acc["attention"]
rows = [(label, d.count(part["seq_len"]), d.pct(part["share"]), d.pct(acc["mfu"]),
         d.pct(part["mfu_with_attention"]))
        for label, part in (("按平均真实长度", att["actual"]), ("按配置长度（定长 padding）", att["padded"]))]
d.table(rows, ["序列口径", "长度", "注意力占总 FLOPs", "6ND MFU", "计入注意力"],
        f"注意力核心的影响（{att['convention']}）")
d.md(f"按平均真实长度，注意力核心占全部运算的 {d.pct(att['actual']['share'])}：只看 6ND 会把硬件"
     f"实际完成的运算低估这么多，计入后利用率是 {d.pct(att['actual']['mfu_with_attention'])}"
     f"（6ND 口径为 {d.pct(acc['mfu'])}）。"
     + (f"若真在做定长补齐，pad 位置上的注意力也在算，占比升到 {d.pct(att['padded']['share'])}。"
        if sc["seq_len"] > sc["mean_tokens_per_sample"] else "")
     + "这不只是报数问题：注意力占比越高，attention kernel 的效率对总时间的影响就越大。")
summary.append(("只数 6ND，不数注意力核心", None, acc["mfu"],
                att["actual"]["mfu_with_attention"]))

# %% [markdown]
# ## 坑 5：只看 MFU，不看 padding
#
# MFU 的 D 只数真实 token。定长补齐时 GPU 还在 pad 槽位上做运算，这部分既不进 MFU 也不进 HFU，
# 它是一个与 MFU 高低无关的独立问题，而且往往比提高 kernel 效率好修。
# 反过来也有人把槽位数当成 D 来算，得到的 MFU 虚高了"槽位 / 真实 token"倍。

# %%
pad = acc["padding"]
if pad["slots"] > sc["tokens_per_step"]:
    wrong_pad = acc["mfu"] * pad["packing_speedup"]
    d.md(f"本场景每步 {d.num(pad['slots'])} 个槽位、{d.count(sc['tokens_per_step'])} 个真实 token。"
         f"把槽位当 D 算出 MFU = {d.pct(wrong_pad)}，正确值 {d.pct(acc['mfu'])}，"
         f"虚高 {d.times(pad['packing_speedup'])}。若确实在补齐，{d.pct(pad['waste_fraction'])} "
         f"的算力花在 pad 上；完美 packing 能把一步从 {d.num(sc['step_time'], 1)} 秒缩到 "
         f"{d.num(pad['step_time_after_packing'], 1)} 秒，MFU 升到 {d.pct(pad['mfu_after_packing'])}"
         "。先去日志里确认每步实际算了多少 token（见 04）。")
    summary.append(("D 按槽位数（含 pad）算", "D = padded slots", wrong_pad, acc["mfu"]))
else:
    d.md("本场景的平均真实长度等于配置长度，没有 pad 槽位，这个坑不存在。")

# %% [markdown]
# ## 坑 6：先去优化通信
#
# "分布式训练的瓶颈是通信"是一个很强的直觉，但收益上限由通信占步长的比例决定：通信即使完全
# 被掩盖，步长也最多缩短这个比例。本库没有通信模型，下面用的是**课程对它那次运行实测的通信占比
# （约 3%，课程数字）**，不是为本场景算出来的；换成你的任务，要先自己量。

# %%
COURSE_COMM_SHARE = assumed("communication_share")  # the course's measured share, not computed
comm_bound = 1 / (1 - COURSE_COMM_SHARE)
sel = acc["projections"]["selective_recompute"]
levers = [("通信完全掩盖（课程实测占比）", comm_bound, "课程数字，非本场景计算")]
if pad["slots"] > sc["tokens_per_step"]:
    levers.append(("完美 packing（若在定长补齐）", pad["packing_speedup"], "本场景计算"))
if f_now > f_none:
    levers.append(("关闭重算（若显存允许）", f_now / f_none, "本场景计算"))
if sel["speedup"] > 1:
    levers.append((f"{sc['recompute']} → selective 重算", sel["speedup"], "本场景计算"))
d.table([(name, d.times(x), d.pct(1 - 1 / x), note) for name, x, note in levers],
        ["手段", "提速上限", "步长最多缩短", "来源"], "几个手段的收益上限（步长 ∝ 对应工作量的简化假设）")
best_name, best = max(levers[1:], key=lambda item: item[1])[:2] if len(levers) > 1 else (None, 1.0)
if best_name and best > comm_bound:
    d.md(f"按课程的通信占比，把通信优化到极致也只有 {d.times(comm_bound)}；本场景里"
         f"\"{best_name}\"一项就有 {d.times(best)}。原则是先量再改：先确认瓶颈在哪，再排优先级。")
elif best_name:
    d.md(f"按课程的通信占比，把通信优化到极致是 {d.times(comm_bound)}；本场景里最大的一项"
         f"\"{best_name}\"也只有 {d.times(best)}，这些看得见的浪费都不大。下一步该量的是 kernel 效率"
         "和真实的通信占比：先量再改。")
else:
    d.md(f"按课程的通信占比，把通信优化到极致也只有 {d.times(comm_bound)}。本场景没有 pad，"
         "也没有可以去掉的重算，下一步该量的是 kernel 效率和真实的通信占比：先量再改。")

# %% [markdown]
# ## 坑 7：忘了 recompute 是自愿的
#
# 重算是用算力换显存。一旦显存腾出来（例如 fused / chunked cross-entropy 省掉 logits 的大张量，
# 见 08），首先该考虑的就是减少或关掉重算，而不是把它当成固定成本。

# %%
step = sc["step_time"]
if f_now > f_none:
    text = (f"本场景 recompute = `{sc['recompute']}`，系数 {f_now:.4f}。按步长与硬件 FLOPs 成正比"
            f"的假设，关掉重算：{d.num(step, 1)} 秒 → {d.num(step / f_now, 1)} 秒"
            f"（{d.times(f_now)}）")
    if sel["speedup"] > 1:
        text += (f"；改成选择性重算（r = {sc['selective_recompute_fraction']:g}）："
                 f"{d.num(step, 1)} 秒 → {d.num(sel['step_time'], 1)} 秒（{d.times(sel['speedup'])}）")
    d.md(text + f"。每个 micro batch 的 logits（BF16）就占 {d.gb(acc['logits_bytes'])}，它是腾显存的"
         "第一个候选。")
else:
    d.md("本场景已经不做重算，这一项没有可挖的空间。")

# %% [markdown]
# ## 坑 8：用了稀疏峰值
#
# 不少规格表把"带结构化稀疏"的峰值放在最显眼的位置，它是稠密峰值的 2 倍。训练里的矩阵乘是
# 稠密的，MFU 的分母必须用稠密 BF16 峰值；用稀疏峰值，MFU 直接被砍掉一半。

# %%
sparse_ratio = sp.simplify(u.mfu.subs(P, 2 * P) / u.mfu)
d.eq(r"\frac{\mathrm{MFU}(P_{\mathrm{sparse}} = 2P)}{\mathrm{MFU}(P)}", sparse_ratio)
wrong_sparse = acc["mfu"] * float(sparse_ratio)
d.md(f"{sc['gpu']} 的稠密 BF16 峰值是 {d.tflops(sc['peak_flops'])}，稀疏口径写成 "
     f"{d.tflops(2 * sc['peak_flops'])}。用后者算出 MFU = {d.pct(wrong_sparse)}，"
     f"正确值 {d.pct(acc['mfu'])}。")
summary.append(("分母用稀疏峰值", "sparse peak (2x dense)", wrong_sparse, acc["mfu"]))

# %% [markdown]
# ## 坑 9：代码里写死了别的卡的峰值
#
# 一些公开的 MFU 估算代码把 A100 的 BF16 峰值写成常量（例如 nanoGPT 的 `estimate_mfu`）。
# 换了卡却没改这个常量，误差就是两张卡峰值之比：在更快的卡上 MFU 虚高，甚至超过 100%；
# 在更慢的卡上则被低估。

# %%
wrong_gpu = hardware.GPUS["A100-80GB"]
if math.isclose(wrong_gpu.bf16_flops, sc["peak_flops"]):
    wrong_gpu = hardware.GPUS["H100-SXM"]  # the scenario already runs at A100's peak
P_wrong = sp.Symbol(r"P_{\mathrm{hardcoded}}", positive=True)
d.eq(r"\frac{\mathrm{MFU}(P_{\mathrm{hardcoded}})}{\mathrm{MFU}(P)}",
     sp.simplify(u.mfu.subs(P, P_wrong) / u.mfu))
wrong_peak = acc["mfu"] * sc["peak_flops"] / wrong_gpu.bf16_flops
direction = "高估" if wrong_peak > acc["mfu"] else "低估"
d.md(f"本场景的卡是 {sc['gpu']}（{d.tflops(sc['peak_flops'])}）。若代码里写死的是 {wrong_gpu.name} 的 "
     f"{d.tflops(wrong_gpu.bf16_flops)}，算出 MFU = {d.pct(wrong_peak)}，正确值 "
     f"{d.pct(acc['mfu'])}，{direction}为 {d.times(wrong_peak / acc['mfu'])}。峰值要按实际的卡取，"
     "并且取稠密 BF16 那一列。")
summary.append((f"写死 {wrong_gpu.name} 的峰值", f"{wrong_gpu.name} peak hard-coded", wrong_peak,
                acc["mfu"]))

# %% [markdown]
# ## 汇总
#
# 下表把每个坑的错误值、正确值和二者之比放在一起（"比值"为错误值 / 正确值，
# 大于 1 是高估，小于 1 是低估）。

# %%
d.table([(name, d.pct(w), d.pct(rt), d.times(w / rt)) for name, _, w, rt in summary],
        ["坑", "错误算法", "正确算法", "比值"], "本场景各个坑的大小（均为利用率）")

# %%
import matplotlib.pyplot as plt

d.setup_plots()
plotted = [(label, w) for _, label, w, _ in summary if label]
fig, ax = plt.subplots()
names = [name for name, _ in plotted]
values = [100 * w for _, w in plotted]
ax.barh(names, values, color="#dd6b20", label="wrong MFU")
ax.axvline(100 * acc["mfu"], color="#2b6cb0", linewidth=2, label="correct MFU")
for y, value in enumerate(values):
    ax.annotate(f"{value:.1f}%", (value, y), textcoords="offset points", xytext=(4, -3), fontsize=9)
ax.set_xlim(0, max(values + [100 * acc["mfu"]]) * 1.18)
ax.invert_yaxis()
ax.set_xlabel("MFU (%)")
ax.set_title("MFU reported under each mistake vs the correct value")
ax.legend(loc="lower right")
plt.show()

# %% [markdown]
# ## 本节要点

# %%
ranked = sorted(summary, key=lambda item: abs(math.log(item[2] / item[3])), reverse=True)
points = [f"本场景里偏差最大的三个坑："
          + "；".join(f"{name}（{d.times(w / rt)}）" for name, _, w, rt in ranked[:3]) + "。"]
points.append(f"正确口径：N 取激活参数、D 只数真实 token、分母用 {sc['gpu']} 的稠密峰值 "
              f"{d.tflops(sc['peak_flops'])}，得到 MFU {d.pct(acc['mfu'])}；"
              f"HFU {d.pct(acc['hfu'])} 要单独标明。")
points.append(f"6ND 不含注意力核心：按平均真实长度它占全部运算的 "
              f"{d.pct(acc['attention']['actual']['share'])}。")
points.append(f"通信的收益上限按课程的实测占比只有 {d.times(comm_bound)}（课程数字）；"
              "pad、重算这类\"看得见的浪费\"先量、先修。")
d.md("\n".join(f"- {p}" for p in points))
