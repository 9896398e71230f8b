"""Writes qwen3-next-lengths.txt: the document lengths of one step of the Qwen3-Next example
(scenarios/qwen3-next-80b-256xB200.yaml), generated, not measured, and the same on every run.

The distribution is stated, not measured: document lengths in tokens log-normal with median
2,048 and sigma 1.4 (mean 2,048 e^0.98 = 5,457 tokens; 0.67% of the documents longer than the
65,536-token rows, which the scenario cuts to them). The file holds its 3,072 quantiles,
lengths[i] = round(2048 exp(1.4 z_i)) with z_i the standard normal quantile of (i + 1/2) / 3072,
in a fixed shuffled order (random.Random(19)): one step of 3,072 documents, no sampling noise.

    python tests/data/make_qwen3_next_lengths.py   # rewrites the file beside this script
"""

import math
import random
from pathlib import Path
from statistics import NormalDist

MEDIAN, SIGMA, COUNT, SEED = 2048, 1.4, 3072, 19


def lengths() -> list[int]:
    normal = NormalDist()
    values = [
        max(1, round(MEDIAN * math.exp(SIGMA * normal.inv_cdf((i + 0.5) / COUNT))))
        for i in range(COUNT)
    ]
    random.Random(SEED).shuffle(values)
    return values


if __name__ == "__main__":
    out = Path(__file__).with_name("qwen3-next-lengths.txt")
    out.write_text("".join(f"{n}\n" for n in lengths()), encoding="ascii")
