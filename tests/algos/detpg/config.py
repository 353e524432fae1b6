"""detpg's config section, presets and rules (pure Python, an `rlfit.algos.contract.AlgorithmConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rlfit.errors import UserError


@dataclass(frozen=True)
class DetPGConfig:
    """A deterministic tanh actor, explored with Gaussian noise, trained by REINFORCE on normalized returns."""

    num_envs: int = 16
    """Parallel training environments."""
    unroll_length: int = 16
    """Policy steps of every environment per iteration (one gradient step on all of them)."""
    learning_rate: float = 3e-3
    """Adam step size."""
    discounting: float = 0.9
    """Discount of the returns-to-go."""
    exploration_std: float = 0.3
    """Standard deviation of the Gaussian noise added to tanh(actor) while collecting."""
    hidden: tuple[int, ...] = (32, 32)
    """Hidden layer sizes of the actor."""
    activation: str = "tanh"
    """Hidden activation of the actor."""
    policy_obs_key: str = "state"
    """For dict observations: the entry the actor reads."""


SECTION = DetPGConfig
TITLE = "DetPG"

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "default": {},
    "smoke": {"detpg": {"num_envs": 8, "unroll_length": 8}, "env": {"episode_length": 100},
              "run": {"num_timesteps": 64, "eval_every": 0, "num_eval_envs": 4}},
}


def published(env_name: str) -> dict[str, dict[str, Any]]:
    """MuJoCo Playground publishes nothing for detpg."""
    return {}


def check(config: Any) -> None:
    """detpg's rules: positive sizes and rates."""
    section = config.detpg
    for name in ("num_envs", "unroll_length", "learning_rate", "exploration_std"):
        if not getattr(section, name) > 0:
            raise UserError(f"detpg.{name} must be positive, got {getattr(section, name)}")
