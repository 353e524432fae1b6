"""What `rlfit transfer-check` is asked to do: its options, their defaults and their checks (pure Python: the command
line builds its parser from these without importing JAX or MuJoCo; `rlfit.deploy.transfer.check` runs them)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlfit.errors import UserError

DEFAULT_MODELS = 4
DEFAULT_EPISODES_PER_MODEL = 2


@dataclass(frozen=True)
class TransferCheckOptions:
    """What to check and how much."""

    run_dir: Path
    onnx: Path | None = None
    """The exported model (default: RUN_DIR/policy.onnx, what `rlfit export RUN_DIR` writes)."""
    models: int = DEFAULT_MODELS
    """Randomized models to draw (the nominal model runs models * episodes_per_model episodes as well)."""
    episodes_per_model: int = DEFAULT_EPISODES_PER_MODEL
    max_steps: int | None = None
    """Policy steps per episode at most (default and most: the run's episode length, env.episode_length /
    action_repeat)."""
    seed: int = 0
    """Seed of the check's models and resets (`rlfit.deploy.transfer.models`: apart from training's and
    evaluation's)."""


def check_counts(options: TransferCheckOptions) -> None:
    """A UserError for a count below 1 (a flag's fix named)."""
    for flag, value in (("--models", options.models), ("--episodes-per-model", options.episodes_per_model),
                        ("--max-steps", options.max_steps)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}")
