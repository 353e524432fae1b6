"""A loop's lanes and the one place they are opened: each lane a run directory with its sinks, checkpointer and
counters, trained through `rlfit.run.loop.Runner` with the signal handler and the utilization sampler around it.
A single run is one lane (`rlfit.run.session`, `rlfit.run.resume`); a seed group several
(`rlfit.study.group_runner`).

    results = train_lanes(stepper, [LaneSpec(trainer, directory), ...], console=console)   # one RunResult a lane
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from rlfit.algos.contract import TrainState
from rlfit.checkpoints.schedule import Checkpointer, SaveFailed
from rlfit.config.schema import Config
from rlfit.hardware.utilization import UtilizationSampler
from rlfit.parallel.distributed import is_writer
from rlfit.rundir.layout import RunDir
from rlfit.run.loop import Runner, RunResult
from rlfit.run.progress import Progress
from rlfit.run.signals import StopFlag, raise_if_signalled
from rlfit.run.stepper import Stepper
from rlfit.run.trainer import Trainer
from rlfit.sinks import Sink, Sinks
from rlfit.sinks.console import ConsoleSink
from rlfit.sinks.jsonl import JsonlSink
from rlfit.sinks.tensorboard import TensorBoardSink
from rlfit.sinks.wandb import open_wandb_sink


class LaneSpec(NamedTuple):
    """What a lane is opened from."""

    trainer: Trainer[TrainState]
    """The loop's trainer with this lane's config (its seed): what its checkpoints and policy record."""
    directory: RunDir
    progress: Progress | None = None
    """Its counters where it resumes (None: fresh)."""
    note: dict[str, Any] | None = None
    """The seed group it trains in (summary.json's and plan.json's `seed_group`), None for a single run."""


@dataclass
class Lane:
    """One lane of the loop: a run directory and what writes into it."""

    trainer: Trainer[TrainState]
    directory: RunDir
    sinks: Sinks
    checkpointer: Checkpointer
    progress: Progress = field(default_factory=Progress)
    note: dict[str, Any] | None = None
    result: RunResult | None = None
    """How the lane ended; None while it trains."""


def open_sinks(config: Config, directory: RunDir, console: ConsoleSink | None = None, writer: bool = True) -> Sinks:
    """Where a run's metrics go: metrics.jsonl, TensorBoard and W&B (when configured) in `directory`, and the
    console; only the console on a process that does not write (`writer` False)."""
    files: list[Sink] = [JsonlSink(directory.metrics), TensorBoardSink(directory.tensorboard, directory.metrics)
                         ] if writer else []
    wandb_sink = open_wandb_sink(config, directory, warn=console.message if console else None) if writer else None
    files += [wandb_sink] if wandb_sink else []
    return Sinks(files + ([console] if console else []))


def open_lane(stack: contextlib.ExitStack, spec: LaneSpec, console: ConsoleSink | None = None) -> Lane:
    """The lane's sinks (closed with `stack`) and checkpointer; over several processes only process 0 writes."""
    writer = is_writer()
    sinks = open_sinks(spec.trainer.config, spec.directory, console, writer)
    stack.callback(sinks.close)
    checkpointer = Checkpointer(spec.directory, warn=console.message if console else None, sync_metrics=sinks.sync,
                                writer=writer)
    if spec.progress is not None:
        checkpointer.last_saved = spec.progress.iteration  # the checkpoint it resumes from
    return Lane(spec.trainer, spec.directory, sinks, checkpointer, spec.progress or Progress(), spec.note)


def train_lanes(stepper: Stepper[TrainState], specs: Sequence[LaneSpec], state: TrainState | None = None, *,
                console: ConsoleSink | None = None, say: Callable[[str], None] | None = None) -> list[RunResult]:
    """Opens the lanes and trains them from `state` (every lane's, stacked for a group; fresh when None) to the
    plan's end or a stop; one RunResult a lane, in order.

    A file of the run that cannot be written stops the run in one line (exit code 4), the checkpoints written before
    it intact. A run stopped by SIGTERM/SIGINT, saved and closed, raises StopRequested (the signal's exit code).
    """
    say = say or (console.message if console is not None else None)
    try:
        with contextlib.ExitStack() as stack:
            lanes = [open_lane(stack, spec, console) for spec in specs]
            with sampling(stepper.trainer.plan.backend) as sampler, StopFlag() as stop_flag:
                results = Runner(stepper, lanes, stop_flag, say, console, sampler).run(state)
    except OSError as error:
        where = error.filename or specs[0].directory.path
        raise SaveFailed(f"cannot write {where}: {error.strerror or error}; the checkpoints written before are "
                         "intact", f"free space or fix permissions, then `rlfit resume {specs[0].directory.path}`"
                         ) from None
    for result in results:  # once every lane's files are closed
        raise_if_signalled(result.stopped_by)
    return results


@contextlib.contextmanager
def sampling(backend: str) -> Iterator[UtilizationSampler | None]:
    """A started utilization sampler for the backend (None on a CPU), stopped after the block."""
    sampler = UtilizationSampler.for_backend(backend)
    if sampler is not None:
        sampler.start()
    try:
        yield sampler
    finally:
        if sampler is not None:
            sampler.stop()
