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
# 前两节讲了 MFU/HFU 的定义和 6ND 的来历。这一节只做一件事：把场景的输入一个个代进公式，
# 算出 MFU 和 HFU，再用另外两条独立的路线把结果核对一遍。之后看两个口径问题：
# MoE 误用总参数会把 MFU 夸大多少；项目自报的利用率更像哪个口径；以及用模型真实配置里的
# 精确激活参数重算，结论会变多少。
#
# 本页所有数字都由 `costmodel` 按当前场景算出；换一个场景文件重跑，文字会跟着变。

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %%
import sympy as sp

from costmodel import course
from costmodel.present import display as d
from costmodel.derive import recompute, utilization
from costmodel.evaluate.shapes import matching_shape
from costmodel.inputs.assumptions import COURSE_MODEL
from costmodel.derive.flops import model_flops
from costmodel.derive.symbols import B, D, N, N_total, P, T, n_gpu, s_mean, tau

sc, acc = d.load(scenario_file, overrides)
is_course = not sc.changed
subs = sc.substitutions()

d.md(f"场景：**{d.text(sc['name'])}**"
     + ("（课程的场景）。" if is_course else
        f"（与课程不同：改动了 {', '.join(d.text(key, code=True) for key in sc.changed)}）。"
        "下面的数字都按这个场景重新算过。"))

# %% [markdown]
# ## 1. 输入
#
# MFU 只需要很少几个输入：每步的样本数和平均真实长度（合起来是 token 数 D）、激活参数 N、
# 单步耗时 T、GPU 数和单卡峰值。recompute 策略只影响 HFU；实测吞吐只用来对账。

# %%
SOURCE = {"course": "课程", "file": "场景文件", "--set": "覆盖参数", "model": "模型配置",
          "gpu table": "GPU 表", "derived": "推导", "sequence_lengths": "长度文件"}
measured = sc["measured_tokens_per_s"]
rows = [
    ("每步样本数", "B", d.num(sc["samples_per_step"]), SOURCE[sc.sources["samples_per_step"]]),
    ("每个样本的平均真实 token 数", "s̄", d.count(sc["mean_tokens_per_sample"]),
     SOURCE[sc.sources["mean_tokens_per_sample"]]),
    ("激活参数（6ND 的 N）", "N", d.sci(sc["activated_params"]),
     SOURCE[sc.sources["activated_params"]]),
    ("总参数", "N_total", d.sci(sc["total_params"]), SOURCE[sc.sources["total_params"]]),
    ("单步耗时", "T", f"{sc['step_time']:g} s", SOURCE[sc.sources["step_time"]]),
    ("GPU 数", "n_gpu", d.num(sc["num_gpus"]), SOURCE[sc.sources["num_gpus"]]),
    ("GPU 型号", "", sc["gpu"], SOURCE[sc.sources["gpu"]]),
    ("单卡 BF16 稠密峰值", "P", d.tflops(sc["peak_flops"]), SOURCE[sc.sources["peak_flops"]]),
    ("recompute 策略", "", sc["recompute"], SOURCE[sc.sources["recompute"]]),
    ("实测集群吞吐", "τ", "未提供" if measured is None else f"{d.num(measured)} tok/s",
     SOURCE[sc.sources["measured_tokens_per_s"]]),
]
d.table(rows, ["输入", "符号", "值", "来源"], "Scenario inputs used by MFU and HFU")

# %% [markdown]
# ## 2. 逐步计算
#
# 每步真实 token 数 D 是样本数乘平均长度；模型必需的 FLOPs 是 6ND；除以单步耗时得到实际达到的
# 算力（集群和单卡），再除以峰值得到 MFU。HFU 在 MFU 上乘 recompute 系数。

# %%
tokens = sc["tokens_per_step"]
flops = acc["model_flops_per_step"]
cluster_peak = float(utilization.cluster_peak.subs(subs))
d.eq(D, B * s_mean, rf"{d.tex_num(sc['samples_per_step'])} \times "
     rf"{d.count(sc['mean_tokens_per_sample']).replace(',', '{,}')}", d.tex_sci(tokens))
d.eq(r"C_{\mathrm{model}}", model_flops,
     rf"6 \times {d.tex_sci(sc['activated_params'])} \times {d.tex_sci(tokens)}", d.tex_sci(flops, 4))
d.eq(r"\mathrm{FLOP/s}_{\mathrm{cluster}}", utilization.achieved_flops_per_s,
     rf"\frac{{{d.tex_sci(flops, 4)}}}{{{sc['step_time']:g}\ \mathrm{{s}}}}",
     rf"{d.tex_sci(acc['achieved_flops_per_s'], 4)}\ \mathrm{{FLOP/s}}")
d.eq(r"\mathrm{FLOP/s}_{\mathrm{GPU}}", utilization.achieved_flops_per_s_per_gpu,
     rf"{d.tex_sci(acc['achieved_flops_per_s_per_gpu'])}\ \mathrm{{FLOP/s}}")
d.eq(r"P_{\mathrm{cluster}}", utilization.cluster_peak,
     rf"{d.tex_num(sc['num_gpus'])} \times {d.tex_sci(sc['peak_flops'], 4)}",
     rf"{d.tex_sci(cluster_peak, 4)}\ \mathrm{{FLOP/s}}")
d.eq(r"\mathrm{MFU}", utilization.mfu,
     rf"\frac{{{d.tex_sci(acc['achieved_flops_per_s'], 4)}}}{{{d.tex_sci(cluster_peak, 4)}}}",
     d.pct(acc["mfu"]))

# %%
factor_exact = recompute.factor(sc["recompute"], sc["selective_recompute_fraction"])
d.eq(r"\mathrm{HFU}", sp.Symbol(r"\mathrm{MFU}") * factor_exact, d.pct(acc["hfu"]))
policy = sc["recompute"]
if policy == "full":
    why = ("本场景开的是 full recompute：反向时把整个前向再跑一遍，硬件多做 2ND，"
           f"系数 8ND/6ND = {factor_exact}。")
elif policy == "selective":
    why = ("本场景开的是 selective recompute：只重算一部分前向，假设占前向 FLOPs 的 "
           f"{d.pct(sc['selective_recompute_fraction'], 0)}（场景键 selective_recompute_fraction），"
           f"系数为 {factor_exact}。")
else:
    why = "本场景没有 recompute：硬件做的就是模型必需的 6ND，HFU 与 MFU 相等。"
d.md(f"集群每秒做了 **{d.tflops(acc['achieved_flops_per_s'])}** 的有效运算，"
     f"合每卡 **{d.tflops(acc['achieved_flops_per_s_per_gpu'], 2)}**；"
     f"集群峰值是 {sc['num_gpus']} × {d.tflops(sc['peak_flops'])} = **{d.tflops(cluster_peak)}**。"
     f"于是 MFU = **{d.pct(acc['mfu'])}**。{why} HFU = **{d.pct(acc['hfu'])}**。")

# %% [markdown]
# ## 3. 三路对账
#
# 一个 MFU 数字只有在另一条独立的路也走得通时才可信。这里走三条：
#
# 1. **FLOPs 路线（集群）**：6ND 除以单步耗时，再除以集群峰值，就是上面的算法；
# 2. **吞吐路线**：D / T 得到每秒 token 数，和训练日志里的实测吞吐比；再把实测吞吐乘每 token 的
#    FLOPs（6N）反推一个 MFU；
# 3. **单卡路线**：每卡 token/s 和每卡实测比；每卡 FLOP/s 除以单卡峰值，应与集群口径相同。
#
# 对账的容差取 1%（本页的选择）：相对差在 ±1% 内记为 ✓。

# %%
TOLERANCE = 0.01  # this notebook's tolerance for a check mark


def compare(computed, reference):
    if reference is None:
        return "—", "无实测值"
    rel = computed / reference - 1
    return f"{100 * rel:+.2f}%", "✓" if abs(rel) <= TOLERANCE else "✗"


per_gpu_mfu = float((utilization.achieved_flops_per_s_per_gpu / P).subs(subs))
measured_gpu = acc["measured_tokens_per_s_per_gpu"]
mfu_measured = acc["mfu_from_measured_tokens_per_s"]
routes = [
    ("① FLOPs（集群）", "6ND / T ÷ (n_gpu·P)", d.pct(acc["mfu"]), "—", "基准", ""),
    ("② 吞吐", "D / T  vs  实测 τ", f"{d.num(acc['tokens_per_s'])} tok/s",
     "—" if measured is None else f"{d.num(measured)} tok/s",
     *compare(acc["tokens_per_s"], measured)),
    ("② 吞吐反推 MFU", "6N·τ ÷ (n_gpu·P)  vs  ①", "—" if mfu_measured is None
     else d.pct(mfu_measured), d.pct(acc["mfu"]),
     *(compare(mfu_measured, acc["mfu"]) if mfu_measured is not None else ("—", "无实测值"))),
    ("③ 单卡吞吐", "D / T / n_gpu  vs  τ / n_gpu", f"{d.num(acc['tokens_per_s_per_gpu'], 1)} tok/s",
     "—" if measured_gpu is None else f"{d.num(measured_gpu, 1)} tok/s",
     *compare(acc["tokens_per_s_per_gpu"], measured_gpu)),
    ("③ 单卡 FLOPs", "(6ND / T / n_gpu) ÷ P  vs  ①", d.pct(per_gpu_mfu), d.pct(acc["mfu"]),
     *compare(per_gpu_mfu, acc["mfu"])),
]
d.table(routes, ["路线", "算式", "计算值", "对照值", "相对差", "结论"],
        "Three-way cross-check (tolerance 1%)")

# %%
if measured is None:
    d.md("本场景没有提供实测吞吐（`measured_tokens_per_s` 为空），吞吐路线无从对照，只剩下 ① 和 ③ "
         "两条代数上等价的路。它们总会相等，只能查出算术错误，查不出输入错误：建议从训练日志里"
         "读出 tok/s 填进场景，再重跑本页。")
else:
    rel = acc["tokens_per_s"] / measured - 1
    verdict = ("在容差之内：D 与 T 和日志里的吞吐互相印证，这组输入是自洽的。" if abs(rel) <= TOLERANCE
               else "超出容差：先检查 D 是否按真实 token 计（而不是补齐后的槽位），"
                    "T 是否混进了评估、存盘等非训练时间。")
    d.md(f"由 D / T 算出的吞吐是 **{d.num(acc['tokens_per_s'])} tok/s**，实测 "
         f"**{d.num(measured)} tok/s**，相对差 **{100 * rel:+.2f}%**，{verdict}"
         f"用实测吞吐反推的 MFU 是 {d.pct(mfu_measured)}，"
         + (f"与 FLOPs 路线的 {d.pct(acc['mfu'])} 一致。" if abs(rel) <= TOLERANCE else
            f"与 FLOPs 路线的 {d.pct(acc['mfu'])} 同样对不上（偏差来自同一处：D / T 与实测吞吐不符）。")
         + "单卡 FLOPs 路线与集群路线在代数上是同一个式子（分子分母同除以 GPU 数），"
         "它只验证算术，不提供新的证据。")

# %% [markdown]
# ## 4. 一个必须避开的错算：用总参数
#
# MoE 每个 token 只经过被路由到的少数专家，6ND 里的 N 应该是激活参数。Hugging Face 配置和模型名里
# 最显眼的却是总参数；把它代进去，MFU 会按 N_total / N 的倍数被放大。

# %%
ratio = sc["total_params"] / sc["activated_params"]
d.eq(r"\mathrm{MFU}_{\mathrm{wrong}}", utilization.mfu.subs(N, N_total),
     sp.Symbol(r"\mathrm{MFU}") * N_total / N, d.pct(acc["mfu_if_total_params"], 1))
if sc["num_experts"] > 0:
    tail = ("这个数会让人以为已经接近硬件极限、没什么可优化了，而真实的 MFU 只有它的 "
            f"1/{ratio:.1f}。" if acc["mfu_if_total_params"] > 0.5 else
            f"真实的 MFU 只有它的 1/{ratio:.1f}。")
    d.md(f"本场景是 MoE（{sc['num_experts']} 个专家，每 token 激活 {sc['experts_per_token']} 个），"
         f"总参数是激活参数的 **{ratio:.2f} 倍**。误用总参数得到的“MFU”是 "
         f"**{d.pct(acc['mfu_if_total_params'], 1)}**，正确值是 **{d.pct(acc['mfu'])}**。{tail}")
elif sc["total_params"] > sc["activated_params"]:
    d.md(f"本场景是稠密模型，总参数是 N 的 {ratio:.2f} 倍（差的是输入 embedding 这类不参与矩阵乘的参数），"
         f"误用总参数得到 {d.pct(acc['mfu_if_total_params'])}，对比正确的 {d.pct(acc['mfu'])}，"
         "错得不多；这个坑主要出在 MoE 上。")
else:
    d.md(f"本场景是稠密模型，总参数与 N 相同，误用总参数也得到 {d.pct(acc['mfu'])}；"
         "这个坑主要出在 MoE 上。")

# %% [markdown]
# ## 5. 真实配置里的激活参数
#
# 激活参数有三种常见的数法，差别在两个“词表大小 × hidden”的矩阵上：
#
# - **6ND 的 N**（本项目的约定）：每个 token 真正参与矩阵乘的参数，包括注意力和线性注意力的投影、
#   路由器、被激活的专家、共享专家和输出层 lm_head；不含输入 embedding（它是查表，没有 FLOPs）
#   和 norm 之类的向量。
# - **模型卡上的公开激活数**（"A3B" 的那个 3B）：除路由专家外的全部参数，加上路由专家的 k/E；
#   它含输入 embedding。
# - **总参数**：每个专家都算。
#
# 下面直接从模型的 `config.json` 数出来（`costmodel.inputs.models`），与场景用的 N 放在一起。

# %%
shape = matching_shape(sc.values)
reference = sc["model"] or COURSE_MODEL
if shape is None:
    d.md(f"本场景的模型形状（hidden、层数、专家数、词表）与配置 {d.text(reference, code=True)} 不一致，"
         "这里没有它的精确计数。在场景文件里写 `model: 路径/config.json`（或预置名），"
         "本节就会改用那个配置数出的激活参数。")
else:
    counts = [
        ("场景使用的 N", d.sci(sc["activated_params"], 4), d.num(sc["activated_params"]),
         SOURCE[sc.sources["activated_params"]]),
        ("精确 N（矩阵乘参数，含 lm_head，不含 embedding）", d.sci(shape.activated_params, 4),
         d.num(shape.activated_params), "config.json"),
        ("公开激活数（含 embedding）", d.sci(shape.activated_params_published, 4),
         d.num(shape.activated_params_published), "config.json"),
        ("其中：输入 embedding", d.sci(shape.embedding_params, 4), d.num(shape.embedding_params),
         "config.json"),
        ("其中：lm_head", d.sci(shape.lm_head_params, 4), d.num(shape.lm_head_params),
         "config.json"),
        ("总参数（场景）", d.sci(sc["total_params"], 4), d.num(sc["total_params"]),
         SOURCE[sc.sources["total_params"]]),
        ("总参数（config）", d.sci(shape.total_params, 4), d.num(shape.total_params),
         "config.json"),
    ]
    d.table(counts, ["参数口径", "约数", "精确值", "来源"],
            f"Parameter counts of {shape.name} ({shape.model_type})")

# %%
def utilization_with(n_params):
    values = {**subs, N: n_params}
    return float(utilization.mfu.subs(values)), float(utilization.hfu.subs(values))


variants = [("场景的 N", sc["activated_params"])]
if shape is not None:
    variants += [("精确 N", shape.activated_params),
                 ("公开激活数", shape.activated_params_published),
                 ("config 总参数（错误口径）", shape.total_params)]
    by_n = {label: utilization_with(n) for label, n in variants}
    d.table([(label, d.sci(n, 4), d.pct(by_n[label][0]), d.pct(by_n[label][1]),
              f"{100 * (n / sc['activated_params'] - 1):+.1f}%") for label, n in variants],
            ["N 的口径", "N", "MFU", "HFU", "相对场景的 N"],
            "MFU and HFU for each count of N (same D, T and cluster)")
    exact_rel = shape.activated_params / sc["activated_params"] - 1
    published_rel = shape.activated_params_published / shape.activated_params - 1
    same = sc.sources["activated_params"] == "model" or abs(exact_rel) < 1e-12
    first = ("场景的 N 已经取自这个配置，与精确值一致。" if same else
             f"配置数出的精确 N 比场景的 N {'低' if exact_rel < 0 else '高'} "
             f"**{100 * abs(exact_rel):.1f}%**："
             f"MFU 从 {d.pct(acc['mfu'])} 变成 **{d.pct(by_n['精确 N'][0])}**，"
             f"HFU 从 {d.pct(acc['hfu'])} 变成 **{d.pct(by_n['精确 N'][1])}**。")
    d.md(first
         + f" 精确 N 里有 {d.sci(shape.lm_head_params)} 是 lm_head（每个 token 都要乘的输出层）。"
         f"公开激活数 {d.sci(shape.activated_params_published)} 比精确 N 多出输入 embedding"
         f"（{d.sci(shape.embedding_params)}），多 **{100 * published_rel:.1f}%**；"
         f"用它算，MFU 会被抬到 {d.pct(by_n['公开激活数'][0])}。"
         f"用 config 的总参数犯第 4 节的错，则得到 {d.pct(by_n['config 总参数（错误口径）'][0], 1)}。")
    if is_course:
        d.md(f"对课程来说：课程的 N = {d.sci(sc['activated_params'], 2)} 是个取整，"
             f"比矩阵乘参数的精确值高 {100 * -exact_rel:.1f}%，"
             f"结论（MFU 在 {d.pct(by_n['精确 N'][0])} 到 {d.pct(acc['mfu'])} 之间）不变；"
             "真正要小心的是别把模型卡上的“A3B”当成 6ND 的 N，更别用总参数。")

# %% [markdown]
# ## 6. 项目自报的“8–10%”是哪个口径？
#
# 课程说项目“实测 MFU 是 8–10%”——这是课程引用的项目自报数，不是本页算出来的。
# 把这个区间与几个候选口径对比：离区间最近的那个，最可能是项目实际用的算法。
# 距离按百分点计，落在区间内记为 0。

# %%
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
if is_course:
    d.table([(label, d.pct(value), f"{100 * distance(value):.2f} pp",
              "是" if distance(value) == 0 else "否") for label, _, value in candidates],
            ["候选口径", "值", f"到 [{', '.join(reported_by_project)}] 的距离", "在区间内"],
            f"Candidates for the project's reported {reported_range.replace('–', '-')} (the course's quote)")
else:
    d.table([(label, d.pct(value)) for label, _, value in candidates], ["候选口径", "本场景的值"],
            "Utilization of this scenario under each convention")

# %%
if is_course:
    mfu_gap, hfu_gap = distance(acc["mfu"]), distance(acc["hfu"])
    closer = "HFU" if hfu_gap < mfu_gap else "MFU"
    best_label, _, best_value = min(candidates, key=lambda c: distance(c[2]))
    text = (f"两个标准口径里，MFU（{d.pct(acc['mfu'])}）离区间 {100 * mfu_gap:.2f} 个百分点，"
            f"HFU（{d.pct(acc['hfu'])}）离区间 {100 * hfu_gap:.2f} 个百分点："
            f"项目报的数更可能是 **{closer}** 口径。")
    if shape is not None:
        inside = [label for label, _, value in candidates if distance(value) == 0]
        if inside:
            text += (f" 再把 N 换成模型卡上的公开激活数，{'、'.join(inside)}落进了区间"
                     f"（{d.pct(best_value)}）：最贴合的解释是“{best_label}”。"
                     "这与课程的判断一致：HFU 口径，外加一个略大的 N。")
        else:
            text += f" 所有候选里最近的是“{best_label}”（{d.pct(best_value)}）。"
    d.md(text)
else:
    d.md(f"“{reported_range}” 是课程项目自报的数，只对应课程的场景，这里不拿它和本场景比较。"
         "上表列出了本场景在各口径下的数值，可以拿来和你们自己报告的利用率对照："
         "先弄清报告用的是 MFU 还是 HFU、N 取的是哪一种。")

# %%
import matplotlib.pyplot as plt

d.setup_plots()
fig, ax = plt.subplots()
labels = [english for _, english, _ in candidates]
values = [100 * value for _, _, value in candidates]
ax.barh(labels, values, color="tab:blue")
if is_course:
    ax.axvspan(100 * low, 100 * high, color="tab:orange", alpha=0.25,
               label="reported by the project (course quote)")
    ax.legend(loc="upper right")
ax.set_xlim(0, 1.4 * max(values + [100 * high]))
ax.invert_yaxis()
ax.set_title("Utilization under each convention")
ax.set_xlabel("utilization (%)")
ax.set_ylabel("convention")
plt.show()

# %% [markdown]
# ## 本节要点

# %%
points = [
    f"D = {d.num(tokens)} token，6ND = {d.sci(flops, 4)} FLOPs；集群实际 "
    f"{d.tflops(acc['achieved_flops_per_s'])}，每卡 {d.tflops(acc['achieved_flops_per_s_per_gpu'], 2)}。",
    f"MFU = **{d.pct(acc['mfu'])}**，HFU = **{d.pct(acc['hfu'])}**（recompute 系数 {factor_exact}，"
    f"集群峰值 {d.tflops(cluster_peak)}）。",
    ("吞吐路线没有实测值可比：请补上 measured_tokens_per_s。" if measured is None else
     f"吞吐路线：{d.num(acc['tokens_per_s'])} vs 实测 {d.num(measured)} tok/s，"
     f"相对差 {100 * (acc['tokens_per_s'] / measured - 1):+.2f}%。"),
    f"误用总参数：{d.pct(acc['mfu_if_total_params'], 1)}，是正确值的 {ratio:.2f} 倍。",
]
if shape is not None:
    points.append(f"配置里的精确 N = {d.sci(shape.activated_params, 4)}，对应 MFU "
                  f"{d.pct(by_n['精确 N'][0])}；公开激活数（含 embedding）会把它抬到 "
                  f"{d.pct(by_n['公开激活数'][0])}。")
if is_course:
    points.append(f"项目自报的 {reported_range}（课程引用）最接近 {closer} 口径。")
d.md("\n".join(f"- {p}" for p in points))
