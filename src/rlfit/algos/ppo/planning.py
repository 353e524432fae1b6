"""How the memory planner sizes PPO: the most environments that fit, in the config's proportions.

PPO's memory grows with `num_envs` (rollout buffer, shuffled copy, per-minibatch activations, environment
state), so the candidates are the config's proportions at powers of two (`rlfit.algos.ppo.candidates`) and
the choice is the largest that fits, capped on a CPU where more environments step no faster. Pure Python.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from rlfit.algos.contract import Candidate, Choice, MemoryRules
from rlfit.algos.ppo.candidates import MAX_NUM_ENVS, candidate_sizes, is_valid, scale_sizes
from rlfit.algos.ppo.sizes import BatchSizes, config_sizes
from rlfit.hardware.cpu_envs import CPU_ENVS_PER_CORE
from rlfit.hardware.units import format_bytes

if TYPE_CHECKING:
    from rlfit.config.schema import Config

PROBE_NUM_ENVS = (384, 3072)
"""The two sizes compiled for the fit when no cap bounds the choice (an accelerator): compile-only, and not powers
of two, so never a candidate the planner chooses: training never compiles a probe's size again. Far apart and
not tiny: XLA's buffer reuse at a few dozen environments is not yet proportional (a line through 24 and 48
under-predicted the toy step at 512 by 13%); a step's compile takes about as long at 16 environments as at 2048."""

PARTNER_FRACTIONS = ((3, 8), (3, 4), (3, 16))
"""Where a cap bounds the choice (a CPU), the second probe's environments as a fraction of the cap's candidate:
the first of these that keeps its `num_minibatches` (3/8 of 512 = 192; never a power of two, never chosen)."""


def measured_sizes(config: Config, cap: int | None = None) -> tuple[BatchSizes, ...]:
    """The probes, in the config's proportions. With a cap (a CPU): the largest candidate within it, the size
    training runs whenever memory does not limit, and one at PARTNER_FRACTIONS of its environments. Without
    (or when no partner keeps the candidate's `num_minibatches`): PROBE_NUM_ENVS, or the smallest doubling of
    them where both keep the config's `num_minibatches` and unroll length. Either way every per-environment
    buffer of the step (rollout, shuffled copy, minibatch activations, environment state) has the same shape at
    both probes and at the candidates between them up to its `num_envs` axis, so the bytes are a line in
    `num_envs`."""
    base = config_sizes(config)
    within = [sizes for sizes in candidate_sizes(base) if cap is not None and sizes.num_envs <= cap]
    if within:
        likely = within[-1]
        for numerator, denominator in PARTNER_FRACTIONS:
            partner = scale_sizes(base, likely.num_envs * numerator // denominator)
            if partner.num_minibatches == likely.num_minibatches and is_valid(partner):
                return likely, partner
    small, large = PROBE_NUM_ENVS
    while large <= MAX_NUM_ENVS:
        probes = tuple(scale_sizes(base, n) for n in (small, large))
        if all(p.num_minibatches == base.num_minibatches for p in probes):
            return probes
        small, large = 2 * small, 2 * large
    return tuple(scale_sizes(base, n) for n in PROBE_NUM_ENVS)


def largest(candidates: Sequence[Candidate], max_num_envs: int | None = None) -> Candidate | None:
    """The fitting candidate with the most environments (up to `max_num_envs`, if given), or None."""
    fitting = [c for c in candidates if c.fits and (max_num_envs is None or c.sizes.num_envs <= max_num_envs)]
    return max(fitting, key=lambda c: c.sizes.num_envs) if fitting else None


def shown_candidates(candidates: Sequence[Candidate]) -> tuple[Candidate, ...]:
    """Every candidate that fits, then the first that does not (larger ones fit even less)."""
    shown: list[Candidate] = []
    for candidate in sorted(candidates, key=lambda c: c.sizes.num_envs):
        shown.append(candidate)
        if not candidate.fits:
            break
    return tuple(shown)


def choose(config: Config, judge: Callable[[BatchSizes], Candidate], cap: int | None) -> Choice:
    """The largest power-of-two `num_envs` in the config's proportions that fits, at most `cap` (if given)."""
    candidates = tuple(judge(sizes) for sizes in candidate_sizes(config_sizes(config)))
    chosen, most = largest(candidates, cap), largest(candidates)
    if chosen is not None and most is not None and cap is not None and most.sizes.num_envs > cap:
        reason = (f"chose num_envs={chosen.sizes.num_envs} (predicted {format_bytes(chosen.predicted_bytes)}): "
                  f"capped at {cap} environments on a CPU ({CPU_ENVS_PER_CORE} per core), where more do not step faster "
                  f"(up to {most.sizes.num_envs} would fit the budget)")
    elif chosen is not None:
        reason = (f"chose num_envs={chosen.sizes.num_envs}, the largest power of two whose predicted "
                  f"{format_bytes(chosen.predicted_bytes)} fits the budget")
    else:
        reason = "no number of environments fits the budget"
    fix = "free device memory, pass a larger --device-memory, or use smaller networks (ppo.value_hidden)"
    smallest = min(candidates, key=lambda c: c.sizes.num_envs) if candidates else judge(config_sizes(config))
    return Choice(shown_candidates(candidates), chosen, (reason,), smallest, fix)


MEMORY_RULES: MemoryRules[BatchSizes] = MemoryRules(
    columns=("num_envs", "batch_size", "num_minibatches", "unroll_length"),
    measured_sizes=measured_sizes,
    stored_transitions=lambda sizes: 0,
    choose=choose,
)
