"""The same programs under rlfit's JAX and under the Brax venv's JAX: how much of an rlfit-vs-Brax speed
difference is the JAX version rather than either trainer.

Brax 0.14.2 needs jax 0.9.x (`brax-requirements.txt`), rlfit runs on jax 0.10.x, so `first_step.py` and
`brax_compare.py` compare two trainers *and* two JAX releases. This script times, in a child process in each venv
(one after the other, never side by side):

- **physics**: Playground's `step` of `--env`, vmapped over `--num-envs` environments, `--steps` steps in one
  `lax.scan`, random actions in [-1, 1] (MJX `impl=jax`); no policy, no auto-reset;
- **update**: a PPO-sized update written in plain JAX (no Flax, no Optax: the same code in both venvs): a policy
  and a value MLP (`--hidden` layers), Adam, `--minibatches` minibatches of `--minibatch` samples in one scan;
- in rlfit's venv only, **rlfit step**: rlfit's `VecEnv.step` (the physics step plus time limit, episode statistics
  and a fresh reset of every finished environment), same sizes, to show what rlfit adds to the physics; and
  **rlfit rollout**: PPO's `collect` for the same steps (a fresh `--hidden` policy acting, sampling, the
  transitions kept), to show what acting adds.

Each program is compiled once and run `--repeats` times; the JSON keeps every time and the median.

    .venv/bin/python benchmarks/jax_versions.py --env G1JoystickFlatTerrain --num-envs 64
    .venv/bin/python benchmarks/jax_versions.py --env CartpoleBalance --num-envs 512

Robots (G1) are read from RLFIT_MENAGERIE_PATH when set (e.g. ../shared/assets/mujoco_menagerie), in both venvs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import REPO, finish_record, load_playground_jax, print_table, start_record  # noqa: E402

BRAX_PYTHON = Path(__file__).resolve().parent / ".venv-brax" / "bin" / "python"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="G1JoystickFlatTerrain")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20, help="physics steps per timed call (one lax.scan)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256, 256, 256])
    parser.add_argument("--minibatch", type=int, default=5120, help="samples per minibatch (G1 preset: 256 x 20)")
    parser.add_argument("--minibatches", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--quick", action="store_true", help="CartpoleBalance, 16 envs, small MLPs, one repeat: a "
                        "check of the script (results/tmp/)")
    args = parser.parse_args()
    if args.quick:
        args.env, args.num_envs, args.steps, args.hidden = "CartpoleBalance", 16, 5, [32, 32]
        args.minibatch, args.minibatches, args.repeats = 256, 2, 1
    return args


def timed(compiled: Any, *args: Any, repeats: int) -> dict[str, Any]:
    import jax

    jax.block_until_ready(compiled(*args))  # one warm-up call
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(round(time.perf_counter() - start, 4))
    return {"run_s": times, "median_s": statistics.median(times)}


def compile_timed(fn: Any, *args: Any) -> tuple[Any, float]:
    import jax

    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, round(time.perf_counter() - start, 2)


def physics_program(env: Any, num_envs: int, steps: int) -> tuple[Any, tuple[Any, ...]]:
    import jax

    def rollout(states: Any, key: jax.Array) -> Any:
        def one_step(states: Any, step_key: jax.Array) -> tuple[Any, jax.Array]:
            action = jax.random.uniform(step_key, (num_envs, env.action_size), minval=-1.0, maxval=1.0)
            states = jax.vmap(env.step)(states, action)
            return states, states.done.sum()

        return jax.lax.scan(one_step, states, jax.random.split(key, steps))

    key = jax.random.PRNGKey(0)
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(key, num_envs))
    return rollout, (states, key)


def update_program(obs_size: int, action_size: int, hidden: list[int], minibatch: int, minibatches: int
                   ) -> tuple[Any, tuple[Any, ...]]:
    """Policy and value MLPs, a squared-error stand-in loss for each, Adam by hand: the matmuls of a PPO epoch."""
    import jax
    import jax.numpy as jnp

    def mlp_params(key: jax.Array, sizes: list[int]) -> list[tuple[jax.Array, jax.Array]]:
        keys = jax.random.split(key, len(sizes) - 1)
        return [(jax.random.normal(k, (a, b)) / jnp.sqrt(a), jnp.zeros(b))
                for k, a, b in zip(keys, sizes[:-1], sizes[1:], strict=True)]

    def mlp(params: Any, x: jax.Array) -> jax.Array:
        for w, b in params[:-1]:
            x = jax.nn.swish(x @ w + b)
        w, b = params[-1]
        return x @ w + b

    def loss(params: Any, batch: tuple[jax.Array, jax.Array, jax.Array]) -> jax.Array:
        obs, action_target, value_target = batch
        policy_loss = jnp.mean((mlp(params["policy"], obs) - action_target) ** 2)
        value_loss = jnp.mean((mlp(params["value"], obs)[:, 0] - value_target) ** 2)
        return policy_loss + value_loss

    def adam_step(carry: Any, batch: Any) -> tuple[Any, jax.Array]:
        params, m, v, t = carry
        value, grads = jax.value_and_grad(loss)(params, batch)
        t = t + 1
        m = jax.tree.map(lambda m_, g: 0.9 * m_ + 0.1 * g, m, grads)
        v = jax.tree.map(lambda v_, g: 0.999 * v_ + 0.001 * g * g, v, grads)
        params = jax.tree.map(lambda p, m_, v_: p - 3e-4 * (m_ / (1 - 0.9 ** t)) / (jnp.sqrt(v_ / (1 - 0.999 ** t))
                                                                                    + 1e-8), params, m, v)
        return (params, m, v, t), value

    def epoch(carry: Any, batches: Any) -> Any:
        return jax.lax.scan(adam_step, carry, batches)

    key = jax.random.PRNGKey(1)
    params = {"policy": mlp_params(key, [obs_size, *hidden, 2 * action_size]),
              "value": mlp_params(jax.random.fold_in(key, 1), [obs_size, *hidden, 1])}
    zeros = jax.tree.map(jnp.zeros_like, params)
    batches = (jax.random.normal(key, (minibatches, minibatch, obs_size)),
               jax.random.normal(key, (minibatches, minibatch, 2 * action_size)),
               jax.random.normal(key, (minibatches, minibatch)))
    return epoch, ((params, zeros, zeros, jnp.zeros((), jnp.float32)), batches)


def rlfit_step_program(env: Any, num_envs: int, steps: int) -> tuple[Any, tuple[Any, ...]]:
    import jax

    from rlfit.envs.vec_env import VecEnv

    vec_env = VecEnv(env, num_envs, episode_length=1000)

    def rollout(state: Any, key: jax.Array) -> Any:
        def one_step(state: Any, step_key: jax.Array) -> tuple[Any, jax.Array]:
            action = jax.random.uniform(step_key, (num_envs, env.action_size), minval=-1.0, maxval=1.0)
            state, out = vec_env.step(state, action)
            return state, out.termination.sum() + out.truncation.sum()

        return jax.lax.scan(one_step, state, jax.random.split(key, steps))

    key = jax.random.PRNGKey(0)
    return rollout, (jax.jit(vec_env.reset)(key), key)


def rlfit_rollout_program(env: Any, num_envs: int, steps: int, hidden: list[int]) -> tuple[Any, tuple[Any, ...]]:
    import jax

    from rlfit.algos.common.normalizer import init_stats
    from rlfit.algos.ppo.networks import make_agent
    from rlfit.algos.ppo.rollout import collect
    from rlfit.algos.ppo.config import PPOConfig
    from rlfit.envs.vec_env import VecEnv, observation_example

    vec_env = VecEnv(env, num_envs, episode_length=1000)
    obs_example = observation_example(env)
    agent = make_agent(obs_example, vec_env.action_space, PPOConfig(policy_hidden=tuple(hidden),
                                                                    value_hidden=tuple(hidden)))
    key = jax.random.PRNGKey(0)
    params, stats = agent.init(key), init_stats(obs_example)

    def rollout(state: Any, key: jax.Array) -> Any:
        return collect(vec_env, agent, params.policy, stats, state, key, steps, 1)

    return rollout, (jax.jit(vec_env.reset)(key), key)


def observation_size(env: Any) -> int:
    size = env.observation_size
    return int(size if isinstance(size, int) else size["state"][0])


def child(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    if spec["rlfit"]:
        import rlfit  # noqa: F401  (MJX without Warp on a CPU, as every rlfit process)
    import jax

    env = load_playground_jax(spec["env"])
    result: dict[str, Any] = {"jax": jax.__version__, "backend": jax.default_backend(), "programs": {}}
    programs = {"physics": physics_program(env, spec["num_envs"], spec["steps"]),
                "update": update_program(observation_size(env), env.action_size, spec["hidden"], spec["minibatch"],
                                         spec["minibatches"])}
    if spec["rlfit"]:
        programs["rlfit step"] = rlfit_step_program(env, spec["num_envs"], spec["steps"])
        programs["rlfit rollout"] = rlfit_rollout_program(env, spec["num_envs"], spec["steps"], spec["hidden"])
    for name, (fn, args) in programs.items():
        compiled, compile_s = compile_timed(fn, *args)
        result["programs"][name] = {"compile_s": compile_s, **timed(compiled, *args, repeats=spec["repeats"])}
        print(json.dumps({name: result["programs"][name]}), flush=True)
    Path(spec["out"]).write_text(json.dumps(result))


def run_child(python: Path, spec: dict[str, Any], work: Path, tag: str) -> dict[str, Any]:
    spec_path, out = work / f"{tag}.spec.json", work / f"{tag}.json"
    spec_path.write_text(json.dumps({**spec, "out": str(out)}))
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    subprocess.run([str(python), __file__, "--child", str(spec_path)], check=True, env=env, cwd=REPO)
    return json.loads(out.read_text())


def main() -> None:
    args = parse_args()
    if args.child:
        child(args.child)
        return
    if not BRAX_PYTHON.exists():
        print("benchmarks/.venv-brax is missing: run `.venv/bin/python benchmarks/brax_compare.py --quick` once to "
              "build it", file=sys.stderr)
        sys.exit(2)
    record = start_record(f"jax_versions_{args.env}_n{args.num_envs}" + ("_quick" if args.quick else ""))
    spec = {"env": args.env, "num_envs": args.num_envs, "steps": args.steps, "hidden": args.hidden,
            "minibatch": args.minibatch, "minibatches": args.minibatches, "repeats": args.repeats}
    record["settings"] = spec
    work = REPO / "benchmarks" / "results" / "tmp" / record["benchmark"]
    work.mkdir(parents=True, exist_ok=True)
    sides = {"rlfit venv": run_child(Path(sys.executable), {**spec, "rlfit": True}, work, "rlfit"),
             "brax venv": run_child(BRAX_PYTHON, {**spec, "rlfit": False}, work, "brax")}
    record["sides"] = sides
    rows = []
    for name in ("physics", "update", "rlfit step", "rlfit rollout"):
        ours = sides["rlfit venv"]["programs"].get(name)
        theirs = sides["brax venv"]["programs"].get(name)
        rows.append([name, ours and ours["median_s"], theirs and theirs["median_s"],
                     round(ours["median_s"] / theirs["median_s"], 3) if ours and theirs else None])
    record["ratios_rlfit_jax_over_brax_jax"] = {row[0]: row[3] for row in rows if row[3] is not None}
    print_table(rows, ["program", f"jax {sides['rlfit venv']['jax']} (s)", f"jax {sides['brax venv']['jax']} (s)",
                       "ratio"])
    finish_record(record, args.out)


if __name__ == "__main__":
    main()
