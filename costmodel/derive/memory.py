"""Memory of the logits: one row of vocabulary scores per token in a micro batch.

logits bytes = micro_batch x seq_len x vocab x bytes per element. Fused or chunked
cross-entropy never materialises the whole tensor; chunking it in c pieces keeps 1/c of it.
"""

from __future__ import annotations

from costmodel.derive.symbols import S, V, b_micro, bytes_per_element, chunks

logits_bytes = b_micro * S * V * bytes_per_element
chunked_logits_bytes = logits_bytes / chunks
