"""Brax's own PPO and SAC code on fixed inputs, saved as the test suite's reference fixtures.

Feeds Brax 0.14.2's `ppo/losses.py` (`compute_ppo_loss`), the epochs of minibatch updates of `ppo/train.py`'s
`training_step` (`sgd_step` and `minibatch_step`, copied here line for line because `train()` keeps them in
closures: the same key splits, the same permutation, the same optax chain), and `sac/losses.py`'s three losses,
fixed transitions and fixed network parameters, and writes what they return:

    tests/algos/ppo/fixtures/brax_ppo.npz  (+ brax_ppo.json: versions, command, settings of each case)
    tests/algos/ppo/fixtures/brax_ppo_iteration.npz  (+ .json: two whole training iterations of `ppo.train`,
        benchmarks/brax_iteration_reference.py)
    tests/algos/sac/fixtures/brax_sac.npz  (+ brax_sac.json)

rlfit's tests (tests/algos/ppo/test_brax_reference.py and test_brax_iteration.py,
tests/algos/sac/test_brax_reference.py) load them and need no Brax. Parameters are stored under Brax's names
(`hidden_i`, SAC's `MLP_i`); the tests map them to rlfit's (`dense_i`, `critic_i`). Observation normalization is
off in brax_ppo and brax_sac (Brax's identity preprocessor); brax_ppo_iteration pins it (the statistics, and where
Brax updates them).

Runs in the Brax venv (benchmarks/.venv-brax, built from brax-requirements.txt by brax_compare.py); started from
rlfit's venv it builds that venv when missing and runs itself there:

    .venv/bin/python benchmarks/brax_reference.py
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PPO_OUT = REPO / "tests" / "algos" / "ppo" / "fixtures" / "brax_ppo"
SAC_OUT = REPO / "tests" / "algos" / "sac" / "fixtures" / "brax_sac"
COMMAND = ".venv/bin/python benchmarks/brax_reference.py"

# The transitions: S sequences of T steps (PPO), B transitions (SAC); D observation features, A action dims.
S, T, D, A = 16, 8, 5, 2
SAC_BATCH = 32
POLICY_HIDDEN, VALUE_HIDDEN, SAC_HIDDEN = (32, 32, 32, 32), (64, 64), (32, 32)

# Playground's DM Control PPO settings (dm_control_suite_params.brax_ppo_config) with the batch scaled down to
# fit a fixture: 16 sequences in 4 minibatches instead of 32768 in 32, 4 epochs instead of 16.
DM_CONTROL = {"discounting": 0.995, "gae_lambda": 0.95, "clipping_epsilon": 0.3, "entropy_cost": 1e-2,
              "reward_scaling": 10.0, "learning_rate": 1e-3, "max_grad_norm": None, "normalize_advantage": True,
              "num_minibatches": 4, "num_updates_per_batch": 4}
PPO_CASES = {
    "dm_control": DM_CONTROL,
    "dm_control_raw_advantage": {**DM_CONTROL, "normalize_advantage": False},
    # The G1 recipe's other discount, clip, scale and a gradient-norm clip (optax chain in front of Adam).
    "clipped_grads": {**DM_CONTROL, "discounting": 0.97, "clipping_epsilon": 0.2, "entropy_cost": 5e-3,
                      "reward_scaling": 1.0, "learning_rate": 3e-4, "max_grad_norm": 1.0},
    # Brax's adaptive-KL learning-rate schedule (learning_rate_schedule=ADAPTIVE_KL), its desired KL low enough
    # that the 16 updates move the step size both up (KL under half of it) and down (KL over twice it).
    "adaptive_kl": {**DM_CONTROL, "learning_rate_schedule": "ADAPTIVE_KL", "desired_kl": 0.002,
                    "learning_rate_schedule_min_lr": 1e-5, "learning_rate_schedule_max_lr": 1e-2},
}
SAC_SETTINGS = {"discounting": 0.99, "reward_scaling": 3.0, "log_alpha": -0.4}


def main() -> None:
    if Path(sys.prefix).resolve() != (REPO / "benchmarks" / ".venv-brax").resolve():
        # rlfit's venv (which may hold Brax too, on a jax whose `ppo.train` fails): build (if needed) and use the
        # Brax venv
        sys.path.insert(0, str(REPO / "benchmarks"))
        from brax_compare import BRAX_PYTHON, ensure_brax_venv

        ensure_brax_venv()
        os.execv(str(BRAX_PYTHON), [str(BRAX_PYTHON), __file__, *sys.argv[1:]])
    import jax

    jax.config.update("jax_platforms", "cpu")
    versions = package_versions()
    ppo_arrays = ppo_reference()
    write(PPO_OUT, ppo_arrays, {"cases": PPO_CASES, "sequences": S, "unroll_length": T, "obs_size": D,
                                "action_size": A, "policy_hidden": POLICY_HIDDEN, "value_hidden": VALUE_HIDDEN,
                                "activation": "swish"}, versions)
    from brax_iteration_reference import ITERATION, ITERATION_CASES, ITERATION_OUT, iteration_reference

    write(ITERATION_OUT, iteration_reference(), {"cases": ITERATION_CASES, **ITERATION}, versions)
    sac_arrays = sac_reference()
    write(SAC_OUT, sac_arrays, {**SAC_SETTINGS, "batch": SAC_BATCH, "obs_size": D, "action_size": A,
                                "hidden": SAC_HIDDEN, "activation": "relu", "target_entropy": -0.5 * A}, versions)


def package_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("brax", "jax", "jaxlib", "flax", "optax", "numpy")}


def write(stem: Path, arrays: dict, settings: dict, versions: dict) -> None:
    """Saves `arrays` as stem.npz and, beside it, stem.json: versions, the command, the settings."""
    import numpy as np

    stem.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(stem.with_suffix(".npz"), **{k: np.asarray(v) for k, v in arrays.items()})
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout
    script = Path(sys.argv[0]).resolve()
    argv = [str(script.relative_to(REPO)) if script.is_relative_to(REPO) else sys.argv[0], *sys.argv[1:]]
    record = {"generated_by": COMMAND, "ran_as": shlex.join([Path(sys.executable).name, *argv]),
              "repo_commit": git.strip(), "versions": versions, "settings": settings,
              "arrays": {k: list(np.shape(v)) for k, v in arrays.items()}}
    stem.with_suffix(".json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {stem.with_suffix('.npz').relative_to(REPO)} ({stem.with_suffix('.npz').stat().st_size} bytes)")


def flat(prefix: str, tree) -> dict:
    """{'prefix/a/b': leaf} for a nested dict of arrays."""
    import jax

    return {prefix + "/" + "/".join(str(k.key) for k in path): leaf
            for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]}


def perturbed(params, key, scale: float = 0.1):
    """Freshly initialized parameters plus N(0, scale^2) noise (so zero biases are not all the test sees)."""
    import jax

    leaves, treedef = jax.tree_util.tree_flatten(params)
    keys = jax.random.split(key, len(leaves))
    return jax.tree_util.tree_unflatten(
        treedef, [x + scale * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys)])


def ppo_transitions(key, ppo_network, params):
    """Brax's Transition [S, T, ...]: terminations, time-limit truncations and ordinary steps mixed, and behaviour
    log-probabilities off the current policy's by N(0, 0.3^2) so that some ratios leave the clip range."""
    import jax
    import jax.numpy as jnp
    from brax.training import types

    k_obs, k_next, k_act, k_rew, k_end, k_kind, k_lp = jax.random.split(key, 7)
    obs = jax.random.normal(k_obs, (S, T, D))
    next_obs = jax.random.normal(k_next, (S, T, D))
    raw_action = 0.8 * jax.random.normal(k_act, (S, T, A))
    reward = 0.1 * jax.random.normal(k_rew, (S, T)) + 0.05
    ended = jax.random.uniform(k_end, (S, T)) < 0.25
    as_truncation = jax.random.uniform(k_kind, (S, T)) < 0.5
    truncation = (ended & as_truncation).astype(jnp.float32)
    termination = (ended & ~as_truncation).astype(jnp.float32)
    # Sequence 0 ends on a truncation, sequence 1 on a termination: the bootstrap value meets both masks.
    truncation = truncation.at[0, -1].set(1.0).at[1, -1].set(0.0)
    termination = termination.at[0, -1].set(0.0).at[1, -1].set(1.0)
    logits = ppo_network.policy_network.apply(None, params.policy, obs)
    log_prob = ppo_network.parametric_action_distribution.log_prob(logits, raw_action)
    log_prob = log_prob + 0.3 * jax.random.normal(k_lp, (S, T))
    transitions = types.Transition(
        observation=obs, action=jnp.tanh(raw_action), reward=reward, discount=1.0 - jnp.maximum(truncation, termination),
        next_observation=next_obs,
        extras={"state_extras": {"truncation": truncation},
                "policy_extras": {"raw_action": raw_action, "log_prob": log_prob, "distribution_params": logits}})
    return transitions, termination


def ppo_reference() -> dict:
    import jax
    import jax.numpy as jnp
    from brax.training.agents.ppo import losses as ppo_losses
    from brax.training.agents.ppo import networks as ppo_networks

    ppo_network = ppo_networks.make_ppo_networks(D, A, policy_hidden_layer_sizes=POLICY_HIDDEN,
                                                 value_hidden_layer_sizes=VALUE_HIDDEN)
    k_init, k_perturb, k_data, k_loss, k_sgd = jax.random.split(jax.random.PRNGKey(20260422), 5)
    k_policy, k_value = jax.random.split(k_init)
    params = ppo_losses.PPONetworkParams(policy=ppo_network.policy_network.init(k_policy),
                                         value=ppo_network.value_network.init(k_value))
    params = perturbed(params, k_perturb)
    data, termination = ppo_transitions(k_data, ppo_network, params)
    arrays = {**flat("params/policy", params.policy), **flat("params/value", params.value),
              "data/obs": data.observation, "data/next_obs": data.next_observation, "data/reward": data.reward,
              "data/termination": termination, "data/truncation": data.extras["state_extras"]["truncation"],
              "data/raw_action": data.extras["policy_extras"]["raw_action"],
              "data/log_prob": data.extras["policy_extras"]["log_prob"],
              "data/logits": data.extras["policy_extras"]["distribution_params"],
              "keys/loss": k_loss, "keys/sgd": k_sgd}
    for name, case in PPO_CASES.items():
        loss_fn = functools.partial(
            ppo_losses.compute_ppo_loss, ppo_network=ppo_network, entropy_cost=case["entropy_cost"],
            discounting=case["discounting"], reward_scaling=case["reward_scaling"], gae_lambda=case["gae_lambda"],
            clipping_epsilon=case["clipping_epsilon"], normalize_advantage=case["normalize_advantage"])
        # compute_ppo_loss on one minibatch: the whole [S, T] batch.
        (total, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(params, None, data, k_loss)
        arrays.update({f"{name}/loss/total": total, f"{name}/loss/policy": metrics["policy_loss"],
                       f"{name}/loss/value": metrics["v_loss"], f"{name}/loss/entropy": metrics["entropy_loss"],
                       f"{name}/loss/kl_mean": metrics["kl_mean"],
                       **flat(f"{name}/grads/policy", grads.policy), **flat(f"{name}/grads/value", grads.value)})
        # Brax's targets for the same batch and parameters (time-major [T, S]).
        time_major = jax.tree_util.tree_map(lambda x: jnp.swapaxes(x, 0, 1), data)
        values = ppo_network.value_network.apply(None, params.value, time_major.observation)
        bootstrap = ppo_network.value_network.apply(None, params.value, time_major.next_observation[-1])
        vs, advantages = ppo_losses.compute_gae(
            truncation=time_major.extras["state_extras"]["truncation"], termination=termination.T,
            rewards=time_major.reward * case["reward_scaling"], values=values, bootstrap_value=bootstrap,
            lambda_=case["gae_lambda"], discount=case["discounting"])
        arrays.update({f"{name}/targets/vs": vs, f"{name}/targets/advantages": advantages})
        updated, update_metrics, _ = epochs_of_updates(loss_fn, case, params, data, k_sgd)
        arrays.update({**flat(f"{name}/updated/policy", updated.policy),
                       **flat(f"{name}/updated/value", updated.value),
                       f"{name}/updates/learning_rate": update_metrics["learning_rate"],
                       f"{name}/updates/kl_mean": update_metrics["kl_mean"]})
    return arrays


def epochs_of_updates(loss_fn, case, params, data, key_sgd, normalizer_params=None, optimizer_state=None):
    """Brax 0.14.2 ppo/train.py's training_step after collection: `num_updates_per_batch` sgd_steps over `data`
    [S, T] with Brax's key splits and permutation, each a scan of minibatch_steps (its code, without pmap and
    pixel augmentation, which these settings leave off; the adaptive-KL schedule with Brax's own
    `adaptive_kl_learning_rate`). Returns the parameters after the updates, each update's step size and `kl_mean`
    [num_updates_per_batch, num_minibatches], and the optimizer state. `normalizer_params`: the observation
    statistics the loss normalizes with (None: `loss_fn`'s network has Brax's identity preprocessor);
    `optimizer_state`: the state a previous training step left (None: a fresh one)."""
    import jax
    import jax.numpy as jnp
    import optax
    from brax.training import gradients
    from brax.training.agents.ppo import optimizer as ppo_optimizer

    adaptive_kl = case.get("learning_rate_schedule") == "ADAPTIVE_KL"
    optimizer = optax.adam(learning_rate=case["learning_rate"])
    if adaptive_kl:
        optimizer = optax.inject_hyperparams(optax.adam)(learning_rate=case["learning_rate"])
    if case["max_grad_norm"] is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(case["max_grad_norm"]), optimizer)
    loss_and_pgrad_fn = gradients.loss_and_pgrad(loss_fn, pmap_axis_name=None, has_aux=True)
    num_minibatches = case["num_minibatches"]

    def minibatch_step(carry, data, normalizer_params):
        optimizer_state, params, key = carry
        key, key_loss = jax.random.split(key)
        (_, metrics), grads = loss_and_pgrad_fn(params, normalizer_params, data, key_loss)
        if adaptive_kl:
            optimizer_state, lr = ppo_optimizer.adaptive_kl_learning_rate(
                optimizer_state, metrics["kl_mean"], case["desired_kl"],
                min_learning_rate=case["learning_rate_schedule_min_lr"],
                max_learning_rate=case["learning_rate_schedule_max_lr"])
        else:
            lr = jnp.array(case["learning_rate"])
        metrics["learning_rate"] = lr
        params_update, optimizer_state = optimizer.update(grads, optimizer_state)
        params = optax.apply_updates(params, params_update)
        return (optimizer_state, params, key), metrics

    def sgd_step(carry, unused_t, data, normalizer_params):
        optimizer_state, params, key = carry
        key, key_perm, key_grad = jax.random.split(key, 3)

        def convert_data(x: jnp.ndarray):
            x = jax.random.permutation(key_perm, x)
            x = jnp.reshape(x, (num_minibatches, -1) + x.shape[1:])
            return x

        shuffled_data = jax.tree_util.tree_map(convert_data, data)
        (optimizer_state, params, _), metrics = jax.lax.scan(
            functools.partial(minibatch_step, normalizer_params=normalizer_params),
            (optimizer_state, params, key_grad), shuffled_data, length=num_minibatches)
        return (optimizer_state, params, key), metrics

    if optimizer_state is None:
        optimizer_state = optimizer.init(params)
    (optimizer_state, new_params, _), metrics = jax.lax.scan(
        functools.partial(sgd_step, data=data, normalizer_params=normalizer_params),
        (optimizer_state, params, key_sgd), (), length=case["num_updates_per_batch"])
    return new_params, metrics, optimizer_state


def sac_reference() -> dict:
    import jax
    import jax.numpy as jnp
    from brax.training import types
    from brax.training.agents.sac import losses as sac_losses
    from brax.training.agents.sac import networks as sac_networks

    network = sac_networks.make_sac_networks(D, A, hidden_layer_sizes=SAC_HIDDEN)
    keys = jax.random.split(jax.random.PRNGKey(20260423), 12)
    policy = perturbed(network.policy_network.init(keys[0]), keys[1])
    q = perturbed(network.q_network.init(keys[2]), keys[3])
    target_q = perturbed(q, keys[4], 0.05)
    obs, next_obs = jax.random.normal(keys[5], (SAC_BATCH, D)), jax.random.normal(keys[6], (SAC_BATCH, D))
    action = jnp.tanh(jax.random.normal(keys[7], (SAC_BATCH, A)))
    reward = jax.random.normal(keys[8], (SAC_BATCH,))
    # Terminations (discount 0) mixed with ordinary steps; no time-limit truncations: rlfit's SAC bootstraps
    # them from the pre-reset observation where Brax masks them (a documented difference, docs/algorithms/sac.md).
    discount = (jax.random.uniform(keys[9], (SAC_BATCH,)) > 0.25).astype(jnp.float32)
    transitions = types.Transition(observation=obs, action=action, reward=reward, discount=discount,
                                   next_observation=next_obs,
                                   extras={"state_extras": {"truncation": jnp.zeros((SAC_BATCH,))}})
    alpha_loss, critic_loss, actor_loss = sac_losses.make_losses(
        network, reward_scaling=SAC_SETTINGS["reward_scaling"], discounting=SAC_SETTINGS["discounting"],
        action_size=A)
    log_alpha = jnp.asarray(SAC_SETTINGS["log_alpha"], jnp.float32)
    alpha = jnp.exp(log_alpha)
    k_alpha, k_critic, k_actor = keys[10], keys[11], jax.random.fold_in(keys[11], 1)
    alpha_value, alpha_grad = jax.value_and_grad(alpha_loss)(log_alpha, policy, None, transitions, k_alpha)
    critic_value, critic_grads = jax.value_and_grad(critic_loss)(q, policy, None, target_q, alpha, transitions,
                                                                 k_critic)
    actor_value, actor_grads = jax.value_and_grad(actor_loss)(policy, None, q, alpha, transitions, k_actor)
    return {**flat("params/policy", policy), **flat("params/q", q), **flat("params/target_q", target_q),
            "params/log_alpha": log_alpha,
            "data/obs": obs, "data/next_obs": next_obs, "data/action": action, "data/reward": reward,
            "data/discount": discount, "keys/alpha": k_alpha, "keys/critic": k_critic, "keys/actor": k_actor,
            "alpha/loss": alpha_value, "alpha/grad": alpha_grad,
            "critic/loss": critic_value, **flat("critic/grads", critic_grads),
            "actor/loss": actor_value, **flat("actor/grads", actor_grads)}


if __name__ == "__main__":
    main()
