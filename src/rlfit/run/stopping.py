"""When a run stops before its last iteration: a time budget, or an eval reward that stopped improving or
reached its target. Pure host-side rules on a few numbers; the runner asks them after every iteration.

    rules = StopRules.from_config(config.run)
    rules.after_eval(progress)        -> 'target_reward' | 'early_stop' | None
    rules.before_next(elapsed, iteration_s, save_s) -> 'time_budget' | None
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from rlfit.errors import UserError

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([hms])")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str, name: str = "duration") -> float | None:
    """Seconds in '11h30m', '20m', '90s', '1.5h' (None for an empty string); UserError for anything else."""
    text = text.strip().lower()
    if not text:
        return None
    parts = _DURATION.findall(text)
    if not parts or _DURATION.sub("", text).strip():
        raise UserError(f"{name} must be a duration such as 20m, 11h30m or 90s, got '{text}'")
    seconds = sum(float(value) * _UNIT_SECONDS[unit] for value, unit in parts)
    if seconds <= 0:
        raise UserError(f"{name} must be longer than 0, got '{text}'")
    return seconds


def parse_reward(text: str, name: str = "reward") -> float | None:
    """The number in `text` (None for an empty string); UserError when it is not a finite number."""
    text = str(text).strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UserError(f"{name} must be a number (or empty for none), got '{text}'")
    return value


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
    def from_config(cls, run: Any) -> StopRules:
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
