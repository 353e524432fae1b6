"""What the seed-group tests share: a seed trained in a group beside the same seed trained alone."""

from __future__ import annotations

from typing import Any, NamedTuple

from rlfit.run.seed_group import SeedGroup


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


SLOW_GROUP = ("run.num_timesteps=6400", "run.save_interval=1000", "run.stop_grace_s=2", "run.eval_every=0",
              "run.num_eval_envs=1", "env.episode_length=20")
"""Seeds 0 and 1 of the sleeping toy environment (`tests.toy_env:make_slow`, smoke preset): iterations of 10-15 s
(measured on 2 loaded cores), a stop grace of 2 s, no save but at the start and the end."""


def train_slow_group(root: str) -> None:
    """`python -m tests.seed_groups ROOT`: SLOW_GROUP trained as one seed group, its lanes in ROOT/seed-0 and
    ROOT/seed-1, saying what the loop says on stdout (a line at a time); exits with a signal's exit code where one
    stopped it."""
    import sys
    from pathlib import Path

    from rlfit.config.schema import resolve
    from rlfit.console import say_line
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.planning.plan import make_plan
    from rlfit.run.signals import StopRequested
    from rlfit.run.trainer import Trainer
    from rlfit.study.group_runner import train_seed_group

    config = resolve("tests.toy_env:make_slow", "smoke", overrides=list(SLOW_GROUP))
    configure_jax(config.run.precision)
    group = SeedGroup.build(Trainer.build(config, make_plan(config)), (0, 1))
    try:
        train_seed_group(group, [config.replace(run={"seed": seed}) for seed in group.seeds],
                         [Path(root) / f"seed-{seed}" for seed in group.seeds], say_line,
                         {"seeds": list(group.seeds), "size": 2, "reason": "test"})
    except StopRequested as stopped:
        sys.exit(stopped.exit_code)


if __name__ == "__main__":
    import sys

    train_slow_group(sys.argv[1])
