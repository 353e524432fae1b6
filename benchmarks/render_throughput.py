"""Pixel observations without a GPU: frames/s of rlfit's JAX camera against MuJoCo's OpenGL renderer.

What: 64x64 RGB frames of one Playground environment (CartpoleBalance by default: every visible geom of it
is a plane, capsule or box, which the JAX camera draws) from one camera ('fixed' by default), at several
numbers of environments N.

How: N environment states come from `jax.vmap(env.reset)` plus a few random steps (so poses differ).
  jax     `jax.jit(jax.vmap(render, in_axes=(None, None, 0)))` over the N states; compiled first (compile
          seconds reported), then timed over --repeats calls with `block_until_ready`, median.
  jax chunked  the same with `render_batch` (lax.map over chunks of 16 environments, each vmapped).
  native  `mujoco.Renderer` (EGL, one OpenGL context) rendering the same N states one by one:
          `update_scene(data_i, camera)` + `render()` per state, one untimed pass, then timed over --repeats
          passes, median. Host `MjData` are prepared (qpos copied, `mj_forward`) outside the timing. The
          model's own visual settings apply (skybox, textures, shadows, reflections, 4x multisampling).
frames/s = N / median seconds. JAX runs on whatever `jax.default_backend()` is (CPU here); the native
renderer on the machine's EGL device (llvmpipe when there is no GPU).

    .venv/bin/python benchmarks/render_throughput.py                  # N = 1 4 16 64 256 1024
    .venv/bin/python benchmarks/render_throughput.py --quick          # a check of the script: N = 2, 1 repeat
    .venv/bin/python benchmarks/render_throughput.py --env CheetahRun --camera side --num-envs 1 16
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("MUJOCO_GL", "egl")

import jax  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

from common import finish_record, print_table, start_record  # noqa: E402
from rlfit.envs.camera import CameraSpec, make_camera, render, render_batch  # noqa: E402
from rlfit.versions import package_versions  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="CartpoleBalance")
    parser.add_argument("--camera", default="fixed", help="a camera named in the model, or '' for the default view")
    parser.add_argument("--image-size", type=int, default=64)
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 4, 16, 64, 256, 1024])
    parser.add_argument("--repeats", type=int, default=5, help="timed calls (jax) / passes (native) per N")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="a check of the script, not a figure: N = 2 (one size: each N compiles its programs "
                             "again), 1 repeat")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON path (default results/render_throughput.json; --quick: results/tmp/...)")
    args = parser.parse_args()
    if args.quick:
        args.num_envs, args.repeats = [2], 1
    return args


def env_states(env: Any, count: int, seed: int) -> Any:
    """[count] batched mjx Data: reset, then 10 random-action steps so that the poses differ."""
    keys = jax.random.split(jax.random.PRNGKey(seed), count + 1)
    state = jax.jit(jax.vmap(env.reset))(keys[1:])
    step = jax.jit(jax.vmap(env.step))
    for i in range(10):
        actions = jax.random.uniform(jax.random.fold_in(keys[0], i), (count, env.action_size), minval=-1, maxval=1)
        state = step(state, actions)
    return state.data


def time_jax(frames: Any, camera: Any, mjx_model: Any, data: Any, repeats: int) -> dict[str, float]:
    """Compile seconds and median seconds per call of `frames` (jitted) over `data`'s batch."""
    started = time.perf_counter()
    compiled = frames.lower(camera, mjx_model, data).compile()
    compile_s = time.perf_counter() - started
    jax.block_until_ready(compiled(camera, mjx_model, data))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        jax.block_until_ready(compiled(camera, mjx_model, data))
        times.append(time.perf_counter() - started)
    return {"compile_s": compile_s, "median_s": statistics.median(times), "times_s": times}


def time_native(renderer: mujoco.Renderer, datas: list[mujoco.MjData], camera: str, repeats: int) -> dict:
    """Median seconds of one pass of update_scene + render over every host state in `datas` (after one untimed)."""
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        for data in datas:
            renderer.update_scene(data, camera=camera or -1)
            renderer.render()
        times.append(time.perf_counter() - started)
    return {"median_s": statistics.median(times[1:]), "times_s": times[1:]}


def host_datas(mj_model: mujoco.MjModel, data: Any) -> list[mujoco.MjData]:
    """One `MjData` per environment of the batched mjx `data`, positions copied and kinematics computed."""
    qpos = np.asarray(data.qpos)
    datas = []
    for row in qpos:
        host = mujoco.MjData(mj_model)
        host.qpos[:] = row
        mujoco.mj_forward(mj_model, host)
        datas.append(host)
    return datas


def gl_renderer() -> str:
    """The OpenGL renderer string of the current context (e.g. llvmpipe: software rasterization on the CPU)."""
    try:
        from OpenGL import GL

        return " / ".join(GL.glGetString(n).decode() for n in (GL.GL_RENDERER, GL.GL_VERSION))
    except Exception as error:  # no PyOpenGL or no current context: the figure is still valid, only unlabelled
        return f"unknown ({type(error).__name__})"


def main() -> None:
    args = parse_args()
    record = start_record("render_throughput_quick" if args.quick else "render_throughput")
    from mujoco_playground import registry

    env = registry.load(args.env, config_overrides={"impl": "jax"})
    spec = CameraSpec(args.image_size, "rgb", args.camera)
    camera = make_camera(env.mj_model, spec)
    renderer = mujoco.Renderer(env.mj_model, args.image_size, args.image_size)
    native_gl = gl_renderer()
    print(f"{args.env}, camera '{args.camera}', {args.image_size}x{args.image_size} rgb; jax on "
          f"{jax.default_backend()}, native on {native_gl}", flush=True)
    rows, results = [], []
    for count in args.num_envs:
        data = env_states(env, count, args.seed)
        ours = time_jax(jax.jit(jax.vmap(render, in_axes=(None, None, 0))), camera, env.mjx_model, data, args.repeats)
        chunked = time_jax(jax.jit(render_batch), camera, env.mjx_model, data, args.repeats)
        native = time_native(renderer, host_datas(env.mj_model, data), args.camera, args.repeats)
        result = {"num_envs": count, "jax": ours, "jax_chunked": chunked, "native": native,
                  "jax_frames_per_s": count / ours["median_s"], "jax_chunked_frames_per_s": count / chunked["median_s"],
                  "native_frames_per_s": count / native["median_s"]}
        results.append(result)
        rows.append([count, result["jax_frames_per_s"], result["jax_chunked_frames_per_s"],
                     result["native_frames_per_s"], result["jax_frames_per_s"] / result["native_frames_per_s"],
                     ours["median_s"], ours["compile_s"]])
        print(f"N={count}: jax {result['jax_frames_per_s']:.1f} frames/s, native "
              f"{result['native_frames_per_s']:.1f} frames/s", flush=True)
    renderer.close()
    print()
    print_table(rows, ["N", "jax frames/s", "jax chunked frames/s", "native frames/s", "jax/native", "jax s/call",
                       "jax compile s"])
    record |= {
        "env": args.env, "camera": args.camera, "image_size": args.image_size, "channels": "rgb",
        "repeats": args.repeats, "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "mujoco_gl": os.environ.get("MUJOCO_GL"), "native_gl": native_gl, "versions": package_versions(), "results": results,
    }
    finish_record(record, args.out)


if __name__ == "__main__":
    main()
