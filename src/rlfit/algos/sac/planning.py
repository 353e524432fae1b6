"""How the memory planner sizes SAC: the largest replay buffer, up to the config's, that fits.

SAC's memory is its replay buffer (bytes per transition x capacity, fitted from XLA's analysis of the step at
two capacities) plus the compiled step (which grows with `num_envs`). `num_envs` and `batch_size` stay the
config's: with `grad_updates_per_step` they set how many updates each collected transition gets, a choice of
the algorithm, not of the device. The buffer is sized in whole policy steps of `num_envs` transitions, from
`min_replay_size` (which the prefill needs; at least 2 policy steps) up to `max_replay_size`. Pure Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlfit.algos.contract import MemoryRules
from rlfit.algos.sac.sizes import SACSizes, config_sizes


def measured_sizes(config: Any) -> tuple[SACSizes, ...]:
    """The config's sizes at (num_envs, 2 capacity), (2 num_envs, 2 capacity), (num_envs, 3 capacity): the
    model's three coefficients (compile-only, so the capacity costs nothing). Capacity is at least the config's
    buffer, so no probe is a size the planner can choose (training never compiles a probe's size again)."""
    base = config_sizes(config)
    capacity = max(base.max_replay_size, 4 * base.num_envs)  # 2 policy steps even at 2 num_envs
    return (base._replace(max_replay_size=2 * capacity),
            base._replace(num_envs=2 * base.num_envs, max_replay_size=2 * capacity),
            base._replace(max_replay_size=3 * capacity))


def stored_transitions(sizes: SACSizes) -> int:
    """The replay capacity: max_replay_size rounded down to whole policy steps of num_envs."""
    return sizes.max_replay_size // sizes.num_envs * sizes.num_envs


def min_policy_steps(config: Any) -> int:
    """Rows the smallest allowed buffer has: min_replay_size in whole policy steps, at least 2."""
    return max(2, -(-config.sac.min_replay_size // config.sac.num_envs))


def largest_fitting_rows(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest rows in [low, high] with fits(rows), given fits(low) and not fits(high) (fits is monotone)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def choose(config: Any, judge: Callable[[SACSizes], Any], cap: int | None) -> Any:
    """The config's buffer if it fits, else the largest whole number of policy steps between min_replay_size
    and max_replay_size that fits; None when even the smallest does not."""
    from rlfit.planning.planner import Choice
    from rlfit.planning.units import format_bytes

    base = config_sizes(config)
    n = base.num_envs

    def at(rows: int) -> Any:
        return judge(base._replace(max_replay_size=rows * n))

    requested, smallest = judge(base), at(min_policy_steps(config))
    reasons = [f"num_envs={n} and batch_size={base.batch_size} stay the config's (with grad_updates_per_step "
               "they set the updates per collected transition); the planner sizes the replay buffer"]
    if requested.fits:
        chosen = requested
        reasons.append(f"max_replay_size={base.max_replay_size:,} from the config fits "
                       f"(predicted {format_bytes(requested.predicted_bytes)})")
    elif smallest.fits:
        rows = largest_fitting_rows(lambda r: at(r).fits, min_policy_steps(config), base.max_replay_size // n)
        chosen = at(rows)
        reasons.append(f"memory, not the config, set max_replay_size: the config's {base.max_replay_size:,} "
                       f"transitions are predicted at {format_bytes(requested.predicted_bytes)}, over the budget; "
                       f"chose {chosen.sizes.max_replay_size:,}, the most whole policy steps that fit "
                       f"(predicted {format_bytes(chosen.predicted_bytes)})")
    else:
        chosen = None
        reasons.append(f"even the smallest buffer, {smallest.sizes.max_replay_size:,} transitions "
                       f"(sac.min_replay_size={config.sac.min_replay_size:,} in whole policy steps of {n} "
                       "environments, at least 2), does not fit")
    shown = {c.sizes.max_replay_size: c for c in (smallest, chosen, requested) if c is not None}
    fix = (f"sac.min_replay_size={config.sac.min_replay_size:,} needs at least that buffer: lower it (or "
           "sac.num_envs, sac.batch_size, the network sizes), or pass a larger --device-memory")
    return Choice(tuple(shown[k] for k in sorted(shown)), chosen, tuple(reasons), smallest, fix)


MEMORY_RULES = MemoryRules(
    columns=("num_envs", "batch_size", "max_replay_size"),
    measured_sizes=measured_sizes,
    stored_transitions=stored_transitions,
    choose=choose,
)
