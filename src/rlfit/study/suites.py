"""Evaluating a trained trial on an evaluation suite: its saved policy, deterministic, on the environment its
config gives with the suite's overrides (e.g. `env.overrides: {ctrl_dt: 0.02}`), `episodes` episodes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rlfit.study.manifest import Suite

SUITE_SEED_SALT = 0x5017E
"""Suite evaluations draw their episodes from fold_in(PRNGKey(seed ^ salt), suite index): a pure function of the
trial's seed and the suite, the same whichever trials ran before."""


def suite_config(config: Any, overrides: Mapping[str, Any]) -> Any:
    """`config` with a suite's 'section.key' overrides; `env.overrides` is merged into the trial's own."""
    sections: dict[str, dict[str, Any]] = {}
    for dotted, value in overrides.items():
        section, _, key = dotted.partition(".")
        if dotted == "env.overrides":
            value = {**dict(config.env.overrides), **dict(value)}
        sections.setdefault(section, {})[key] = value
    return config.replace(**sections)


ACTING_NETWORK_KEYS = ("policy_hidden", "activation", "policy_obs_key", "bottleneck")
"""Keys of an algorithm's section that shape its acting policy (where it has them: PPO's `bottleneck` sets the
latent noise an evaluator draws), so a compiled evaluator is kept per value."""


def evaluate_suite(run_dir: Path, config: Any, suite: Suite, index: int) -> dict[str, Any]:
    """The run's final policy (`suite.policy`: most likely action or sampled) on `suite` (`config`: the run's own):
    {'episode_reward' (mean return), 'episode_reward_std', 'episode_length', 'episodes', 'policy'} and, where the
    environment and policy give them, 'success_rate' (episodes that reached a terminal success state),
    'normalized_reward' (mean of (return - failing) / (optimal - failing) per episode: 0 never reaching the goal,
    1 a shortest path; `rlfit.envs.gridworld.reference_returns`), 'normalized_reward_std', 'reference_return'
    (mean optimal return), and 'description_length_bits' (bottleneck rate per step, over the visited states) with
    'description_length_bits_per_episode' (summed over each episode, then averaged). The environment and compiled
    evaluator are kept for the next seed of the same variant (they take the policy's arrays as an argument)."""
    import jax

    from rlfit.deploy.policy_file import read_policy_files
    from rlfit.study.suite_policies import POLICY_NAMES, read_latent, suite_actor

    files = read_policy_files(run_dir)
    actor = suite_actor(files, config, suite.policy, read_latent(run_dir))
    shifted = suite_config(config, suite.overrides)
    settings = shifted.to_dict_without_seed()
    algo_settings = settings.get(config.algo, {})  # the acting network's (not the loss weights, e.g. bottleneck_beta)
    network = {**settings["network"], **{key: algo_settings[key] for key in ACTING_NETWORK_KEYS if key in algo_settings}}
    key = json.dumps({"suite": suite.name, "episodes": suite.episodes, "policy": suite.policy,
                      "env": settings["env"], "network": network, "policy_file": files.description["network"],
                      "precision": files.description["precision"], "rate": actor.rate is not None},
                     sort_keys=True, default=str)  # what the compiled evaluator depends on: one per suite for a grid
                                                   # over training settings (the policy's arrays are its argument)
    if key not in _EVALUATORS:
        if len(_EVALUATORS) >= MAX_EVALUATORS:  # trials run variant by variant: drop the oldest
            _EVALUATORS.pop(next(iter(_EVALUATORS)))
        _EVALUATORS[key] = _compile_evaluator(shifted, suite, actor)
    seed_key = jax.random.fold_in(jax.random.PRNGKey(config.run.seed ^ SUITE_SEED_SALT), index)
    episodes = jax.device_get(_EVALUATORS[key](actor.arrays, seed_key))
    return {**summarize_episodes(episodes), "episodes": suite.episodes, "policy": POLICY_NAMES[suite.policy]}


_EVALUATORS: dict[str, Any] = {}
MAX_EVALUATORS = 16
"""Compiled suite evaluators kept (one per suite and network: every seed, and every variant that changes only
training settings, reuses them)."""


def _compile_evaluator(config: Any, suite: Suite, actor: Any) -> Any:
    """jit of (policy arrays, key) -> Episodes on `suite.episodes` environments of `config`."""
    import jax

    from rlfit.envs import VecEnv, load_env
    from rlfit.envs.vec_env import episode_steps
    from rlfit.study.episodes import make_episode_evaluator

    env = load_env(config.env, jax.default_backend())
    episode_length = episode_steps(config.env, env)
    vec_env = VecEnv(env, suite.episodes, episode_length, config.env.action_repeat)
    return jax.jit(make_episode_evaluator(vec_env, actor.act, actor.rate))


def summarize_episodes(episodes: Any) -> dict[str, float]:
    """The suites.json numbers of one evaluation's `Episodes` (host arrays): means and standard deviations over its
    episodes; the optional fields only where the evaluation recorded them (not NaN)."""
    import numpy as np

    returns = np.asarray(episodes.returns, np.float64)
    result = {"episode_reward": float(returns.mean()), "episode_reward_std": float(returns.std()),
              "episode_length": float(np.mean(episodes.lengths))}
    if episodes.success is not None:
        result["success_rate"] = float(np.mean(episodes.success))
    if episodes.optimal is not None:
        normalized = (returns - episodes.failing) / np.maximum(episodes.optimal - episodes.failing, 1e-9)
        result.update(normalized_reward=float(normalized.mean()), normalized_reward_std=float(normalized.std()),
                      reference_return=float(np.mean(episodes.optimal)))
    if episodes.rate_bits is not None:
        bits = np.asarray(episodes.rate_bits, np.float64)
        result.update(description_length_bits=float(bits.sum() / max(float(np.sum(episodes.lengths)), 1.0)),
                      description_length_bits_per_episode=float(bits.mean()))
    return result
