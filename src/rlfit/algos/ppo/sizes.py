"""PPO's sizes: what shapes its compiled iteration, and the rule they must satisfy."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from rlfit.errors import UserError

if TYPE_CHECKING:
    from rlfit.config.schema import Config


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


def config_sizes(config: Config) -> BatchSizes:
    p = config.ppo
    return BatchSizes(p.num_envs, p.batch_size, p.num_minibatches, p.unroll_length)


def check_batch_divisibility(num_envs: int, batch_size: int, num_minibatches: int) -> None:
    """Rule: every iteration collects `batch_size * num_minibatches` sequences, a whole number per env."""
    sequences = batch_size * num_minibatches
    if sequences % num_envs == 0:
        return
    fixes = [f"num_minibatches={m}" for m in _nearest_multiples(num_minibatches, num_envs // math.gcd(batch_size, num_envs))]
    fixes += [f"batch_size={b}" for b in _nearest_multiples(batch_size, num_envs // math.gcd(num_minibatches, num_envs))]
    fixes += [f"num_envs={n}" for n in _nearest_divisors(num_envs, sequences)]
    raise UserError(
        f"ppo.batch_size * ppo.num_minibatches ({batch_size} * {num_minibatches} = {sequences}) must be divisible by "
        f"ppo.num_envs ({num_envs}); nearest valid: {', '.join(fixes)}"
    )


def _nearest_multiples(value: int, step: int) -> list[int]:
    """The multiples of `step` just below and just above `value` (below only if positive)."""
    below = (value // step) * step
    above = below + step
    return [m for m in (below, above) if m > 0 and m != value][:2]


def _nearest_divisors(value: int, total: int) -> list[int]:
    """The divisors of `total` just below and just above `value`."""
    divisors = [d for d in range(1, total + 1) if total % d == 0] if total <= 10_000_000 else []
    below = [d for d in divisors if d < value]
    above = [d for d in divisors if d > value]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])
