"""An experiment's seed groups (`rlfit.study.group_runner`): a variant's new trials trained in groups of the
planned size, one compiled program each, and stopped or killed groups continued together. Whatever a group
leaves (a group of one, one that ran out of memory, lanes that cannot continue together) `rlfit.study.schedule.train_pending`
trains alone afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from rlfit.rundir.layout import write_json
from rlfit.study.experiment import FAILED_FILE, Experiment, ProgressLine
from rlfit.study.manifest import Trial


def train_new_in_groups(experiment: Experiment, trials: list[Trial], progress: ProgressLine, done: int) -> None:
    """Trains new trials of one variant in seed groups of the planned size (`rlfit.planning.seed_groups`), each
    group one compiled program; a group whose compiled program does not fit is halved. Trials it leaves (a
    group of one, a group that ran out of memory, resumable from their checkpoints) train alone afterwards."""
    from rlfit.config.schema import resolve
    from rlfit.parallel.distributed import process_count
    from rlfit.hardware.probe import probe_device
    from rlfit.run.opener import open_session
    from rlfit.run.probes import StepProbes
    from rlfit.planning.seed_groups import group_fits, seeds_per_program
    from rlfit.study.group_runner import train_seed_group
    from rlfit.run.seed_group import SeedGroup
    from rlfit.run.trainer import Trainer

    manifest = experiment.manifest
    config = resolve(manifest.env, manifest.preset, overrides=manifest.trial_overrides(trials[0]))
    if config.run.wandb != "off" or process_count() > 1:
        return  # one W&B run, and one jax.distributed program, per process at a time: alone
    config, plan, env = open_session(config, StepProbes())
    device = probe_device()
    size, reason = seeds_per_program(plan, len(trials), manifest.seeds_per_program, device)
    if size < 2:
        return
    group = SeedGroup.build(Trainer.build(config, plan, env=env), [t.seed for t in trials[:size]])
    while True:
        group.compile()
        fits, why = group_fits(group.compiled_step, device)
        if fits:
            break
        size //= 2
        if size < 2:
            return
        reason = f"halved to {size} seeds per program: {why}"
        group = group.with_seeds([t.seed for t in trials[:size]])
    progress.say(f"{manifest.name}: {variant_label(trials)} in groups of {size} seeds per program ({reason})")
    for start in range(0, len(trials) - 1, size):
        chunk = trials[start:start + size]
        if len(chunk) < 2:
            break
        member = group.with_seeds([t.seed for t in chunk])
        member.reused = start > 0  # the first group compiled the programs; the others of its size reuse them
        if member.compiled_step is None:  # a last, smaller group
            member.compile()
        configs = [config.replace(run={"seed": t.seed}) for t in chunk]
        paths = [experiment.trial_dir(t) for t in chunk]
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
        note = {"seeds": [t.seed for t in chunk], "size": len(chunk), "reason": reason}
        train_as_group(experiment, chunk, progress, done, "", lambda: train_seed_group(
            member, configs, paths, progress.say, note))


def train_as_group(experiment: Experiment, members: list[Trial], progress: ProgressLine, done: int, what: str,
                   train: Callable[[], list[Any] | None]) -> None:
    """Runs `train` (a seed group of `members`), showing progress and recording each failed lane's FAILED_FILE;
    out of device memory, says so: the members continue one by one from their checkpoints."""
    from rlfit.planning.out_of_memory import OutOfMemory

    progress.show(done, f"{members[0].variant} seeds {', '.join(str(t.seed) for t in members)} in one program{what}",
                  running_count=len(members))
    started = time.perf_counter()
    try:
        outcomes = train()
    except OutOfMemory as error:  # no smaller sizes for the group (or run.oom_backoff=false)
        progress.say(f"{experiment.manifest.name}: the group ran out of device memory ({error}); its trials "
                     "continue one by one from their checkpoints")
        return
    if outcomes is None:  # could not continue together: each resumes alone
        return
    progress.durations += [(time.perf_counter() - started) / len(members)] * len(members)
    for outcome in outcomes:
        if outcome.failure is not None:
            write_json(outcome.run_dir.path / FAILED_FILE, {"error": outcome.failure, "kind": "NonFiniteError"})


def resume_groups(experiment: Experiment, partial: list[Trial], progress: ProgressLine, done: int) -> None:
    """Continues stopped or killed seed groups together (bit-identical to groups never stopped): the started
    trials of one variant that were trained in the same group (their plan.json says so) and stopped at the
    same checkpoint. Trials it leaves resume alone afterwards."""
    from rlfit.study.group_runner import continue_seed_group, recorded_group

    groups: dict[tuple[int, ...], list[Trial]] = {}
    notes = {}
    for trial in partial:
        note = recorded_group(experiment.trial_dir(trial))
        if note is not None:
            groups.setdefault(tuple(note["seeds"]), []).append(trial)
            notes[tuple(note["seeds"])] = note
    for seeds, members in groups.items():
        if len(members) > 1:
            paths = [experiment.trial_dir(t) for t in members]
            train_as_group(experiment, members, progress, done, " (resumed)",
                           lambda: continue_seed_group(paths, progress.say, notes[seeds]))


def variant_label(trials: Sequence[Trial]) -> str:
    return f"variant {trials[0].variant}, seeds {', '.join(str(t.seed) for t in trials)}"
