"""One whole PPO training iteration of Brax 0.14.2's own `ppo.train` on the toy environment, saved as a fixture.

`ppo.train` runs exactly one `training_step` (one epoch of one step, no evaluation) on benchmarks/brax_toy_env.py
with observation normalization on, from a fixed seed, for two schedules: `fixed` (Brax updates the running
statistics before the updates) and `adaptive_kl` (after them). What `ppo.train` returns (the statistics and the
parameters) is the reference. `ppo.train` keeps its rollout and keys inside; `composed` recomputes the same step
from Brax's parts (`acting.generate_unroll` with a policy that records each step's key, `running_statistics.update`,
brax_reference.py's line-for-line `sgd_step`), with train.py's key splits, and must reproduce `ppo.train`'s output
(checked here) before its rollout, keys and per-update step sizes are saved beside it. It also gives the
parameters and statistics the other order would have produced (`other_order/`), so that the tests can show that the
fixture tells the two orders apart.

    tests/algos/ppo/fixtures/brax_ppo_iteration.npz  (+ .json), written by brax_reference.py's main

Shapes in the fixture: S = batch_size * num_minibatches sequences of T steps, Brax's [S, T, ...] layout; the
collect keys [U, T, 2] (U = S / num_envs unrolls, one after another, each step's key as the policy received it).
"""

from __future__ import annotations

import functools
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
ITERATION_OUT = REPO / "tests" / "algos" / "ppo" / "fixtures" / "brax_ppo_iteration"
ITERATIONS = 2
DM_CONTROL = {"discounting": 0.995, "gae_lambda": 0.95, "clipping_epsilon": 0.3, "entropy_cost": 1e-2,
              "reward_scaling": 10.0, "learning_rate": 1e-3, "max_grad_norm": None, "normalize_advantage": True,
              "num_minibatches": 2, "num_updates_per_batch": 4}
# 4 environments, 2 unrolls of 8 steps (8 sequences in 2 minibatches), episodes of 6 steps (time-limit truncations
# beside the toy's terminations), observation normalization on.
ITERATION = {"seed": 7, "num_envs": 4, "unroll_length": 8, "batch_size": 4, "episode_length": 6,
             "policy_hidden": [32, 32], "value_hidden": [32, 32], "activation": "swish",
             "normalize_observations": True, "obs_size": 5, "action_size": 2}
ITERATION_CASES = {
    "fixed": DM_CONTROL,
    # the desired KL low enough that the 8 updates move the step size
    "adaptive_kl": {**DM_CONTROL, "learning_rate_schedule": "ADAPTIVE_KL", "desired_kl": 0.002,
                    "learning_rate_schedule_min_lr": 1e-5, "learning_rate_schedule_max_lr": 1e-2},
}
# `ppo.train` against `composed`: the same computation compiled as different programs, whose float32 rounding
# differs (Adam's division by the root of tiny second moments magnifies it: 2.6e-6 at most when written).
AGREEMENT = 1e-5


def toy_brax_env():
    """The toy environment as a `brax.envs.Env` (its state in `obs`, no physics pipeline)."""
    import jax.numpy as jnp
    from brax.envs.base import Env, State

    import brax_toy_env as toy

    class ToyBraxEnv(Env):
        def reset(self, rng):
            return State(pipeline_state=None, obs=toy.start_obs(), reward=jnp.zeros(()), done=jnp.zeros(()))

        def step(self, state, action):
            obs, reward, done = toy.dynamics(state.obs, action)
            return state.replace(obs=obs, reward=reward, done=done)

        @property
        def observation_size(self):
            return toy.OBS_SIZE

        @property
        def action_size(self):
            return toy.ACTION_SIZE

        @property
        def backend(self):
            return "toy"

    return ToyBraxEnv()


def network_factory():
    from brax.training.agents.ppo import networks as ppo_networks

    return functools.partial(ppo_networks.make_ppo_networks, policy_hidden_layer_sizes=ITERATION["policy_hidden"],
                             value_hidden_layer_sizes=ITERATION["value_hidden"])


def steps_per_iteration(case: dict) -> int:
    return ITERATION["batch_size"] * case["num_minibatches"] * ITERATION["unroll_length"]


def brax_train(case: dict) -> list:
    """`ppo.train` for ITERATIONS training steps (one per epoch, no evaluation): [(normalizer_params, policy
    params, value params)] before the first step and after each, as its `policy_params_fn` receives them."""
    from brax.training.agents.ppo import train as ppo

    snapshots: list = []
    schedule = {key: case[key] for key in ("learning_rate_schedule", "desired_kl", "learning_rate_schedule_min_lr",
                                           "learning_rate_schedule_max_lr") if key in case}
    ppo.train(
        environment=toy_brax_env(), num_timesteps=ITERATIONS * steps_per_iteration(case),
        num_envs=ITERATION["num_envs"], episode_length=ITERATION["episode_length"], action_repeat=1,
        learning_rate=case["learning_rate"], entropy_cost=case["entropy_cost"], discounting=case["discounting"],
        unroll_length=ITERATION["unroll_length"], batch_size=ITERATION["batch_size"],
        num_minibatches=case["num_minibatches"], num_updates_per_batch=case["num_updates_per_batch"],
        normalize_observations=True, reward_scaling=case["reward_scaling"], clipping_epsilon=case["clipping_epsilon"],
        gae_lambda=case["gae_lambda"], max_grad_norm=case["max_grad_norm"],
        normalize_advantage=case["normalize_advantage"], network_factory=network_factory(), seed=ITERATION["seed"],
        num_evals=ITERATIONS + 1, run_evals=False, policy_params_fn=lambda step, _, params: snapshots.append(params),
        **schedule)
    assert len(snapshots) == ITERATIONS + 1, len(snapshots)
    return snapshots


def train_keys():
    """train.py's keys for seed ITERATION['seed'] on one process and device: (key_policy, key_value, key_env,
    [each training_step's key]: one epoch of one step per evaluation)."""
    import jax

    global_key, local_key = jax.random.split(jax.random.PRNGKey(ITERATION["seed"]))
    local_key = jax.random.fold_in(local_key, 0)
    local_key, key_env, _ = jax.random.split(local_key, 3)
    key_policy, key_value = jax.random.split(global_key)
    step_keys = []
    for _ in range(ITERATIONS):
        epoch_key, local_key = jax.random.split(local_key)
        step_keys.append(jax.random.split(epoch_key, 1)[0])
    return key_policy, key_value, key_env, step_keys


def collect(env, policy, env_state, key_generate_unroll, num_unrolls: int):
    """training_step's rollout with each step's key recorded: (the environments' state after it, data [S, T, ...]
    as Brax reshapes it, keys [U, T, 2])."""
    import jax
    import jax.numpy as jnp
    from brax.training import acting

    def recording(obs, key_sample):
        action, extras = policy(obs, key_sample)
        return action, {**extras, "key": key_sample}

    def unroll(carry, _):
        current_state, current_key = carry
        current_key, next_key = jax.random.split(current_key)
        next_state, data = acting.generate_unroll(env, current_state, recording, current_key,
                                                  ITERATION["unroll_length"],
                                                  extra_fields=("truncation", "episode_metrics", "episode_done"))
        return (next_state, next_key), data

    (env_state, _), data = jax.lax.scan(unroll, (env_state, key_generate_unroll), (), length=num_unrolls)
    keys = data.extras["policy_extras"].pop("key")
    data = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 1, 2), data)
    return env_state, jax.tree_util.tree_map(lambda x: jnp.reshape(x, (-1,) + x.shape[2:]), data), keys


def composed(case: dict) -> dict:
    """The same training steps from Brax's parts: the initial parameters; per step its rollout, keys, the
    statistics and parameters after it (Brax's order for `case`) and the step sizes and KLs of its updates; and
    the parameters after the first step in the other order."""
    import jax
    import jax.numpy as jnp
    from brax import envs
    from brax.training import acme
    from brax.training.acme import running_statistics
    from brax.training.agents.ppo import losses as ppo_losses
    from brax.training.agents.ppo import networks as ppo_networks

    from brax_reference import epochs_of_updates

    key_policy, key_value, key_env, step_keys = train_keys()
    env = envs.training.wrap(toy_brax_env(), episode_length=ITERATION["episode_length"], action_repeat=1)
    env_state = jax.jit(env.reset)(jax.random.split(key_env, ITERATION["num_envs"]))
    network = network_factory()((ITERATION["obs_size"],), ITERATION["action_size"],
                                preprocess_observations_fn=running_statistics.normalize)
    params = ppo_losses.PPONetworkParams(policy=network.policy_network.init(key_policy),
                                         value=network.value_network.init(key_value))
    normalizer = running_statistics.init_state(acme.specs.Array((ITERATION["obs_size"],), jnp.dtype("float32")))
    loss_fn = functools.partial(
        ppo_losses.compute_ppo_loss, ppo_network=network, entropy_cost=case["entropy_cost"],
        discounting=case["discounting"], reward_scaling=case["reward_scaling"], gae_lambda=case["gae_lambda"],
        clipping_epsilon=case["clipping_epsilon"], normalize_advantage=case["normalize_advantage"])
    num_unrolls = ITERATION["batch_size"] * case["num_minibatches"] // ITERATION["num_envs"]
    adaptive = case.get("learning_rate_schedule") == "ADAPTIVE_KL"
    out: dict = {"params": params, "steps": []}
    optimizer_state = None
    for key in step_keys:
        key_sgd, key_generate_unroll, _ = jax.random.split(key, 3)
        policy = ppo_networks.make_inference_fn(network)((normalizer, params.policy, params.value))
        env_state, data, keys = jax.jit(functools.partial(collect, env, policy, num_unrolls=num_unrolls))(
            env_state, key_generate_unroll)
        updated_stats = running_statistics.update(normalizer, data.observation)
        updates = jax.jit(lambda stats, p, o, d=data, k=key_sgd: epochs_of_updates(loss_fn, case, p, d, k, stats, o))
        # Brax's order for this schedule, and (first step only) the other one
        ours_stats, other_stats = (normalizer, updated_stats) if adaptive else (updated_stats, normalizer)
        if not out["steps"]:
            out["other_order"] = updates(other_stats, params, optimizer_state)[0]
        params, metrics, optimizer_state = updates(ours_stats, params, optimizer_state)
        normalizer = updated_stats
        out["steps"].append({"data": data, "keys/collect": keys, "keys/sgd": key_sgd, "stats": normalizer,
                             "params": params, "metrics": metrics})
    return out


def max_difference(ours, theirs) -> float:
    """The largest absolute difference between two pytrees' leaves."""
    import jax
    import numpy as np

    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
               for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(theirs), strict=True))


def iteration_reference() -> dict:
    """The fixture's arrays: the initial parameters (shared); per case and step `i` (1, 2) the keys, the rollout,
    what `ppo.train` returned after it (statistics, parameters) and its updates' step sizes and KLs; per case the
    parameters after the first step in the other order."""
    import numpy as np

    from brax_reference import flat

    arrays: dict = {}
    for name, case in ITERATION_CASES.items():
        snapshots = brax_train(case)
        parts = composed(case)
        agreement = max(max_difference((parts["params"].policy, parts["params"].value), snapshots[0][1:]),
                        *(max_difference((step["stats"].mean, step["stats"].std, step["params"].policy,
                                          step["params"].value), (stats.mean, stats.std, policy, value))
                          for step, (stats, policy, value) in zip(parts["steps"], snapshots[1:], strict=True)))
        assert agreement < AGREEMENT, f"{name}: Brax's parts differ from ppo.train by {agreement}"
        arrays.update({**flat("params/policy", snapshots[0][1]), **flat("params/value", snapshots[0][2]),
                       f"{name}/composed_vs_train": np.float32(agreement),
                       **flat(f"{name}/other_order/policy", parts["other_order"].policy),
                       **flat(f"{name}/other_order/value", parts["other_order"].value)})
        for i, (step, (stats, policy, value)) in enumerate(zip(parts["steps"], snapshots[1:]), start=1):
            arrays.update(step_arrays(f"{name}/{i}", step, stats, policy, value))
    return arrays


def step_arrays(prefix: str, step: dict, stats, policy, value) -> dict:
    """One training step's arrays under `prefix`: its keys and rollout (from `composed`), and what `ppo.train`
    returned after it."""
    import numpy as np

    from brax_reference import flat

    data = step["data"]
    count = float(stats.count.hi) * 2.0**32 + float(stats.count.lo)
    return {f"{prefix}/keys/collect": step["keys/collect"], f"{prefix}/keys/sgd": step["keys/sgd"],
            f"{prefix}/rollout/obs": data.observation, f"{prefix}/rollout/next_obs": data.next_observation,
            f"{prefix}/rollout/reward": data.reward, f"{prefix}/rollout/discount": data.discount,
            f"{prefix}/rollout/truncation": data.extras["state_extras"]["truncation"],
            f"{prefix}/rollout/raw_action": data.extras["policy_extras"]["raw_action"],
            f"{prefix}/rollout/log_prob": data.extras["policy_extras"]["log_prob"],
            f"{prefix}/rollout/logits": data.extras["policy_extras"]["distribution_params"],
            f"{prefix}/normalizer/count": np.float32(count), f"{prefix}/normalizer/mean": stats.mean,
            f"{prefix}/normalizer/std": stats.std, f"{prefix}/normalizer/summed_variance": stats.summed_variance,
            **flat(f"{prefix}/updated/policy", policy), **flat(f"{prefix}/updated/value", value),
            f"{prefix}/updates/learning_rate": step["metrics"]["learning_rate"],
            f"{prefix}/updates/kl_mean": step["metrics"]["kl_mean"]}
