"""Where a collective's group runs (issue 18, item 16): `communication.placement` from the
layout's strides, checked against the rank-by-rank count it replaces, and quick for ten million
GPUs."""

import json
import subprocess
import sys

import pytest
from hang import hang_limit
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.evaluate.communication.communication import DIMS, GROUPS, placement


def placement_by_ranks(sizes, varies, gpus_per_node):
    """The former implementation, the reference: every rank put on its node (O(GPUs))."""
    world = 1
    for size in sizes:
        world *= size
    nodes: dict[tuple, dict[int, int]] = {}
    for rank in range(world):
        rest, key = rank, []
        for dim, size in zip(DIMS, sizes):
            rest, coord = divmod(rest, size)
            if dim not in varies:
                key.append(coord)
        count = nodes.setdefault(tuple(key), {})
        node = rank // gpus_per_node
        count[node] = count.get(node, 0) + 1
    spans = any(len(count) > 1 for count in nodes.values())
    fewest = min(min(count.values()) for count in nodes.values())
    return spans, fewest


def uncached(sizes, varies, gpus_per_node):
    return placement.__wrapped__(tuple(sizes), varies, gpus_per_node)


#: A size: mostly small, with the powers of two and the odd sizes that real layouts have.
size = st.one_of(st.integers(1, 9), st.sampled_from([1, 2, 4, 8, 16, 3, 6, 12, 5, 7]))


@settings(max_examples=1500, deadline=None, derandomize=True)
@given(
    sizes=st.tuples(size, size, size, size, size).filter(
        lambda s: s[0] * s[1] * s[2] * s[3] * s[4] <= 6000
    ),
    group=st.sampled_from(sorted(GROUPS)),
    gpus_per_node=st.one_of(st.integers(1, 20), st.sampled_from([8, 16, 24, 32, 72, 100])),
)
def test_closed_form_equals_the_rank_by_rank_count(sizes, group, gpus_per_node):
    varies = GROUPS[group]
    assert uncached(sizes, varies, gpus_per_node) == placement_by_ranks(
        sizes, varies, gpus_per_node
    )


@pytest.mark.parametrize(
    "sizes,gpus_per_node",
    [
        ((2, 1, 8, 4, 2), 8),  # TP 2, EP 8, DP 32, PP 2 on 8-GPU nodes
        ((3, 1, 1, 7, 5), 8),  # nothing aligns with the nodes
        ((8, 2, 4, 3, 3), 72),  # NVL72
        ((6, 1, 1, 50, 1), 7),
        ((1, 1, 1, 5000, 1), 1000),
        ((1, 1, 1, 999, 3), 1000),
        ((4, 1, 1, 1, 1), 8),  # the world smaller than a node
        ((5, 3, 1, 1, 1), 8),  # a partial last node
    ],
)
def test_every_group_of_chosen_layouts(sizes, gpus_per_node):
    for varies in GROUPS.values():
        assert uncached(sizes, varies, gpus_per_node) == placement_by_ranks(
            sizes, varies, gpus_per_node
        ), varies


def test_ten_million_gpus_are_placed_at_once():
    # DP 1,250,000 x EP 8 on 8-GPU nodes, and 9,999,936 GPUs on NVL72 nodes: nothing divides
    for sizes, per_node in (((1, 1, 8, 1_250_000, 1), 8), ((2, 1, 4, 1_249_992, 1), 72)):
        for varies in GROUPS.values():
            spans, fewest = uncached(sizes, varies, per_node)
            assert 1 <= fewest <= per_node
    assert uncached((1, 1, 8, 1_250_000, 1), GROUPS["EP"], 8) == (False, 8)
    assert uncached((1, 1, 8, 1_250_000, 1), GROUPS["DP"], 8) == (True, 8)
    assert uncached((1, 1, 8, 1_250_000, 1), GROUPS["DP experts"], 8) == (True, 1)


def test_report_for_ten_million_gpus_is_quick(tmp_path):
    # The rank-by-rank placement took 57 s for this run; a hang or a slow placement fails here.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "costmodel",
            "report",
            "--set",
            "num_gpus=1e7",
            "--set",
            "samples_per_step=1e7",  # a sample for each of the ten million pipelines
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=hang_limit(1),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-500:]
    collectives = json.loads(result.stdout)["communication"]["collectives"]
    dp = [c for c in collectives if c["parallelism"] == "DP"]
    assert dp and all(c["placement"] == "inter-node" for c in dp)
