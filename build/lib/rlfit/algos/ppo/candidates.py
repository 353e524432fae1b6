"""Candidate batch sizes: the config's proportions at other numbers of environments.

A candidate keeps the config's `unroll_length` and its number of unrolls per environment per iteration
(`batch_size * num_minibatches / num_envs`), so each environment collects as much experience per iteration as
before and the batch grows with `num_envs` (as the guides' tables do: 1024 envs with batch 256, 2048 with
512). `num_minibatches` stays the config's where the sequences divide evenly, else the largest divisor below
it. Every candidate satisfies PPO's batch rule. Pure Python, no JAX.
"""

from __future__ import annotations

from rlfit.algos.ppo.sizes import BatchSizes, check_batch_divisibility
from rlfit.errors import UserError

MIN_NUM_ENVS = 16
MAX_NUM_ENVS = 1 << 16
"""Candidates span powers of two from 16 to 65536 environments."""


def unrolls_per_env(sizes: BatchSizes) -> int:
    """Unrolls each environment runs per iteration: batch_size * num_minibatches / num_envs."""
    return sizes.batch_size * sizes.num_minibatches // sizes.num_envs


def scale_sizes(base: BatchSizes, num_envs: int) -> BatchSizes:
    """`base`'s proportions at `num_envs` environments (same unrolls per env, unroll length, minibatching)."""
    sequences = num_envs * unrolls_per_env(base)
    num_minibatches = max(m for m in range(1, min(base.num_minibatches, sequences) + 1) if sequences % m == 0)
    return BatchSizes(num_envs, sequences // num_minibatches, num_minibatches, base.unroll_length)


def is_valid(sizes: BatchSizes) -> bool:
    """True when `sizes` are positive and satisfy PPO's batch rule."""
    if min(sizes) <= 0:
        return False
    try:
        check_batch_divisibility(sizes.num_envs, sizes.batch_size, sizes.num_minibatches)
    except UserError:
        return False
    return True


def candidate_sizes(base: BatchSizes, smallest: int = MIN_NUM_ENVS, largest: int = MAX_NUM_ENVS
                    ) -> tuple[BatchSizes, ...]:
    """`base` scaled to every power-of-two `num_envs` in [smallest, largest], smallest first, valid ones only."""
    powers = [1 << k for k in range(largest.bit_length()) if smallest <= 1 << k <= largest]
    return tuple(sizes for sizes in (scale_sizes(base, n) for n in powers) if is_valid(sizes))


def smaller_sizes(sizes: BatchSizes) -> BatchSizes | None:
    """The next smaller valid configuration (the out-of-memory back-off): half the environments (or the
    largest valid number below that) in `sizes`' proportions: the same unrolls per environment and
    `unroll_length`, `num_minibatches` reduced only where the sequences no longer divide evenly, so every
    environment still collects the same experience per iteration. None below one environment.
    """
    num_envs = sizes.num_envs // 2
    while num_envs >= 1:
        candidate = scale_sizes(sizes, num_envs)
        if is_valid(candidate):
            return candidate
        num_envs -= 1
    return None
