"""PPO's config section (`ppo`), its presets and MuJoCo Playground's published settings as a layer.

Pure Python (no JAX): `rlfit.config.schema` reads it to build and check a config.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rlfit.errors import UserError

if TYPE_CHECKING:
    from rlfit.config.schema import Config


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyperparameters; names follow Brax's `ppo.train`."""

    num_envs: int = 2048
    """Parallel training environments."""
    batch_size: int = 1024
    """Sequences of `unroll_length` steps per minibatch."""
    num_minibatches: int = 32
    """Minibatches per epoch; one iteration collects `batch_size * num_minibatches` sequences."""
    unroll_length: int = 30
    """Steps per collected sequence (GAE horizon before bootstrapping)."""
    num_updates_per_batch: int = 16
    """Epochs over each collected batch."""
    learning_rate: float = 1e-3
    """Adam step size."""
    entropy_cost: float = 1e-2
    """Weight of the entropy bonus."""
    discounting: float = 0.995
    """Discount factor gamma."""
    gae_lambda: float = 0.95
    """GAE lambda."""
    clipping_epsilon: float = 0.3
    """PPO ratio clip."""
    reward_scaling: float = 10.0
    """Rewards are multiplied by this before the loss."""
    max_grad_norm: float = 0.0
    """Global gradient-norm clip; 0 disables it."""
    learning_rate_schedule: str = "none"
    """`none`: Adam at `learning_rate` throughout. `linear`: the step falls linearly from `learning_rate` to 0 over
    the run's minibatch updates (to `run.num_timesteps`; a resume with a new total starts a new line from where the
    count stands). `adaptive_kl`: Brax's (and rsl_rl's) adaptive schedule: before
    each minibatch update the step size is divided by 1.5 when the mean KL from the collecting policy to the
    current one exceeds 2 x `desired_kl`, multiplied by 1.5 when it is below `desired_kl` / 2 (and above 0), kept
    within [`learning_rate_schedule_min_lr`, `learning_rate_schedule_max_lr`], and carried from one iteration to
    the next; `learning_rate` is where it starts. With `normalize_observations` the updates then see the statistics
    the rollout acted with, and the iteration's observations enter them after the updates (Brax's order here)."""
    desired_kl: float = 0.01
    """The KL the `adaptive_kl` schedule steers toward (Brax's `desired_kl`)."""
    learning_rate_schedule_min_lr: float = 1e-5
    """The `adaptive_kl` schedule's lowest step size."""
    learning_rate_schedule_max_lr: float = 1e-2
    """The `adaptive_kl` schedule's highest step size."""
    normalize_observations: bool = True
    """Running mean/std observation normalization."""
    normalize_advantage: bool = True
    """Standardize advantages per minibatch."""
    advantages: str = "brax"
    """How advantages and value targets are formed. `brax`: as Brax's PPO, inside the loss on every minibatch
    with that update's value parameters, the advantage the one-step error on the lambda-returns, time-limit
    steps masked (`bootstrap_on_timeout=False`). `gae_once`: GAE sums, once per iteration before the epochs,
    time-limit steps bootstrapped from the pre-reset observation (rlfit's estimator before this option)."""
    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    """Hidden layer sizes of the policy (was `network.policy_hidden`)."""
    value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    """Hidden layer sizes of the value function (was `network.value_hidden`)."""
    activation: str = "swish"
    """Hidden activation of both networks: swish, relu, tanh, elu, gelu (tanh approximation) (was
    `network.activation`)."""
    policy_obs_key: str = "state"
    """For dict observations: the entry the policy sees (was `network.policy_obs_key`)."""
    value_obs_key: str = "privileged_state"
    """For dict observations: the entry the value function sees (falls back to `policy_obs_key`; was
    `network.value_obs_key`)."""
    bottleneck: int = 0
    """Width Z of a stochastic latent layer between the policy's hidden layers and its output, a variational
    information bottleneck (`rlfit.networks.bottleneck`); its rate, KL(q(z | obs) || N(0, I)) in bits, is logged
    as the policy's description length. 0: none (the plain policy). Vector observations only (was
    `network.bottleneck`)."""
    bottleneck_beta: float = 0.0
    """Weight of the rate (in nats, averaged over the minibatch) in the loss; 0 trains the same stochastic latent
    without a penalty (was `network.bottleneck_beta`)."""


PRESETS: dict[str, dict[str, dict[str, object]]] = {
    # Minutes on a 2-core CPU: fewer environments, shorter run, same algorithm (Brax's PPO, `advantages: brax`).
    # Tuned on the DM Control suite's ten environments that fit a 2-core CPU (benchmarks/suite.py, decision 0017):
    # 8 epochs per batch learned more than 4 across them, and at 8 epochs Brax's estimator and `gae_once` tied, so
    # the preset runs Brax's. It was tuned on CartpoleBalance alone before (4 epochs, `gae_once`: decision 0001).
    "quick": {
        "ppo": {"num_envs": 512, "batch_size": 256, "num_minibatches": 16, "unroll_length": 30,
                "num_updates_per_batch": 8, "policy_hidden": (32, 32, 32, 32), "value_hidden": (64, 64)},
        "run": {"num_timesteps": 10_000_000, "eval_every": 5, "num_eval_envs": 32},
    },
    # Playground's published settings for the environment, as Brax users run them.
    "default": {},
    # A longer run with more parallel environments, for a large GPU.
    "production": {
        "ppo": {"num_envs": 8192, "batch_size": 2048, "num_minibatches": 32},
        "run": {"eval_every": 20},
    },
    # The guides' G1 humanoid recipe: [256]*3 networks, lr 3e-4, 1024 envs on a 16 GB card.
    "g1": {
        "ppo": {"num_envs": 1024, "batch_size": 256, "num_minibatches": 32, "unroll_length": 20,
                "num_updates_per_batch": 4, "learning_rate": 3e-4, "entropy_cost": 5e-3,
                "discounting": 0.97, "clipping_epsilon": 0.2, "reward_scaling": 1.0, "max_grad_norm": 1.0,
                "policy_hidden": (256, 256, 256), "value_hidden": (256, 256, 256)},
        "run": {"num_timesteps": 1000 * 256 * 32 * 20, "save_interval": 50, "eval_every": 50,
                "num_eval_envs": 128, "fit_to_device": True},
    },
    # One iteration of anything on a 2-core CPU (checks that the pipeline works, learns nothing).
    "smoke": {
        "ppo": {"num_envs": 8, "batch_size": 8, "num_minibatches": 2, "unroll_length": 4,
                "num_updates_per_batch": 1, "policy_hidden": (32, 32), "value_hidden": (32, 32)},
        "env": {"episode_length": 100},
        "run": {"num_timesteps": 64, "eval_every": 0, "num_eval_envs": 4},
    },
}


def published(env_name: str) -> dict[str, dict[str, object]]:
    """Playground's published Brax PPO settings for `env_name` in rlfit's keys ({} if none)."""
    from rlfit.config.playground import published_config

    found = published_config(env_name, "brax_ppo_config")
    if not found:
        return {}
    keys = {f.name for f in dataclasses.fields(PPOConfig)}
    layer: dict[str, dict[str, object]] = {"ppo": {}, "run": {}, "env": {}}
    for key, value in found.items():
        if key in keys:
            layer["ppo"][key] = value
        elif key == "num_timesteps":
            layer["run"]["num_timesteps"] = value
        elif key in ("episode_length", "action_repeat"):
            layer["env"][key] = value
    network = found.get("network_factory") or {}
    for theirs, ours in (("policy_hidden_layer_sizes", "policy_hidden"), ("value_hidden_layer_sizes", "value_hidden"),
                         ("policy_obs_key", "policy_obs_key"), ("value_obs_key", "value_obs_key")):
        if theirs in network:
            layer["ppo"][ours] = network[theirs]
    if layer["ppo"].get("max_grad_norm") is None:
        layer["ppo"].pop("max_grad_norm", None)
    return layer


SECTION = PPOConfig
TITLE = "PPO"
ADVANTAGE_ESTIMATORS = ("brax", "gae_once")
LEARNING_RATE_SCHEDULES = ("none", "adaptive_kl", "linear")


def check(config: Config) -> None:
    """PPO's rules: positive sizes, ranges, the networks, the bottleneck, and the batch rule (with the nearest valid
    values)."""
    from rlfit.algos.ppo.sizes import check_batch_divisibility
    from rlfit.config.rules import ACTIVATIONS, check_layer_sizes, check_ranges

    check_layer_sizes(config, "ppo.policy_hidden", "ppo.value_hidden")
    check_ranges(config,
                 positive_ints=("ppo.num_envs", "ppo.batch_size", "ppo.num_minibatches", "ppo.unroll_length",
                                "ppo.num_updates_per_batch"),
                 non_negative=("ppo.entropy_cost", "ppo.max_grad_norm", "ppo.bottleneck", "ppo.bottleneck_beta"),
                 positive_floats=("ppo.learning_rate", "ppo.clipping_epsilon", "ppo.reward_scaling", "ppo.desired_kl",
                                  "ppo.learning_rate_schedule_min_lr", "ppo.learning_rate_schedule_max_lr"),
                 unit_interval=("ppo.discounting", "ppo.gae_lambda"),
                 choices={"ppo.advantages": ADVANTAGE_ESTIMATORS, "ppo.activation": ACTIVATIONS,
                          "ppo.learning_rate_schedule": LEARNING_RATE_SCHEDULES})
    ppo = config.ppo
    if ppo.learning_rate_schedule_min_lr > ppo.learning_rate_schedule_max_lr:
        raise UserError(f"ppo.learning_rate_schedule_min_lr ({ppo.learning_rate_schedule_min_lr}) is above "
                        f"ppo.learning_rate_schedule_max_lr ({ppo.learning_rate_schedule_max_lr}); set the minimum "
                        "at or below the maximum")
    if ppo.bottleneck and config.env.observation == "pixels":
        raise UserError("ppo.bottleneck works on vector observations; set ppo.bottleneck: 0 with "
                        "env.observation: pixels")
    if ppo.bottleneck_beta and not ppo.bottleneck:
        raise UserError(f"ppo.bottleneck_beta is {ppo.bottleneck_beta} but ppo.bottleneck is 0 (no latent layer to "
                        "penalize); set ppo.bottleneck to its width, e.g. 16")
    check_batch_divisibility(config.ppo.num_envs, config.ppo.batch_size, config.ppo.num_minibatches)
