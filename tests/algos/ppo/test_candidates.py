"""Candidate sizes and the next smaller configuration keep every rule the trainer checks."""

from __future__ import annotations

import pytest

from rlfit.algos.ppo.candidates import candidate_sizes, scale_sizes, smaller_sizes
from rlfit.algos.ppo.sizes import BatchSizes, check_batch_divisibility

CARTPOLE = BatchSizes(num_envs=2048, batch_size=1024, num_minibatches=32, unroll_length=30)
ODD = BatchSizes(num_envs=1000, batch_size=500, num_minibatches=24, unroll_length=20)  # 12 unrolls per env


def assert_valid(sizes: BatchSizes) -> None:
    """Raises (UserError) when `sizes` break a rule in rlfit.config.rules."""
    assert min(sizes) > 0
    check_batch_divisibility(sizes.num_envs, sizes.batch_size, sizes.num_minibatches)


@pytest.mark.parametrize("base", [CARTPOLE, ODD, BatchSizes(8, 8, 2, 4)])
def test_candidates_are_powers_of_two_with_the_base_proportions(base):
    candidates = candidate_sizes(base)
    assert [c.num_envs for c in candidates] == [2**k for k in range(4, 17)]
    unrolls = base.batch_size * base.num_minibatches // base.num_envs
    for sizes in candidates:
        assert_valid(sizes)
        assert sizes.batch_size * sizes.num_minibatches == sizes.num_envs * unrolls
        assert sizes.unroll_length == base.unroll_length
        assert sizes.num_minibatches <= base.num_minibatches


def test_scaling_to_the_base_size_gives_the_base_back_and_matches_the_guides():
    assert scale_sizes(CARTPOLE, 2048) == CARTPOLE
    assert scale_sizes(CARTPOLE, 1024) == BatchSizes(1024, 512, 32, 30)  # 1024 envs, batch 512
    assert scale_sizes(ODD, 256) == BatchSizes(256, 128, 24, 20)  # 256 * 12 sequences in 24 minibatches
    thirds = BatchSizes(999, 333, 3, 20)  # one unroll per env, 3 minibatches
    assert scale_sizes(thirds, 256) == BatchSizes(256, 128, 2, 20)  # 256 sequences do not split into 3


def test_smaller_sizes_halves_the_environments_and_keeps_the_rules():
    sizes, seen = CARTPOLE, []
    while sizes is not None:
        assert_valid(sizes)
        seen.append(sizes.num_envs)
        sizes = smaller_sizes(sizes)
    assert seen == [2048 // 2**k for k in range(12)]  # 2048, 1024, ..., 1
    assert smaller_sizes(CARTPOLE) == BatchSizes(1024, 512, 32, 30)


def test_smaller_sizes_of_an_odd_configuration_stays_valid():
    sizes = smaller_sizes(ODD)
    assert sizes.num_envs == 500
    assert_valid(sizes)
    assert sizes.batch_size * sizes.num_minibatches == 500 * 12


def test_smaller_sizes_ends_below_one_environment():
    assert smaller_sizes(BatchSizes(1, 1, 1, 10)) is None
    assert smaller_sizes(BatchSizes(3, 3, 1, 10)) == BatchSizes(1, 1, 1, 10)
