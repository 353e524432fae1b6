"""Out-of-memory back-off for the host loop: the next smaller sizes, a Trainer rebuilt at them, and the state and
counters to continue from. Recognising the error and naming the sizes is `rlfit.planning.out_of_memory`'s and the
algorithm's (`Algorithm.smaller_sizes`); this module rebuilds. It writes nothing: the runner records the
`BackOff` it returns (metrics rewound and the event logged, plan.json rewritten, the console's totals).

    backed = smaller(trainer, error_message, progress, where, events)   # or raises OutOfMemory
    stepper, state, progresses, backed = recover(error_message, stepper, lanes, start, events)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax

from rlfit.algos.contract import TrainState
from rlfit.parallel.distributed import all_reach, process_count
from rlfit.planning.out_of_memory import OutOfMemory, out_of_memory_message
from rlfit.planning.plan import Plan
from rlfit.run.progress import Event, Progress
from rlfit.run.stepper import Stepper
from rlfit.run.trainer import Trainer, forget_programs
from rlfit.rundir.layout import RunDir

BACK_OFF_WAIT_S = 120.0
"""Over several processes, how long one that ran out of memory waits for all the others to run out too (they
back off together, to the same sizes, from the same checkpoint) before it stops the run instead."""


class BackOff(NamedTuple):
    """One back-off: the rebuilt trainer and what the runner records."""

    trainer: Trainer[TrainState]
    """The Trainer at the smaller sizes (the same config and environment)."""
    event: Event
    """The `out_of_memory_backoff` event (metrics.jsonl, summary.json's `events`)."""
    reason: str
    """One line for the console and the plan's reasons."""

    @property
    def plan(self) -> Plan:
        return self.trainer.plan


class Recovery(NamedTuple):
    """Where training continues after a back-off."""

    stepper: Stepper[TrainState]
    """The lanes' programs on the trainer at the smaller sizes."""
    state: TrainState
    """Every lane's last good state resized to those sizes (stacked for a group)."""
    progress: list[Progress]
    """Each lane's counters, `events` ending with this back-off's."""
    backed: BackOff


class Start(NamedTuple):
    """What a session's back-off goes back to: a host copy of its starting state (None: the lanes' newest
    checkpoints) and each lane's counters then."""

    state: TrainState | None
    progress: list[Progress]


def agree_to_back_off(trainer: Trainer[TrainState], backoffs_so_far: int) -> None:
    """Over several processes (with back-off allowed): returns once every process has run out of memory too,
    so that all back off together, to the same sizes, before any of them computes on arrays again; raises
    OutOfMemory when one has not within BACK_OFF_WAIT_S (it may be waiting for this one in a collective).
    `backoffs_so_far` names the barrier (the run's back-offs before this one)."""
    config, sizes = trainer.config, trainer.plan.sizes
    if process_count() == 1 or not config.run.oom_backoff:
        return
    if not all_reach(f"rlfit-out-of-memory-{backoffs_so_far}", BACK_OFF_WAIT_S):
        raise OutOfMemory(f"out of device memory at {config.algo}.num_envs={sizes.num_envs} on process "
                          f"{jax.process_index()} but not on every process of the run within {BACK_OFF_WAIT_S:.0f} "
                          f"s, so it cannot back off; lower {config.algo}.num_envs or use --num-envs auto") from None


def smaller(trainer: Trainer[TrainState], message: str, progress: Progress, where: str) -> BackOff:
    """`trainer` rebuilt at the next smaller valid sizes after an out-of-memory error (`message`) while creating
    the starting state (`where` 'init') or at `progress`'s iteration ('step'); raises OutOfMemory where there are
    none (or back-off is off)."""
    from rlfit.algos.registry import algorithm

    allowed = trainer.config.run.oom_backoff
    old = trainer.plan.sizes
    sizes = algorithm(trainer.config.algo).smaller_sizes(old, where) if allowed else None
    if sizes is not None and sizes.num_envs % trainer.plan.devices:
        sizes = None  # smaller sizes must still split evenly over the run's devices
    if sizes is None:
        raise OutOfMemory(out_of_memory_message(trainer.config.algo, old.num_envs, allowed)) from None
    changed = ", ".join(f"{name}={value}" for name, value in sizes._asdict().items() if value != getattr(old, name))
    doing = "creating the starting state" if where == "init" else f"iteration {progress.iteration}"
    reason = f"out of memory at num_envs={old.num_envs} ({doing}); backed off to {changed}"
    plan = trainer.plan.with_sizes(sizes, trainer.config, (progress.iteration, progress.env_steps), reason)
    forget_programs()  # memory is short: release programs kept for other seeds
    event: Event = {"event": "out_of_memory_backoff", "iteration": progress.iteration, "env_steps": progress.env_steps,
                    "from": {**old._asdict()}, "to": {**sizes._asdict()}, "error": message.splitlines()[0][:300]}
    return BackOff(Trainer.build(trainer.config, plan, env=trainer.env), event, reason)


def recover(message: str, stepper: Stepper[TrainState], lanes: Sequence[tuple[Trainer[TrainState], RunDir]], start: Start,
            events: list[Event]) -> Recovery:
    """After an out-of-memory error in an iteration (or its compile): every process agrees, each lane's last good
    state is read (`last_good_state`), the trainer rebuilt smaller and every state resized to it. `lanes`: each
    lane's trainer (its config) and run directory; `events`: the run's events so far (each returned progress holds
    them and this back-off's)."""
    agree_to_back_off(stepper.trainer, len(events))
    goods = [last_good_state(trainer, directory, Start(None if start.state is None else
                                                       stepper.lane(start.state, index), [progress]))
             for index, ((trainer, directory), progress) in enumerate(zip(lanes, start.progress, strict=True))]
    backed = smaller(stepper.trainer, message, goods[0][1], "step")
    states = []
    for state, progress in goods:
        progress.events = [*events, backed.event]
        env_key = jax.random.fold_in(state.key, progress.iteration)
        states.append(backed.trainer.learner.resize(state, env_key))
    rebuilt = stepper.rebuilt(backed.trainer)
    return Recovery(rebuilt, rebuilt.stack(states), [progress for _, progress in goods], backed)


def last_good_state(trainer: Trainer[TrainState], run_dir: RunDir, start: Start) -> tuple[TrainState, Progress]:
    """One lane's `start`: its host copy of the session's starting state when kept, else the newest checkpoint (at
    or past the session's start), read with the sizes its own record names (a second back-off can come before the
    first one's sizes were saved) and its replay buffer refilled if it was saved without one. The counters are a
    new object."""
    start_state, (start_progress,) = start
    if start_state is None:
        from rlfit.checkpoints.format import dropped_leaves
        from rlfit.run.restore import restore_newest

        restored, state, meta = restore_newest(run_dir, trainer.config, env=trainer.env)  # not loaded again
        if dropped_leaves(meta):
            assert restored.learner.refill is not None, "only a state that can be refilled leaves rows out"
            state = restored.learner.refill(state)
        return state, Progress.from_record(meta.progress)
    return jax.tree.map(jax.numpy.asarray, start_state), start_progress.copy()
