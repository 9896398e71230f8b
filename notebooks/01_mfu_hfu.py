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

# %% tags=["parameters"]
scenario_file = None  # 团队自己的 YAML 场景文件；None 表示课程场景
overrides = {}  # 单个键的覆盖，例如 {"step_time": 90}

# %%
from costmodel import display as d
from costmodel.utilization import mfu, hfu

sc, acc = d.load(scenario_file, overrides)
d.eq(r"\mathrm{MFU}", mfu, d.pct(acc["mfu"]))
d.md(f"本场景的 MFU 为 **{d.pct(acc['mfu'])}**，HFU 为 **{d.pct(acc['hfu'])}**。")

# %%
import matplotlib.pyplot as plt
d.setup_plots()
fig, ax = plt.subplots()
ax.bar(["MFU", "HFU"], [acc["mfu"], acc["hfu"]])
ax.set_title("Utilization")
plt.show()
