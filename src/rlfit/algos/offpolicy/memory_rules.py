"""How the memory planner sizes an off-policy algorithm (SAC, FastTD3): the largest replay buffer, up to the
config's, that fits.

Its memory is its replay buffer (bytes per transition x capacity, fitted from XLA's analysis of the step at
two capacities) plus the compiled step (which grows with `num_envs`). `num_envs` and `batch_size` stay the
config's: with `grad_updates_per_step` they set how many updates each collected transition gets, a choice of
the algorithm, not of the device. The buffer is sized in whole policy steps of `num_envs` transitions, from
`min_replay_size` (which the prefill needs; at least the algorithm's fewest policy steps) up to
`max_replay_size`. Each algorithm's `planning` module calls `replay_memory_rules` with its config section. Pure
Python.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar, cast

from rlfit.algos.contract import Candidate, Choice, MemoryRules
from rlfit.algos.offpolicy.types import ReplaySettings
from rlfit.algos.offpolicy.sizes import ReplaySizes, section_sizes
from rlfit.hardware.units import format_bytes

if TYPE_CHECKING:
    from rlfit.config.schema import Config

SectionT = TypeVar("SectionT", bound=ReplaySettings)
"""The algorithm's config section (`SACConfig`, `FastTD3Config`)."""


def capacity(candidate: Candidate) -> int:
    """The replay capacity of a judged candidate (the rules judge `ReplaySizes`)."""
    return cast(ReplaySizes, candidate.sizes).max_replay_size


def two_rows(settings: ReplaySettings) -> int:
    """The fewest policy steps SAC's buffer may hold: 2."""
    return 2


def replay_memory_rules(section: str, fewest_rows: Callable[[SectionT], int]) -> MemoryRules[ReplaySizes]:
    """The memory rules of a replay-buffer algorithm whose config section `section` has the replay size fields
    (`num_envs`, `batch_size`, `min_replay_size`, `max_replay_size`, `policy_steps_per_iteration`);
    `fewest_rows(section config)` is the fewest policy steps its buffer may hold (SAC: 2)."""
    return MemoryRules(
        columns=("num_envs", "batch_size", "max_replay_size"),
        measured_sizes=partial(measured_sizes, section, fewest_rows),
        stored_transitions=stored_transitions,
        choose=partial(choose_buffer, section, fewest_rows),
    )


def config_sizes(section: str, config: Config) -> ReplaySizes:
    """The sizes of the config's section `section`."""
    settings: ReplaySettings = getattr(config, section)
    return section_sizes(settings)


def measured_sizes(section: str, fewest_rows: Callable[[SectionT], int], config: Config, cap: int | None = None
                   ) -> tuple[ReplaySizes, ...]:
    """The config's sizes (what `choose_buffer` picks whenever they fit), then (2 num_envs, its capacity) and
    (num_envs, 2 capacity): the model's three coefficients. Only the first is a size the planner can choose
    (training reuses its compile there); the others are compile-only. A capacity too small to hold the fewest
    rows at 2 num_envs is raised to that for the probes, none of which is then the config's. `cap` (the most
    environments worth running) does not apply: `num_envs` is the config's."""
    base = config_sizes(section, config)
    settings: SectionT = getattr(config, section)
    rows = fewest_rows(settings)
    capacity = max(base.max_replay_size, 2 * rows * base.num_envs)  # the fewest rows even at 2 num_envs
    first = base if capacity == base.max_replay_size else base._replace(max_replay_size=3 * capacity)
    return (first, base._replace(num_envs=2 * base.num_envs, max_replay_size=capacity),
            base._replace(max_replay_size=2 * capacity))


def min_policy_steps(section: str, fewest_rows: Callable[[SectionT], int], config: Config) -> int:
    """Rows the smallest allowed buffer has: min_replay_size in whole policy steps, at least fewest_rows."""
    settings: SectionT = getattr(config, section)
    return max(fewest_rows(settings), -(-settings.min_replay_size // settings.num_envs))


def choose_buffer(section: str, fewest_rows: Callable[[SectionT], int], config: Config,
                  judge: Callable[[ReplaySizes], Candidate], cap: int | None) -> Choice:
    """The config's buffer if it fits, else the largest whole number of policy steps between min_replay_size
    and max_replay_size that fits; None when even the smallest does not."""
    base = config_sizes(section, config)
    n = base.num_envs

    def at(rows: int) -> Candidate:
        return judge(base._replace(max_replay_size=rows * n))

    fewest = min_policy_steps(section, fewest_rows, config)
    requested, smallest = judge(base), at(fewest)
    reasons = [f"num_envs={n} and batch_size={base.batch_size} stay the config's (with grad_updates_per_step "
               "they set the updates per collected transition); the planner sizes the replay buffer"]
    chosen, reason = _chosen_buffer(section, fewest_rows, config, base, at, fewest, requested, smallest)
    reasons.append(reason)
    shown = {capacity(c): c for c in (smallest, chosen, requested) if c is not None}
    fix = (f"{section}.min_replay_size={getattr(config, section).min_replay_size:,} needs at least that buffer: "
           f"lower it (or {section}.num_envs, {section}.batch_size, the network sizes), or pass a larger "
           "--device-memory")
    return Choice(tuple(shown[k] for k in sorted(shown)), chosen, tuple(reasons), smallest, fix)


def _chosen_buffer(section: str, fewest_rows: Callable[[SectionT], int], config: Config, base: ReplaySizes,
                   at: Callable[[int], Candidate], fewest: int, requested: Candidate, smallest: Candidate
                   ) -> tuple[Candidate | None, str]:
    """The judged buffer `choose_buffer` picks (None when none fits) and the reason it gives."""
    n = base.num_envs
    if requested.fits:
        return requested, (f"max_replay_size={base.max_replay_size:,} from the config fits "
                           f"(predicted {format_bytes(requested.predicted_bytes)})")
    if smallest.fits:
        rows = largest_fitting_rows(lambda r: at(r).fits, fewest, base.max_replay_size // n)
        chosen = at(rows)
        return chosen, (f"memory, not the config, set max_replay_size: the config's {base.max_replay_size:,} "
                        f"transitions are predicted at {format_bytes(requested.predicted_bytes)}, over the "
                        f"budget; chose {capacity(chosen):,}, the most whole policy steps that fit "
                        f"(predicted {format_bytes(chosen.predicted_bytes)})")
    return None, (f"even the smallest buffer, {capacity(smallest):,} transitions "
                  f"({section}.min_replay_size={getattr(config, section).min_replay_size:,} in whole policy "
                  f"steps of {n} environments, at least {fewest_rows(getattr(config, section))}), does not fit")


def stored_transitions(sizes: ReplaySizes) -> int:
    """The replay capacity: max_replay_size rounded down to whole policy steps of num_envs."""
    return sizes.max_replay_size // sizes.num_envs * sizes.num_envs


def largest_fitting_rows(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest rows in [low, high] with fits(rows), given fits(low) and not fits(high) (fits is monotone)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low

