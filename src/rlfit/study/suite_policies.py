"""The two policies a suite can evaluate from a trial's saved policy files, and what else they can measure there.

    most-likely   the mode of the policy's distribution (argmax of the logits, tanh of the mean): what
                  `rlfit.load_policy`, play and export run; with a bottleneck z = mean (the folded weights)
    stochastic    the policy as trained acts: an action sampled from its distribution, and with an information
                  bottleneck (`rlfit.networks.bottleneck`) a latent z = mean + sigma * noise sampled first

A bottleneck policy's unfolded params (`LATENT_FILE` beside the weights) give both policies and the description
length (the rate KL(q(z | obs) || N(0, I)) in bits) of the states a suite visits; without that file only the
folded, most-likely policy can be evaluated and no description length is measured.

    act = suite_actor(files, config, STOCHASTIC)
    action = act.act(act.arrays, obs [N, D], key)      # [N] int32 (discrete) or [N, A]
    bits = act.rate(act.arrays, obs [N, D])            # [N], or act.rate is None
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from rlfit.errors import UserError

MOST_LIKELY_POLICY = "most-likely"
STOCHASTIC_POLICY = "stochastic"
POLICIES = (MOST_LIKELY_POLICY, STOCHASTIC_POLICY)
"""The values of a suite's `policy` key in a manifest."""
POLICY_NAMES = {MOST_LIKELY_POLICY: "most likely action",
                STOCHASTIC_POLICY: "stochastic policy (sampled latent and action)"}
"""What suites.json and the report call each policy."""


class SuiteActor(NamedTuple):
    """Pure functions of a policy's arrays (one compiled evaluator serves every seed of a variant)."""

    arrays: Any
    """The policy's parameters and observation statistics."""
    act: Callable[[Any, Any, Any], Any]
    """(arrays, obs [N, ...], key) -> actions [N] int32 or [N, A] float32."""
    rate: Callable[[Any, Any], Any] | None
    """(arrays, obs [N, ...]) -> [N] bits of the bottleneck's rate; None without a bottleneck."""


def suite_actor(files: Any, config: Any, policy: str, latent: dict[str, Any] | None) -> SuiteActor:
    """The `policy` (one of POLICIES) of the saved policy `files` of a trial with `config`; `latent`: the unfolded
    bottleneck params read from `LATENT_FILE` (nested dict) or None."""
    if latent is not None:
        return _bottleneck_actor(files, config, policy, latent)
    if policy == MOST_LIKELY_POLICY:
        from rlfit.deploy.policy_file import policy_apply

        apply, arrays = policy_apply(files, files.description["precision"])
        return SuiteActor(arrays, lambda arrays, obs, key: apply(arrays, obs), None)
    return _stochastic_mlp_actor(files)


def _bottleneck_actor(files: Any, config: Any, policy: str, latent: dict[str, Any]) -> SuiteActor:
    import jax
    import jax.numpy as jnp

    from rlfit.algos.common.normalizer import normalize
    from rlfit.networks.bottleneck import BITS_PER_NAT, BottleneckPolicy
    from rlfit.deploy.policy_file import action_space_of, head_of
    from rlfit.networks import distribution_for

    space = action_space_of(files.description)
    network = BottleneckPolicy(tuple(config.ppo.policy_hidden), config.ppo.bottleneck, space.logits_size,
                               config.ppo.activation)
    params = jax.tree.map(jnp.asarray, latent)
    mode, distribution = head_of(files.description).mode, distribution_for(space)

    def act(arrays, obs, key):
        params, stats = arrays
        x = normalize(stats, jnp.asarray(obs, jnp.float32))
        if policy == MOST_LIKELY_POLICY:
            return mode(network.apply(params, x)[0])
        noise_key, action_key = jax.random.split(key)
        noise = jax.random.normal(noise_key, x.shape[:-1] + (config.ppo.bottleneck,))
        dist = distribution.from_logits(network.apply(params, x, noise)[0])
        return dist.env_action(dist.sample_raw(action_key))

    def rate(arrays, obs):
        params, stats = arrays
        return network.apply(params, normalize(stats, jnp.asarray(obs, jnp.float32)))[1] * BITS_PER_NAT

    return SuiteActor((params, _stats(files)), act, rate)


def _stochastic_mlp_actor(files: Any) -> SuiteActor:
    import jax
    import jax.numpy as jnp

    from rlfit.algos.common.normalizer import normalize
    from rlfit.deploy.policy_file import ENCODER_NETWORK_KIND, action_space_of, head_of
    from rlfit.networks import COMPUTE_DTYPES, MLP, distribution_for
    from rlfit.networks.heads import CATEGORICAL, TANH_GAUSSIAN

    network, head = files.description["network"], head_of(files.description).name
    if network["kind"] == ENCODER_NETWORK_KIND or head not in (CATEGORICAL, TANH_GAUSSIAN):
        raise UserError(f"a suite asks for the {STOCHASTIC_POLICY} policy, but this policy ('{network['kind']}' "
                        f"network, '{head}' head) has no distribution to sample; use policy: {MOST_LIKELY_POLICY}")
    mlp = MLP(tuple(network["layer_sizes"]), network["activation"], COMPUTE_DTYPES[files.description["precision"]])
    distribution = distribution_for(action_space_of(files.description))

    def act(arrays, obs, key):
        params, stats = arrays
        logits = mlp.apply(params, normalize(stats, jnp.asarray(obs, jnp.float32))).astype(jnp.float32)
        dist = distribution.from_logits(logits)
        return dist.env_action(dist.sample_raw(key))

    return SuiteActor((jax.tree.map(jnp.asarray, files.params), _stats(files)), act, None)


def _stats(files: Any) -> Any:
    import jax.numpy as jnp

    from rlfit.algos.common.normalizer import RunningStats

    return RunningStats(jnp.asarray(files.count, jnp.float32), jnp.asarray(files.mean), jnp.asarray(files.sum_sq_dev))


def read_latent(run_dir: Any) -> dict[str, Any] | None:
    """The unfolded bottleneck params saved beside the trial's final policy (nested dict), or None."""
    import numpy as np

    from rlfit.deploy.policy_file import LATENT_FILE, find_policy_dir
    from rlfit.networks.param_paths import unflatten_params

    path = find_policy_dir(run_dir) / LATENT_FILE
    if not path.is_file():
        return None
    with np.load(path) as data:
        return unflatten_params({name: data[name] for name in data.files})
