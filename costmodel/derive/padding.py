"""Fixed-length padding: how many token slots a step computes, and how many are real.

With `batching: padded` (the course's) every sample is padded to the configured length S, so a
step fills B * S slots while only D = B * s_mean are real tokens. If the step time is
proportional to the slots computed (the GEMMs run on pad tokens too), perfect packing removes
the waste and the step shrinks by slots / D. With `batching: packed` the samples are already
concatenated (perfect packing: no empty slot), so the slots are D and there is nothing left to
gain.
"""

from __future__ import annotations

import sympy as sp

from costmodel.derive.symbols import B, D, S, T, s_mean
from costmodel.derive.utilization import hfu, mfu

tokens_in_batch = B * s_mean  # D in terms of the batch

#: Token slots a step computes, by the scenario key `batching`.
SLOTS: dict[str, sp.Expr] = {"padded": B * S, "packed": D}


def figures(batching: str = "padded") -> dict[str, sp.Expr]:
    """The padding account of a step under `batching` (padded | packed)."""
    slots = SLOTS[batching]
    speedup = slots / D
    return {
        "slots": slots,
        "useful_fraction": D / slots,
        "waste_fraction": 1 - D / slots,
        "packing_speedup": speedup,
        "step_time_after_packing": T / speedup,
        "mfu_after_packing": mfu * speedup,
        # the hardware's utilization with the slots' matmuls counted: at most 1 for inputs
        # that can happen (a padded step computes every slot)
        "hfu_of_slots": hfu * speedup,
    }


_padded = figures("padded")
slots = _padded["slots"]
useful_fraction = _padded["useful_fraction"]
waste_fraction = _padded["waste_fraction"]
packing_speedup = _padded["packing_speedup"]
step_time_after_packing = _padded["step_time_after_packing"]
mfu_after_packing = _padded["mfu_after_packing"]
