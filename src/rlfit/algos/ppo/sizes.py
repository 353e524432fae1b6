"""PPO's sizes: what shapes its compiled iteration, and the rule they must satisfy."""

from __future__ import annotations

from typing import NamedTuple


class BatchSizes(NamedTuple):
    """The sizes that shape the compiled training iteration."""

    num_envs: int
    batch_size: int
    num_minibatches: int
    unroll_length: int

    @property
    def steps_per_iteration(self) -> int:
        """Policy steps collected per iteration: batch_size * num_minibatches * unroll_length."""
        return self.batch_size * self.num_minibatches * self.unroll_length


def config_sizes(config) -> BatchSizes:
    p = config.ppo
    return BatchSizes(p.num_envs, p.batch_size, p.num_minibatches, p.unroll_length)
