"""Issue 34's MTP expert fix: a trained MTP layer of an MoE model holds routed experts like the
model's layers, split by EP, not counted whole on every GPU as dense parameters."""

from pathlib import Path

from costmodel.evaluate.memory import gpu_memory
from costmodel.inputs import scenario

REPO = Path(__file__).resolve().parents[2]
DEEPSEEK = str(REPO / "scenarios" / "deepseek-v3-2048xH800.yaml")


def test_the_mtp_layers_experts_are_experts():
    """DeepSeek-V3: 58 MoE layers of 256 experts of 3 x 7168 x 2048 = 653,908,770,816 routed
    expert parameters; its one MTP layer adds one more such layer, 11,274,289,152."""
    sc = scenario.resolve(DEEPSEEK)
    assert sc.num_mtp_layers == 1
    per_layer = 256 * 3 * 7168 * 2048
    assert sc.shape.breakdown["routed_experts_total"] == 58 * per_layer == 653_908_770_816
    params = gpu_memory.split_params(sc.shape, sc)
    assert params["experts"] == 59 * per_layer == 665_183_059_968
    # the dense rest: total - experts - embedding - lm_head (untied)
    rest = sc.total_params - 59 * per_layer - 2 * 7168 * 129280
    assert params["layers"] == rest


def test_without_mtp_nothing_moves():
    sc = scenario.resolve(DEEPSEEK, overrides={"count_mtp": False})
    assert sc.num_mtp_layers == 0
    params = gpu_memory.split_params(sc.shape, sc)
    assert params["experts"] == sc.shape.breakdown["routed_experts_total"]
