"""GENERATED from the router simulation (costmodel.evaluate.levers.router) by costmodel.generate.router:
do not edit. Regenerate with `make numeric` (`python -m costmodel.generate.router`);
tests/evaluate/test_router_table.py fails when this file is stale."""

#: The simulation's parameters (costmodel.evaluate.levers.levers) and its expert limit
#: (costmodel.evaluate.levers.router).
TOKENS = 4096
PLACEMENTS = 8
SEED = 0
MAX_SIMULATED_EXPERTS = 2048

#: (num_experts, experts_per_token, expert_parallel, router_skew): (median straggler
#: factor of the random placements, that of the load-aware placement).
IMBALANCE = {
    (128, 8, 8, 1.0): (1.83544921875, 1.08251953125),
    (256, 8, 8, 1.0): (1.6728515625, 1.044921875),
    (256, 8, 64, 0.0): (1.09765625, 1.01171875),
    (512, 10, 8, 1.0): (1.42919921875, 1.0140625),
}
