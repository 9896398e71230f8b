"""`dropout`: the masks dropout keeps for the backward (memory) and its memory-bound passes (the
step-time model), each worked out by hand for the tutorial's Qwen3-8B (36 layers, 4,096 wide, 32
heads; micro batch 1 at 8,192 tokens) on one GPU's layer: TP 1 without sequence parallelism, so
that every row of the layer is on the GPU."""

from pathlib import Path

import pytest

from costmodel.evaluate.memory import gpu_memory
from costmodel.evaluate.simulate import step_time
from costmodel.inputs import efficiency, scenario

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "scenarios" / "tutorial-qwen3-8b.yaml"
ONE_GPU_LAYER = {"tensor_parallel": 1, "sequence_parallel": False, "recompute": "none"}
S, H, HEADS, LAYERS = 8192, 4096, 32, 36


def _run(**keys):
    return scenario.resolve(TUTORIAL, overrides={**ONE_GPU_LAYER, **keys})


def _saved(sc) -> float:
    """One layer's saved bytes per micro batch (the whole set: nothing recomputed)."""
    [(_, whole, count)] = gpu_memory.layer_saved_sets(sc.shape, sc)
    assert count == LAYERS
    return sum(whole.values())


def test_the_course_and_the_examples_state_no_dropout():
    assert scenario.resolve()["dropout"] is False
    assert _run()["dropout"] is False


@pytest.mark.parametrize("kernel", ["flash", "eager"])
def test_dropout_keeps_its_masks(kernel):
    """The two hidden dropouts keep a one-byte mask of every row x hidden; eager attention's
    dropout keeps its mask (1 byte) and its output (2) of every score of the s x s square, a
    flash kernel neither (it draws the mask again in the backward)."""
    off, on = (_saved(_run(attention_kernel=kernel, dropout=d)) for d in (False, True))
    scores = HEADS * S * S if kernel == "eager" else 0
    assert on - off == pytest.approx(2 * 1 * S * H + (1 + 2) * scores, rel=1e-12)


@pytest.mark.parametrize("kernel", ["flash", "eager"])
def test_dropout_passes_are_memory_bound_seconds(kernel):
    """Megatron-LM fuses a hidden dropout into the residual add (bias-dropout-add): its mask
    written forward and read backward, 1 + 1 bytes an element; the eager core's dropout is its
    own kernel over the scores, read, write and mask, 5 + 5 bytes a score. Per layer and micro
    batch, over the HBM at its efficiency, on the stage's layers and micro batches."""
    off, on = (step_time.predict(_run(attention_kernel=kernel, dropout=d)) for d in (False, True))
    sc = _run(attention_kernel=kernel)
    assert sc.framework == "megatron"
    scores = HEADS * S * S if kernel == "eager" else 0
    per_layer = (1 + 1) * 2 * S * H + (5 + 5) * scores
    micro_batches = on["detail"]["micro_batches"]
    bandwidth = sc.hbm_bandwidth * efficiency.efficiencies(sc.values)["hbm"].value
    expected = LAYERS * micro_batches * per_layer / bandwidth
    added = on["parts"]["memory_bound"] - off["parts"]["memory_bound"]
    assert added == pytest.approx(expected, rel=1e-9)
    assert {k: v for k, v in on["parts"].items() if k != "memory_bound"} == pytest.approx(
        {k: v for k, v in off["parts"].items() if k != "memory_bound"}, rel=1e-12
    )


def test_an_unfused_framework_pays_a_whole_pass_per_hidden_dropout():
    """Hugging Face's eager elementwise kernels: a dropout reads and writes its rows and writes
    its mask (5 bytes an element), and the backward likewise."""
    off, on = (step_time.predict(_run(framework="huggingface", dropout=d)) for d in (False, True))
    sc = _run(framework="huggingface")
    bandwidth = sc.hbm_bandwidth * efficiency.efficiencies(sc.values)["hbm"].value
    micro_batches = on["detail"]["micro_batches"]
    expected = LAYERS * micro_batches * (5 + 5) * 2 * S * H / bandwidth
    added = on["parts"]["memory_bound"] - off["parts"]["memory_bound"]
    assert added == pytest.approx(expected, rel=1e-9)
