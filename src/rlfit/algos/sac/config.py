"""SAC hyperparameters; names and defaults follow Brax's `sac.train`, except `num_envs` (Brax: 1) and
`max_replay_size` (Brax: None, meaning num_timesteps).

Pure Python (no JAX): `rlfit.config.schema` reads it to build and check a config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlfit.errors import UserError
from rlfit.config.rules import ACTIVATIONS

if TYPE_CHECKING:
    from rlfit.config.schema import Config


@dataclass(frozen=True)
class SACConfig:
    """SAC hyperparameters and network sizes."""

    num_envs: int = 128
    """Parallel training environments; each policy step inserts `num_envs` transitions into the replay buffer."""
    learning_rate: float = 1e-4
    """Adam step size of the policy and the Q networks."""
    alpha_learning_rate: float = 3e-4
    """Adam step size of the entropy temperature log(alpha) (Brax fixes it at 3e-4)."""
    initial_alpha: float = 1.0
    """Entropy temperature alpha at the start of training (Brax: 1.0; DrQ and SAC-AE start at 0.1)."""
    discounting: float = 0.9
    """Discount factor gamma."""
    batch_size: int = 256
    """Transitions sampled from the replay buffer per gradient update."""
    tau: float = 0.005
    """Soft target update: target <- (1 - tau) * target + tau * online, after every gradient update."""
    min_replay_size: int = 0
    """Transitions collected with a uniform random policy before training (rounded up to whole policy steps)."""
    max_replay_size: int = 1_000_000
    """Replay capacity in transitions (rounded down to a multiple of `num_envs`); the oldest are overwritten."""
    grad_updates_per_step: int = 1
    """Gradient updates after each policy step of the `num_envs` environments."""
    policy_steps_per_iteration: int = 32
    """Policy steps of the `num_envs` environments per iteration (one compiled call, one metrics row)."""
    reward_scaling: float = 1.0
    """Rewards are multiplied by this in the critic target."""
    normalize_observations: bool = False
    """Running mean/std observation normalization (statistics of every observation acted on)."""
    target_entropy: float | None = None
    """Entropy the temperature alpha is tuned toward; null (the default) means -0.5 * action_size (Brax's choice)."""
    q_layer_norm: bool = False
    """LayerNorm after every hidden Dense layer of the Q networks (as Playground's DM Control SAC uses)."""
    policy_hidden: tuple[int, ...] = (256, 256)
    """Hidden layer sizes of the policy."""
    q_hidden: tuple[int, ...] = (256, 256)
    """Hidden layer sizes of each of the two Q networks."""
    activation: str = "relu"
    """Hidden activation of all networks (a name in `rlfit.networks.ACTIVATIONS`; Brax's SAC uses relu)."""
    policy_obs_key: str = "state"
    """For dict observations: the entry the policy sees."""
    q_obs_key: str = "privileged_state"
    """For dict observations: the entry the Q networks see (falls back to `policy_obs_key`)."""

    def resolved_target_entropy(self, action_size: int) -> float:
        """`target_entropy`, or -0.5 * action_size when it is None."""
        return -0.5 * action_size if self.target_entropy is None else float(self.target_entropy)


def check_sac_config(config: SACConfig) -> None:
    """Raises a one-line UserError naming the fix for a value SAC cannot train with."""
    positive = ("num_envs", "batch_size", "grad_updates_per_step", "learning_rate", "alpha_learning_rate",
                "initial_alpha", "policy_steps_per_iteration")
    for name in positive:
        if not getattr(config, name) > 0:
            raise UserError(f"sac.{name} must be positive, got {getattr(config, name)}")
    if not 0.0 < config.tau <= 1.0:
        raise UserError(f"sac.tau must be in (0, 1], got {config.tau}")
    if not 0.0 <= config.discounting <= 1.0:
        raise UserError(f"sac.discounting must be in [0, 1], got {config.discounting}")
    if config.max_replay_size < 2 * config.num_envs:
        raise UserError(f"sac.max_replay_size {config.max_replay_size} holds fewer than 2 policy steps of "
                        f"{config.num_envs} environments; raise it to at least {2 * config.num_envs}")
    if not 0 <= config.min_replay_size <= config.max_replay_size:
        raise UserError(f"sac.min_replay_size must be in [0, max_replay_size = {config.max_replay_size}], "
                        f"got {config.min_replay_size}")
    if config.activation not in ACTIVATIONS:
        raise UserError(f"unknown sac.activation '{config.activation}'; choose one of: {', '.join(ACTIVATIONS)}")


def published(env_name: str) -> dict[str, dict[str, object]]:
    """MuJoCo Playground's DM Control SAC settings for `env_name`, in rlfit's keys, without the keys Brax's
    `sac.train` does not take (`num_resets_per_eval`) ({} where Playground publishes none)."""
    from rlfit.config.playground import published_config

    found = published_config(env_name, "brax_sac_config")
    if not found:
        return {}
    keys = {f.name for f in dataclasses.fields(SACConfig)}
    layer: dict[str, dict[str, object]] = {"sac": {k: v for k, v in found.items() if k in keys}, "env": {}, "run": {}}
    for key in ("episode_length", "action_repeat"):
        if key in found:
            layer["env"][key] = found[key]
    if "num_timesteps" in found:
        layer["run"]["num_timesteps"] = found["num_timesteps"]
    network = found.get("network_factory") or {}
    if "q_network_layer_norm" in network:
        layer["sac"]["q_layer_norm"] = network["q_network_layer_norm"]
    return layer


PRESETS: dict[str, dict[str, dict[str, object]]] = {
    # Minutes on a 2-core CPU: few environments, more updates per transition, small networks.
    "quick": {
        "sac": {"num_envs": 16, "batch_size": 256, "grad_updates_per_step": 4, "min_replay_size": 1024,
                "max_replay_size": 200_000, "policy_steps_per_iteration": 64, "learning_rate": 3e-4,
                "discounting": 0.99, "policy_hidden": (64, 64), "q_hidden": (128, 128)},
        "run": {"num_timesteps": 400_000, "eval_every": 5, "num_eval_envs": 16},
    },
    # Playground's published settings for the environment, as Brax users run them.
    "default": {},
    # More parallel environments and updates, for a large GPU.
    "production": {
        "sac": {"num_envs": 1024, "batch_size": 1024, "grad_updates_per_step": 16},
        "run": {"eval_every": 20},
    },
    # Learning from camera frames on a 2-core CPU (DrQ's recipe, sized down): 64x64 RGB, the last 3 frames, the
    # encoder auto picks (simple2dcnn on a CPU), action repeat 8, one environment, one update per policy step;
    # num_timesteps counts physics steps (frames x action repeat), as DrQ's benchmarks do.
    # Learning rate 5e-4, half DrQ's 1e-3: at 1e-3 seed 0's eval fell from 931 to 595 by the end (benchmarks/README.md).
    "pixels": {
        "env": {"observation": "pixels", "image_size": 64, "frames": 3, "channels": "rgb", "action_repeat": 8,
                "episode_length": 1000},
        "sac": {"num_envs": 1, "batch_size": 128, "grad_updates_per_step": 1, "min_replay_size": 1000,
                "max_replay_size": 100_000, "policy_steps_per_iteration": 125, "learning_rate": 5e-4,
                "discounting": 0.99, "tau": 0.01, "policy_hidden": (256, 256), "q_hidden": (256, 256),
                "q_layer_norm": False, "normalize_observations": False, "target_entropy": None},
        "run": {"num_timesteps": 100_000, "eval_every": 8, "num_eval_envs": 5},
    },
    # One tiny iteration of anything (checks the pipeline, learns nothing): 8 envs x 8 policy steps = 64 env
    # steps per iteration, as PPO's smoke preset, so the same commands give the same iteration counts.
    "smoke": {
        "sac": {"num_envs": 8, "batch_size": 8, "grad_updates_per_step": 1, "min_replay_size": 16,
                "max_replay_size": 512, "policy_steps_per_iteration": 8, "policy_hidden": (32, 32),
                "q_hidden": (32, 32)},
        "env": {"episode_length": 100},
        "run": {"num_timesteps": 64, "eval_every": 0, "num_eval_envs": 4},
    },
}


SECTION = SACConfig
TITLE = "SAC"


def check(config: Config) -> None:
    """SAC's rules (one-line UserErrors): positive sizes, a buffer that holds two policy steps. (A bottleneck is PPO's:
    `ppo.bottleneck` is refused as another algorithm's key, `network.bottleneck` by `rlfit.config.moved_keys`.)"""
    check_sac_config(config.sac)
