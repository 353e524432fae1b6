"""The run directory: where a run's config, plan, metrics, summary, TensorBoard files and checkpoints live.

    runs/<env>-<YYYYmmdd-HHMMSS>/
        config.yaml      resolved config        plan.json     what ran (sizes, device, reasons)
        metrics.jsonl    one row per iteration   summary.json  written at the end
        tb/              TensorBoard events      checkpoints/  full training state
        policy/          the policy alone, for deployment
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlfit.atomic_files import write_atomic
from rlfit.config import Config
from rlfit.envs.loading import env_label
from rlfit.errors import UserError


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def config(self) -> Path:
        return self.path / "config.yaml"

    @property
    def plan(self) -> Path:
        return self.path / "plan.json"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def summary(self) -> Path:
        return self.path / "summary.json"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tb"

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def policy(self) -> Path:
        return self.path / "policy"


def default_run_path(env_name: str, root: str | Path = "runs") -> Path:
    return Path(root) / f"{env_label(env_name)}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_new_run_dir(path: Path) -> None:
    """A new run never writes into a directory that already holds something."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise UserError(f"run directory {path} already exists and is not empty; choose another --run-dir "
                        f"or continue it with `rlfit resume {path}`")


def create_run_dir(path: Path, config: Config) -> RunDir:
    """Creates the directory and writes `config.yaml` (call only once all input has been validated)."""
    check_new_run_dir(path)
    path.mkdir(parents=True, exist_ok=True)
    run_dir = RunDir(path)
    write_atomic(run_dir.config, yaml.safe_dump(config.to_dict(), sort_keys=False))
    return run_dir


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
