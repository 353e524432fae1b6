"""Trains one Playground environment with Brax's `ppo.train` or `sac.train`; run by brax_compare.py inside
benchmarks/.venv-brax, and imported by gpu_brax.py (gpu_check.py's Brax steps, in rlfit's interpreter).

    benchmarks/.venv-brax/bin/python benchmarks/brax_child.py SPEC.json OUT.json

SPEC.json holds `env`, `seed` and either `ppo` (keyword arguments of `ppo.train`, plus `policy_hidden` and
`value_hidden`, and optionally `policy_obs_key` and `value_obs_key`)
or `sac` (keyword arguments of `sac.train`, plus `policy_hidden`, `q_hidden` and
`q_layer_norm`). OUT.json gets every progress callback with its time since the train call, Brax's own
`training/sps`, the eval reward, the process CPU time so far and the seconds since the process started (psutil's
create time, when psutil imports), and the times of imports, environment loading and the call.
Imports only Brax, Playground, the standard library and psutil when present (this venv has no rlfit).
"""

from __future__ import annotations

import json
import sys
import time

STARTED = time.perf_counter()


def _process_created() -> float | None:
    """The Unix time this process started (psutil's, as rlfit's `time_to_first_step_s` uses), or None."""
    try:
        import psutil

        return psutil.Process().create_time()
    except Exception:  # noqa: BLE001 - psutil is optional here
        return None


PROCESS_CREATED = _process_created()
STARTED_UNIX = time.time() - (time.perf_counter() - STARTED)

import functools  # noqa: E402
from collections.abc import Callable  # noqa: E402

import jax  # noqa: E402
from brax.training.agents.ppo import networks as ppo_networks  # noqa: E402
from brax.training.agents.ppo import train as ppo  # noqa: E402
from brax.training.agents.sac import networks as sac_networks  # noqa: E402
from brax.training.agents.sac import train as sac  # noqa: E402
from mujoco_playground import wrapper  # noqa: E402

from common import load_playground_jax  # noqa: E402

IMPORTED = time.perf_counter()


def progress_recorder(t0: list[float], callbacks: list[dict]) -> Callable[[int, dict], None]:
    """A `progress_fn` that records (seconds since t0, step, eval reward, Brax's sps) and prints a line."""

    def record(step: int, metrics: dict) -> None:
        now = time.perf_counter() - t0[0]
        row = {"t_s": now, "cpu_s": time.process_time(), "step": int(step), "since_process_start_s":
               None if PROCESS_CREATED is None else time.time() - PROCESS_CREATED,
               "eval_reward": _float(metrics.get("eval/episode_reward")),
               "brax_training_sps": _float(metrics.get("training/sps")),
               "brax_training_walltime": _float(metrics.get("training/walltime")),
               "eval_walltime": _float(metrics.get("eval/walltime")),
               **{key: _float(value) for key, value in metrics.items()
                  if key.startswith("training/") and key.endswith("loss")}}
        callbacks.append(row)
        print(f"t={now:7.1f}s step={row['step']:>10,} eval={row['eval_reward']} "
              f"brax sps={row['brax_training_sps']}", flush=True)

    return record


def ppo_network_factory(kwargs: dict) -> Callable:
    """`make_ppo_networks` with the policy and value sizes (and, where given, the observation keys each network reads
    from a dict observation) popped from `kwargs`."""
    keys = {name: kwargs.pop(name) for name in ("policy_obs_key", "value_obs_key") if name in kwargs}
    return functools.partial(ppo_networks.make_ppo_networks,
                             policy_hidden_layer_sizes=tuple(kwargs.pop("policy_hidden")),
                             value_hidden_layer_sizes=tuple(kwargs.pop("value_hidden")), **keys)


def sac_network_factory(kwargs: dict) -> Callable:
    """SAC networks with the policy and Q sizes (and Q LayerNorm) popped from `kwargs`.

    Brax's `make_sac_networks` takes one `hidden_layer_sizes` for both networks, so it is called twice (the
    policy from one call, the Q networks from the other); every other argument keeps Brax's default.
    """
    policy_hidden, q_hidden = tuple(kwargs.pop("policy_hidden")), tuple(kwargs.pop("q_hidden"))
    q_layer_norm = kwargs.pop("q_layer_norm")

    def factory(observation_size, action_size, preprocess_observations_fn):
        make = functools.partial(sac_networks.make_sac_networks, observation_size, action_size,
                                 preprocess_observations_fn)
        policy = make(hidden_layer_sizes=policy_hidden)
        q = make(hidden_layer_sizes=q_hidden, q_network_layer_norm=q_layer_norm)
        return sac_networks.SACNetworks(policy_network=policy.policy_network, q_network=q.q_network,
                                        parametric_action_distribution=policy.parametric_action_distribution)

    return factory


TRAINERS = {"ppo": (ppo.train, ppo_network_factory), "sac": (sac.train, sac_network_factory)}


def train(spec: dict, on_progress: Callable[[list[dict]], None] | None = None) -> dict:
    """Loads the environment (impl='jax'), runs Brax's trainer with spec's settings, returns the timings.
    `on_progress` gets the callbacks so far after each one (gpu_brax.py keeps them as they come)."""
    algo = next(name for name in TRAINERS if name in spec)
    train_fn, network_factory = TRAINERS[algo]
    env_started = time.perf_counter()
    env = load_playground_jax(spec["env"])
    env_loaded = time.perf_counter()
    kwargs = dict(spec[algo])
    factory = network_factory(kwargs)
    callbacks: list[dict] = []
    t0 = [0.0]
    record = progress_recorder(t0, callbacks)

    def progress(step: int, metrics: dict) -> None:
        record(step, metrics)
        if on_progress is not None:
            on_progress(callbacks)

    t0[0] = time.perf_counter()
    _, _, final_metrics = train_fn(environment=env, wrap_env_fn=wrapper.wrap_for_brax_training,
                                   network_factory=factory, progress_fn=progress, seed=spec["seed"], **kwargs)
    call_s = time.perf_counter() - t0[0]
    return {
        "script_start_since_process_start_s": None if PROCESS_CREATED is None else STARTED_UNIX - PROCESS_CREATED,
        "import_s": IMPORTED - STARTED,
        "env_load_s": env_loaded - env_started,
        "train_call_s": call_s,
        "train_call_start_since_script_start_s": t0[0] - STARTED,
        "callbacks": callbacks,
        "final_eval_reward": _float(final_metrics.get("eval/episode_reward")),
        "jax_version": jax.__version__,
        "device": str(jax.devices()[0]),
    }


def _float(value) -> float | None:
    return None if value is None else float(value)


def main() -> None:
    spec_path, out_path = sys.argv[1], sys.argv[2]
    with open(spec_path) as handle:
        spec = json.load(handle)
    result = train(spec)
    with open(out_path, "w") as handle:
        json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
