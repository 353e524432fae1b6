"""When and how the runner saves: every `run.save_interval` iterations, at the end, and on a stop request.

Keeps the newest `run.keep_checkpoints` and the best by eval reward, writes the deployable policy beside
them, and turns a failed write into one line (stopping the run unless `run.continue_on_save_error`).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from rlfit.checkpoints.format import prune, save_checkpoint
from rlfit.rundir.layout import list_steps
from rlfit.parallel.distributed import from_writer, host_copy
from rlfit.rundir.layout import RunDir
from rlfit.checkpoints.metrics_copy import METRICS_COPY, metrics_copy
from rlfit.versions import package_versions
from rlfit.rundir.write_failures import EXIT_WRITE_FAILED, WriteFailed

EXIT_SAVE_FAILED = EXIT_WRITE_FAILED


class SaveFailed(WriteFailed):
    """A checkpoint (or another file of the run) could not be written and the run stopped (exit code 4)."""


class Checkpointer:
    """Saves a run's checkpoints; `sync_metrics` forces the metrics to disk before each save (its copy is whole).

    Each call is given the `trainer` (`rlfit.run.trainer.Trainer`) whose state it saves: its config and plan go into
    the record, its learner says what to store and which policy to write (a back-off rebuilds the trainer).

    In a run over several processes every process's Checkpointer writes its shards of the arrays, and only the
    `writer`'s (process 0's) the rest: the record, the metrics' copy, the policy; it alone prunes."""

    def __init__(self, run_dir: RunDir, warn: Callable[[str], None] | None = None,
                 sync_metrics: Callable[[], None] | None = None, writer: bool = True) -> None:
        self.run_dir = run_dir
        self.sync_metrics = sync_metrics or (lambda: None)
        self.warn = warn or (lambda text: print(text, file=sys.stderr, flush=True))
        self.last_saved: int | None = None
        self.writer = writer

    def latest_step(self) -> int | None:
        """The newest checkpoint's iteration (the writer's, on every process of a distributed run)."""
        steps = list_steps(self.run_dir.checkpoints) if self.writer else []
        latest = from_writer(steps[-1] if steps else -1)
        return None if latest < 0 else latest

    def after_iteration(self, trainer: Any, state: Any, progress: Any, final: bool) -> None:
        """Saves when `run.save_interval` says so, or at the run's `final` iteration."""
        if final or progress.iteration % trainer.config.run.save_interval == 0:
            self.save(trainer, state, progress)

    def save(self, trainer: Any, state: Any, progress: Any, force: bool = False) -> None:
        """Saves `trainer`'s `state` at `progress` unless this iteration was saved already (`force`: save again,
        e.g. after a back-off)."""
        if self.last_saved == progress.iteration and not force:
            return
        run_config = trainer.config.run
        meta = {
            "iteration": progress.iteration,
            "env_steps": progress.env_steps,
            "progress": {**dataclasses.asdict(progress), "eval_reward_at_save": progress.last_eval_reward},
            "config": trainer.config.to_dict(),
            "plan": trainer.plan.to_dict(),
            "versions": package_versions(),
        }
        try:
            learner = trainer.learner
            rows = learner.stored_rows(state) if learner.stored_rows is not None else None
            drop = False
            if rows is not None and not run_config.checkpoint_replay:
                # the stored experience (a replay buffer) is left out: resume collects it again
                rows, drop = [None if r is None else 0 for r in rows], True
            # Host copies, made on every process: nothing below computes on arrays but the checkpoint's own
            # collectives (a computation on arrays over several processes would wait for the processes that do not
            # write).
            acting = jax.tree.map(host_copy, learner.acting(state))
            extra = None
            if self.writer:
                self.sync_metrics()
                extra = {METRICS_COPY: metrics_copy(self.run_dir.metrics)}
            save_checkpoint(self.run_dir.checkpoints, state, meta, extra, rows, drop_trimmed=drop, writer=self.writer,
                            write_more=lambda folder: save_policy_of(trainer, acting, folder / "policy"))
            if not self.writer:
                self.last_saved = progress.iteration
                return
            save_policy_of(trainer, acting, self.run_dir.policy)
        except OSError as error:
            message = (f"cannot write checkpoint for iteration {progress.iteration} in {self.run_dir.checkpoints}: "
                       f"{error.strerror or error}; earlier checkpoints are intact")
            if not run_config.continue_on_save_error:
                raise SaveFailed(message, f"free space or fix permissions, then `rlfit resume {self.run_dir.path}`"
                                 ) from None
            self.warn(f"rlfit: warning: {message}; continuing (run.continue_on_save_error)")
            return
        self.last_saved = progress.iteration
        prune(self.run_dir.checkpoints, run_config.keep_checkpoints)


def save_policy_of(t: Any, acting: Any, directory: Path) -> None:
    """Writes trainer `t`'s deployable policy from `acting` = (policy params, observation statistics) on the host."""
    from rlfit.deploy.policy_file import save_policy

    policy_params, stats = acting
    latent = None
    if t.learner.deployable is not None:
        latent, policy_params = policy_params, t.learner.deployable(policy_params)
    save_policy(directory, policy_params, stats, t.learner.policy, t.obs_example, t.action_space,
                t.config.env.name, t.plan.precision, t.config.algo, latent_params=latent)
