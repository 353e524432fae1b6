"""When a run stops before its last iteration: a time budget, or an eval reward that stopped improving or
reached its target. Pure host-side rules on a few numbers; the runner asks them after every iteration.

    rules = StopRules.from_config(config.run)
    rules.after_eval(progress)        -> 'target_reward' | 'early_stop' | None
    rules.before_next(elapsed, iteration_s, save_s) -> 'time_budget' | None
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlfit.config.values import parse_duration, parse_reward

if TYPE_CHECKING:
    from rlfit.config.schema import RunConfig

TIME_BUDGET_SAFETY = 1.5
"""The next iteration starts only if 1.5 x (the slowest iteration + evaluation + checkpoint seen) still fits."""


@dataclass(frozen=True)
class StopRules:
    """A run's stopping rules, from its `run` config section."""

    time_budget_s: float | None = None
    patience: int = 0
    min_delta: float = 0.0
    target_reward: float | None = None

    @classmethod
    def from_config(cls, run: RunConfig) -> StopRules:
        return cls(parse_duration(run.time_budget, "run.time_budget"), run.early_stop_patience,
                   run.early_stop_min_delta, parse_reward(run.target_reward, "run.target_reward"))

    @staticmethod
    def evals_without_improvement(count: int, reward: float, best_before: float | None, min_delta: float) -> int:
        """The count of evaluations in a row that did not beat the best so far by more than `min_delta`."""
        return 0 if best_before is None or reward > best_before + min_delta else count + 1

    def after_eval(self, reward: float, evals_without_improvement: int) -> str | None:
        """'target_reward' when `reward` reached the target, 'early_stop' when patience ran out, else None."""
        if self.target_reward is not None and reward >= self.target_reward:
            return "target_reward"
        if self.patience and evals_without_improvement >= self.patience:
            return "early_stop"
        return None

    def before_next(self, elapsed_s: float, slowest_step_s: float) -> str | None:
        """'time_budget' when one more step (iteration, evaluation and checkpoint: `slowest_step_s`, the
        slowest seen) would not fit in the budget with the safety factor, else None."""
        if self.time_budget_s is None:
            return None
        return "time_budget" if elapsed_s + TIME_BUDGET_SAFETY * slowest_step_s > self.time_budget_s else None
