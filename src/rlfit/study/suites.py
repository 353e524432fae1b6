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


def evaluate_suite(run_dir: Path, config: Any, suite: Suite, index: int) -> dict[str, float]:
    """{'episode_reward', 'episode_reward_std', 'episode_length', 'episodes'} of the run's final policy on
    `suite` (`config`: the run's own). The environment and the compiled evaluator are kept for the next seed
    of the same variant (they take the policy's arrays as an argument)."""
    import jax

    from rlfit.deploy.policy_file import policy_apply, read_policy_files

    files = read_policy_files(run_dir)
    apply, arrays = policy_apply(files, files.description["precision"])
    shifted = suite_config(config, suite.overrides)
    key = json.dumps({"suite": suite.name, "episodes": suite.episodes, "config": shifted.to_dict_without_seed(),
                      "network": files.description["network"], "precision": files.description["precision"]},
                     sort_keys=True, default=str)
    if key not in _EVALUATORS:
        if len(_EVALUATORS) >= MAX_EVALUATORS:  # trials run variant by variant: drop the oldest
            _EVALUATORS.pop(next(iter(_EVALUATORS)))
        _EVALUATORS[key] = _compile_evaluator(shifted, suite, apply)
    seed_key = jax.random.fold_in(jax.random.PRNGKey(config.run.seed ^ SUITE_SEED_SALT), index)
    result = jax.device_get(_EVALUATORS[key](arrays, seed_key))
    return {"episode_reward": float(result.episode_reward), "episode_reward_std": float(result.episode_reward_std),
            "episode_length": float(result.episode_length), "episodes": suite.episodes}


_EVALUATORS: dict[str, Any] = {}
MAX_EVALUATORS = 16
"""Compiled suite evaluators kept (one per suite of the variant being evaluated, so every seed reuses them)."""


def _compile_evaluator(config: Any, suite: Suite, apply: Any) -> Any:
    """jit of (policy arrays, key) -> EvalMetrics on `suite.episodes` environments of `config`."""
    import jax

    from rlfit.envs import VecEnv, load_env
    from rlfit.envs.vec_env import episode_steps
    from rlfit.run.evaluate import make_action_evaluator

    env = load_env(config.env, jax.default_backend())
    episode_length = episode_steps(config.env, env)
    vec_env = VecEnv(env, suite.episodes, episode_length, config.env.action_repeat)
    return jax.jit(make_action_evaluator(vec_env, apply))

