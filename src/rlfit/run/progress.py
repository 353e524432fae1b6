"""A run's host-side counters (`Progress`): iteration, env steps, the evaluation's bookkeeping and the run's events,
exact Python numbers checkpointed with the state (its meta.json `progress`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from collections.abc import Mapping

from rlfit.algos.contract import JsonValue

Event = dict[str, JsonValue]
"""One of a run's events (an out-of-memory back-off), as metrics.jsonl and summary.json's `events` hold it."""


@dataclass
class Progress:
    """Host-side counters (exact Python integers, checkpointed with the state)."""

    iteration: int = 0
    env_steps: int = 0
    best_eval_reward: float | None = None
    last_eval_reward: float | None = None
    evals_without_improvement: int = 0
    """Evaluations in a row that did not beat the best by more than `run.early_stop_min_delta`."""
    last_description_length_bits: float | None = None
    """The policy's mean description length of an observation at the last evaluation (a bottleneck's rate)."""
    last_randomized_eval_reward: float | None = None
    """With domain randomization: the last evaluation's mean return on freshly drawn models."""
    events: list[Event] = field(default_factory=list)

    @classmethod
    def from_record(cls, saved: Mapping[str, object]) -> Progress:
        """The counters from a checkpoint's record (its meta.json `progress`)."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in saved.items() if k in names})  # type: ignore[arg-type]  # JSON read as written

    def copy(self) -> Progress:
        """An independent copy (its own list of events)."""
        return dataclasses.replace(self, events=list(self.events))
