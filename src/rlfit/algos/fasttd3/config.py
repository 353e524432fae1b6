"""FastTD3 hyperparameters; names follow rlfit's SAC section where the meaning is the same, defaults follow
FastTD3's base settings (`fast_td3/hyperparams.py`, BaseArgs).

Pure Python (no JAX): `rlfit.config.schema` reads it to build and check a config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlfit.config.rules import ACTIVATIONS
from rlfit.errors import UserError

if TYPE_CHECKING:
    from rlfit.config.schema import Config


@dataclass(frozen=True)
class FastTD3Config:
    """FastTD3 hyperparameters and network sizes."""

    num_envs: int = 128
    """Parallel training environments; each policy step inserts `num_envs` transitions into the replay buffer."""
    batch_size: int = 32768
    """Transitions sampled from the replay buffer per gradient update (FastTD3 trains with very large batches)."""
    learning_rate: float = 3e-4
    """AdamW step size of the critics."""
    actor_learning_rate: float = 3e-4
    """AdamW step size of the actor."""
    weight_decay: float = 0.1
    """AdamW weight decay of both networks (FastTD3: 0.1)."""
    discounting: float = 0.99
    """Discount factor gamma."""
    n_step: int = 1
    """Rewards summed per target (n-step return); a window stops early where its episode ends (FastTD3: 1, and 3
    for its DM Control example; the quick and smoke presets use 3)."""
    tau: float = 0.1
    """Soft target update of the critics after every gradient update: target <- (1 - tau) target + tau online."""
    grad_updates_per_step: int = 2
    """Critic updates after each policy step of the `num_envs` environments."""
    policy_delay: int = 2
    """The actor is updated after every `policy_delay`-th critic update (TD3's delayed policy updates)."""
    policy_noise: float = 0.001
    """Std of the Gaussian noise added to the actor's next action in the critic target (target policy
    smoothing; TD3: 0.2, FastTD3: 0.001)."""
    noise_clip: float = 0.5
    """The target smoothing noise is clipped to [-noise_clip, noise_clip]."""
    std_min: float = 0.001
    """Each environment explores with Gaussian action noise of its own std, drawn uniformly from
    [std_min, std_max] at the start and again after each of its episodes ends."""
    std_max: float = 0.4
    """Upper end of the per-environment exploration noise std (see `std_min`)."""
    num_atoms: int = 101
    """Atoms of the categorical (C51) value distribution of each critic."""
    v_min: float = -250.0
    """Lowest atom: the smallest return the critics can represent (targets are clipped into [v_min, v_max])."""
    v_max: float = 250.0
    """Highest atom."""
    clipped_double_q: bool = True
    """Targets from the critic whose expected value is smaller, the actor maximizes the smaller expected value
    (false: both from the mean of the two)."""
    min_replay_size: int = 1280
    """Transitions collected with a uniform random policy before training (rounded up to whole policy steps)."""
    max_replay_size: int = 6_553_600
    """Replay capacity in transitions (rounded down to a multiple of `num_envs`); the oldest are overwritten."""
    policy_steps_per_iteration: int = 32
    """Policy steps of the `num_envs` environments per iteration (one compiled call, one metrics row)."""
    normalize_observations: bool = True
    """Running mean/std observation normalization (statistics of every observation acted on)."""
    actor_hidden: tuple[int, ...] = (512, 256, 128)
    """Hidden layer sizes of the actor."""
    critic_hidden: tuple[int, ...] = (1024, 512, 256)
    """Hidden layer sizes of each of the two critics."""
    critic_layer_norm: bool = False
    """LayerNorm after every hidden Dense layer of the critics."""
    actor_init_scale: float = 0.01
    """Std of the normal initialization of the actor's output layer (its bias starts at 0), so the first
    actions are near 0."""
    activation: str = "relu"
    """Hidden activation of all networks (a name in `rlfit.networks.ACTIVATIONS`)."""
    policy_obs_key: str = "state"
    """For dict observations: the entry the actor sees."""
    q_obs_key: str = "privileged_state"
    """For dict observations: the entry the critics see (falls back to `policy_obs_key`)."""


def check_fasttd3_config(config: FastTD3Config) -> None:
    """Raises a one-line UserError naming the fix for a value FastTD3 cannot train with."""
    positive = ("num_envs", "batch_size", "grad_updates_per_step", "learning_rate", "actor_learning_rate",
                "policy_steps_per_iteration", "n_step", "policy_delay")
    for name in positive:
        if not getattr(config, name) > 0:
            raise UserError(f"fasttd3.{name} must be positive, got {getattr(config, name)}")
    for name in ("weight_decay", "policy_noise", "noise_clip", "std_min", "actor_init_scale"):
        if getattr(config, name) < 0:
            raise UserError(f"fasttd3.{name} must not be negative, got {getattr(config, name)}")
    if not 0.0 < config.tau <= 1.0:
        raise UserError(f"fasttd3.tau must be in (0, 1], got {config.tau}")
    if not 0.0 <= config.discounting <= 1.0:
        raise UserError(f"fasttd3.discounting must be in [0, 1], got {config.discounting}")
    if config.std_max < config.std_min:
        raise UserError(f"fasttd3.std_max {config.std_max} is below fasttd3.std_min {config.std_min}; raise it")
    if config.num_atoms < 2:
        raise UserError(f"fasttd3.num_atoms must be at least 2, got {config.num_atoms}")
    if not config.v_min < config.v_max:
        raise UserError(f"fasttd3.v_min {config.v_min} must be below fasttd3.v_max {config.v_max}")
    rows_needed = config.n_step + 2
    if config.max_replay_size < rows_needed * config.num_envs:
        raise UserError(f"fasttd3.max_replay_size {config.max_replay_size} holds fewer than n_step + 2 = {rows_needed} "
                        f"policy steps of {config.num_envs} environments; raise it to at least "
                        f"{rows_needed * config.num_envs}")
    if not 0 <= config.min_replay_size <= config.max_replay_size:
        raise UserError(f"fasttd3.min_replay_size must be in [0, max_replay_size = {config.max_replay_size}], "
                        f"got {config.min_replay_size}")
    if config.activation not in ACTIVATIONS:
        raise UserError(f"unknown fasttd3.activation '{config.activation}'; choose one of: {', '.join(ACTIVATIONS)}")


PLAYGROUND_HUMANOIDS = ("G1JoystickFlatTerrain", "G1JoystickRoughTerrain", "T1JoystickFlatTerrain",
                        "T1JoystickRoughTerrain")
"""Playground's humanoids, FastTD3's showcase: MuJoCoPlaygroundArgs unchanged."""

PLAYGROUND_SETTINGS: dict[str, object] = {
    "num_envs": 1024, "batch_size": 32768, "discounting": 0.97, "v_min": -10.0, "v_max": 10.0, "n_step": 1,
    "num_atoms": 101, "max_replay_size": 1024 * 10 * 1024, "min_replay_size": 10 * 1024, "tau": 0.1,
    "grad_updates_per_step": 2, "policy_delay": 2, "std_min": 0.001, "std_max": 0.4, "policy_noise": 0.001,
    "noise_clip": 0.5,
}
"""FastTD3's settings for Playground's humanoids in rlfit's keys (its buffer of 10 x 1024 transitions per
environment, learning_starts of 10 policy steps; its MuJoCoPlaygroundArgs keep BaseArgs' 1-step returns).
Checked against `fast_td3/hyperparams.py` in every version of FastTD3's repository; docs/algorithms/fasttd3.md has
the table, and what rlfit does differently."""


PLAYGROUND_TASKS: dict[str, dict[str, object]] = {
    **{name: {} for name in PLAYGROUND_HUMANOIDS},
    **{name: {"std_min": 0.2, "std_max": 0.8, "policy_noise": 0.2, "grad_updates_per_step": 8}
       for name in ("Go1JoystickFlatTerrain", "Go1JoystickRoughTerrain", "Go1Getup")},
    "LeapCubeReorient": {"n_step": 3, "discounting": 0.99, "policy_noise": 0.2, "v_min": -50.0, "v_max": 50.0,
                         "clipped_double_q": False},
    "LeapCubeRotateZAxis": {"discounting": 0.99, "policy_noise": 0.2, "clipped_double_q": False},
    "CheetahRun": {"n_step": 3, "v_min": -500.0, "v_max": 500.0, "std_min": 0.1, "policy_noise": 0.1},
}
"""The Playground environments FastTD3 names in `hyperparams.py`, each with what its own Args class changes from
MuJoCoPlaygroundArgs (PLAYGROUND_SETTINGS)."""


def published(env_name: str) -> dict[str, dict[str, object]]:
    """FastTD3's published settings for `env_name` as a config layer ({} where it publishes none)."""
    if env_name not in PLAYGROUND_TASKS:
        return {}
    return {"fasttd3": {**PLAYGROUND_SETTINGS, **PLAYGROUND_TASKS[env_name]}}


PRESETS: dict[str, dict[str, dict[str, object]]] = {
    # Minutes on a 2-core CPU: few environments, small networks and batches. DM Control's rewards lie in [0, 1]
    # per step, so discounted returns lie in [0, 100] at gamma 0.99: the atoms cover [-10, 110].
    "quick": {
        "fasttd3": {"num_envs": 16, "batch_size": 256, "grad_updates_per_step": 2, "min_replay_size": 1024,
                    "max_replay_size": 200_000, "policy_steps_per_iteration": 64, "discounting": 0.99,
                    "v_min": -10.0, "v_max": 110.0, "num_atoms": 51, "tau": 0.05, "std_min": 0.05, "std_max": 0.4,
                    "policy_noise": 0.2, "n_step": 3, "actor_hidden": (64, 64), "critic_hidden": (128, 128)},
        "run": {"num_timesteps": 200_000, "eval_every": 5, "num_eval_envs": 16},
    },
    # FastTD3's base settings (and its published ones for Playground's humanoids).
    "default": {},
    # FastTD3's G1 flat-terrain run (G1JoystickFlatTerrain; 100,000 policy steps): 1,024 environments, batches
    # of 32,768, 101 atoms, 1-step returns, networks computed in bf16 (its AMP).
    "g1": {
        "fasttd3": dict(PLAYGROUND_SETTINGS),
        "run": {"num_timesteps": 100_000 * 1024, "eval_every": 50, "num_eval_envs": 128, "save_interval": 50,
                "fit_to_device": True, "precision": "bf16"},
    },
    # One tiny iteration of anything (checks the pipeline, learns nothing): 8 envs x 8 policy steps = 64 env
    # steps per iteration, as the other algorithms' smoke presets.
    "smoke": {
        "fasttd3": {"num_envs": 8, "batch_size": 8, "grad_updates_per_step": 2, "min_replay_size": 40,
                    "max_replay_size": 512, "policy_steps_per_iteration": 8, "n_step": 3, "num_atoms": 11, "v_min": -10.0,
                    "v_max": 10.0, "actor_hidden": (32, 32), "critic_hidden": (32, 32)},
        "env": {"episode_length": 100},
        "run": {"num_timesteps": 64, "eval_every": 0, "num_eval_envs": 4},
    },
}


SECTION = FastTD3Config
TITLE = "FastTD3"


def check(config: Config) -> None:
    """FastTD3's rules (one-line UserErrors): valid hyperparameters, vector observations, fp32 or bf16."""
    check_fasttd3_config(config.fasttd3)
    if config.env.observation != "state":
        raise UserError(f"algo: fasttd3 learns from state observations, not "
                        f"env.observation={config.env.observation}; use algo: sac for camera frames")
    if config.run.precision == "fp16":
        raise UserError("algo: fasttd3 trains in fp32 or bf16 (no fp16 loss scaling); set run.precision=bf16 or fp32")
