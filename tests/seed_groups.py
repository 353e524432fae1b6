"""What the seed-group tests share: a seed trained in a group beside the same seed trained alone."""

from __future__ import annotations

from typing import Any, NamedTuple

from rlfit.study.seed_group import SeedGroup


class GroupAndAlone(NamedTuple):
    group: SeedGroup
    grouped: Any
    """The group's stacked state after the iterations."""
    grouped_metrics: Any
    """The group's last step metrics (each leaf [num_seeds])."""
    alone: Any
    """The solo state of `seed` after the same iterations (the solo run's compiled step)."""
    alone_metrics: Any


def train_group_and_alone(trainer: Any, seeds: tuple[int, ...], seed: int, iterations: int) -> GroupAndAlone:
    """`iterations` steps of `seeds` in one group and of `seed` (one of them) alone, from their fresh states."""
    group = SeedGroup.build(trainer, seeds)
    grouped = group.init()
    alone = trainer.learner.init(seed)
    step = trainer.compile_iteration(alone)
    grouped_metrics = alone_metrics = None
    for _ in range(iterations):
        grouped, grouped_metrics = group.step(grouped)
        alone, alone_metrics = step(alone)
    return GroupAndAlone(group, grouped, grouped_metrics, alone, alone_metrics)
