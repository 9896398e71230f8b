"""Fixed-length padding: how many token slots a step computes, and how many are real.

Every sample is padded to the configured length S, so a step fills B * S slots while only
D = B * s_mean are real tokens. If the step time is proportional to the slots computed
(the GEMMs run on pad tokens too), perfect packing removes the waste and the step shrinks by
slots / D.
"""

from __future__ import annotations

from costmodel.derive.symbols import B, D, S, T, s_mean
from costmodel.derive.utilization import mfu

tokens_in_batch = B * s_mean  # D in terms of the batch
slots = B * S
useful_fraction = D / slots
waste_fraction = 1 - useful_fraction
packing_speedup = slots / D
step_time_after_packing = T / packing_speedup
mfu_after_packing = mfu * packing_speedup
