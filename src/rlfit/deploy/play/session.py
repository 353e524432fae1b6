"""`rlfit play`: run a saved policy in native MuJoCo and write a video (or show MuJoCo's viewer).

    run dir -> config + policy -> environment (MJX for observations, native MuJoCo for physics)
        -> control loop: action = policy(obs); state = env.step(state, action)  -> frames -> video

Episodes that end (termination or the run's `env.episode_length`) restart with a fresh reset, as in training.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from rlfit.errors import UserError


@dataclass(frozen=True)
class PlayOptions:
    """What to play and where to show it."""

    run_dir: Path
    checkpoint: str | None = None
    """A step of RUN_DIR/checkpoints (default: RUN_DIR/policy, the newest save)."""
    out: Path | None = None
    """.mp4 or .gif (default: RUN_DIR/play.mp4, or play-<step>.mp4 for a checkpoint)."""
    seconds: float = 10.0
    """Simulated time to play."""
    command: tuple[float, float, float] | None = None
    """A fixed joystick command (VX m/s, VY m/s, WZ rad/s) for environments that take one."""
    viewer: bool = False
    """Show MuJoCo's interactive viewer instead of writing a video."""
    seed: int = 0
    width: int = 640
    height: int = 480


class PlayResult(NamedTuple):
    """What a play session did."""

    out: Path | None
    """The video written (None with the viewer)."""
    gl_backend: str | None
    """How it rendered, e.g. 'EGL (picked automatically)'."""
    frames: int
    control_steps: int
    simulated_s: float
    episode_returns: list[float]
    """Return of each episode, the last one possibly unfinished."""
    fps: float


def play(options: PlayOptions, say: Callable[[str], None] = print) -> PlayResult:
    """Plays the run's policy in native MuJoCo; returns what it did (see PlayResult)."""
    from rlfit.hardware.jax_setup import configure_jax
    from rlfit.deploy.play.gl import activate, choose_backend
    from rlfit.envs.vec_env import episode_steps as episode_steps_of
    from rlfit.deploy.policy_file import load_policy, policy_location

    if not math.isfinite(options.seconds) or options.seconds <= 0:
        raise UserError(f"--seconds must be a positive number, got {options.seconds}")
    source = policy_location(options.run_dir, options.checkpoint)
    out = None if options.viewer else video_path(options)
    if options.viewer:
        require_display()
        backend = None
    else:
        backend = choose_backend()
        activate(backend)
    config = read_run_config(options.run_dir)
    configure_jax(config.run.precision)  # the persistent compile cache makes a second play start faster
    policy = load_policy(source)
    if policy.description.get("env_name") not in (None, config.env.name):
        raise UserError(f"the policy in {source} was trained on {policy.description['env_name']}, but the run's "
                        f"config names {config.env.name}")
    env = load_play_env(config, options.command, policy.observation_shapes)
    say(f"playing {config.env.name} in native MuJoCo for {options.seconds:g} s"
        + (f", rendering with {backend.label}" if backend else ", in MuJoCo's viewer"))
    control_dt = float(getattr(env, "dt", 0.0) or 0.0) * config.env.action_repeat
    if control_dt <= 0:
        raise UserError(f"{config.env.name} has no control time step (`dt`); rlfit cannot play it in real time")
    episode_steps = episode_steps_of(config.env, env)
    show = viewer_display(env.mj_model, control_dt) if options.viewer else None
    result = run_episodes(env, policy, config.env.name, options, control_dt, episode_steps, show)
    frames, returns, steps = result
    if out is not None:
        from rlfit.deploy.play.video import frame_stride, write_video
        from rlfit.rundir.write_failures import stop_on_refusal

        fps = 1.0 / (control_dt * frame_stride(control_dt))
        with stop_on_refusal("free space or choose another --out, then run `rlfit play` again"):
            write_video(out, frames, fps)
    else:
        fps = 1.0 / control_dt
    summary = PlayResult(out, backend.label if backend else None, len(frames), steps, steps * control_dt,
                         returns, fps)
    say(describe_result(summary, config.env.name))
    return summary


def read_run_config(run_dir: Path) -> Any:
    """The resolved config the run saved (config.yaml)."""
    from rlfit.config.schema import from_layers, read_yaml

    path = Path(run_dir) / "config.yaml"
    if not path.is_file():
        raise UserError(f"{run_dir} has no config.yaml; pass a run directory written by `rlfit train`")
    return from_layers([read_yaml(path)])


def video_path(options: PlayOptions) -> Path:
    """--out, or RUN_DIR/play[-<step>].mp4; checked before anything expensive runs."""
    from rlfit.deploy.play.video import check_video_path

    if options.out is not None:
        path = Path(options.out)
    else:
        suffix = f"-{int(options.checkpoint)}" if options.checkpoint and options.checkpoint.isdigit() else ""
        path = Path(options.run_dir) / f"play{suffix}.mp4"
    check_video_path(path)
    return path


def require_display() -> None:
    """A UserError when there is no desktop to open a window on."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise UserError("--viewer needs a desktop and there is no display here (DISPLAY is unset); "
                        "write a video instead with --out FILE.mp4")


def load_jax_env(config: Any) -> tuple[Any, Any]:
    """(the run's environment on MJX's jax implementation, which computes observations; its native MuJoCo model,
    which native MuJoCo integrates); a UserError for an environment without one."""
    from rlfit.deploy.play.native import native_model
    from rlfit.envs import load_env

    env = load_env(dataclasses.replace(config.env, impl="jax"), "cpu")
    return env, native_model(env, config.env.name)


def load_native_env(config: Any) -> tuple[Any, Any, Any]:
    """`load_jax_env`'s environment and native model, and an observation of one environment, whose shapes a process
    before kept in the program store where it could."""
    from rlfit.envs.loading import observation_store_key
    from rlfit.envs.vec_env import observation_example

    env, mj_model = load_jax_env(config)
    key = observation_store_key(dataclasses.replace(config.env, impl="jax"), env, "cpu")
    return env, mj_model, observation_example(env, key)


def load_play_env(config: Any, command: tuple[float, float, float] | None,
                  policy_shapes: dict[str, tuple[int, ...]]) -> Any:
    """The run's environment (MJX on the jax implementation, for observations), checked against the policy."""
    from rlfit.deploy.play.commands import hold_command
    from rlfit.deploy.policy_file import observation_shapes_of

    env, _, obs = load_native_env(config)
    shapes = observation_shapes_of(obs)
    if shapes != policy_shapes:
        raise UserError(f"the policy expects observations {policy_shapes} but {config.env.name} gives {shapes}; "
                        "was the run's config.yaml edited?")
    if command is not None:
        hold_command(env, config.env.name, command)
    return env


def run_episodes(env: Any, policy: Any, env_name: str, options: PlayOptions, control_dt: float, episode_steps: int,
                 show: Callable[[Any], bool] | None) -> tuple[list[np.ndarray], list[float], int]:
    """The control loop; returns (frames, episode returns, control steps). `show(state)` False stops early."""
    import jax

    from rlfit.deploy.play.native import NativeSimulator, check_physics_replaced, native_physics_step, physics_replaced
    from rlfit.deploy.play.video import FrameRenderer, frame_stride

    simulator = NativeSimulator(env.mj_model)
    renderer = None if show else FrameRenderer(env.mj_model, options.width, options.height)
    stride = frame_stride(control_dt)
    total_steps = max(1, math.ceil(options.seconds / control_dt - 1e-9))
    repeat = max(1, int(round(control_dt / env.dt)))
    key = jax.random.PRNGKey(options.seed)
    frames: list[np.ndarray] = []
    returns = [0.0]
    with physics_replaced(native_physics_step(simulator)):
        # Fresh functions, traced inside this block (never a cached trace with MJX physics), with one set of
        # types for reset's and step's states so that step compiles once.
        reset = jax.jit(lambda rng: strong_types(env.reset(rng)))
        # With camera frames: physics for each repeat, one new frame per control step (as in training)
        step = jax.jit(lambda state, action: strong_types(getattr(env, "advance", env.step)(state, action)))
        observe = jax.jit(lambda state: strong_types(env.observe(state))) if hasattr(env, "observe") else None
        key, reset_key = jax.random.split(key)
        state, in_episode = reset(reset_key), 0
        simulator.calls = 0
        for index in range(total_steps):
            action = policy(state.obs)
            for _ in range(repeat):
                state = step(state, action)
                returns[-1] += float(state.reward)
                if float(state.done) > 0:
                    break
            if observe is not None:
                state = observe(state)
            check_physics_replaced(simulator, env_name)
            if renderer is not None and index % stride == 0:
                frames.append(beside_agent_view(renderer.render(*state_arrays(state)), state.obs))
            if show is not None and not show(state):
                return frames, returns, index + 1
            in_episode += 1
            if (float(state.done) > 0 or in_episode >= episode_steps) and index + 1 < total_steps:
                key, reset_key = jax.random.split(key)
                state, in_episode = reset(reset_key), 0
                returns.append(0.0)
    if renderer is not None:
        renderer.close()
    return frames, returns, total_steps


def beside_agent_view(scene: np.ndarray, obs: Any) -> np.ndarray:
    """The scene frame [h, w, 3] with, where the policy sees camera frames, its newest frame to the right
    (scaled up to the scene's height by repeating pixels; gray and depth shown as gray, rgbd as its rgb)."""
    from rlfit.envs.pixels import PIXELS_KEY

    if not isinstance(obs, dict) or PIXELS_KEY not in obs:
        return scene
    frame = np.asarray(obs[PIXELS_KEY])[-1]
    frame = frame[..., :3] if frame.shape[-1] >= 3 else np.repeat(frame[..., :1], 3, axis=-1)
    scale = max(1, scene.shape[0] // frame.shape[0])
    view = np.repeat(np.repeat(frame, scale, axis=0), scale, axis=1)
    panel = np.zeros((scene.shape[0], view.shape[1], 3), np.uint8)
    top = (scene.shape[0] - view.shape[0]) // 2
    panel[top:top + view.shape[0]] = view[:scene.shape[0]]
    return np.concatenate([scene, panel], axis=1)


def strong_types(tree: Any) -> Any:
    """The same arrays without JAX's weak types (a reset's Python scalars would otherwise recompile the step)."""
    import jax
    import jax.numpy as jnp

    return jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.result_type(x)), tree)


def state_arrays(state: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(qpos [nq], mocap_pos [nmocap, 3], mocap_quat [nmocap, 4]) of an environment state, on the host."""
    data = state.data
    return (np.asarray(data.qpos), np.asarray(data.mocap_pos).reshape(-1, 3),
            np.asarray(data.mocap_quat).reshape(-1, 4))


def viewer_display(model: Any, control_dt: float) -> Callable[[Any], bool]:
    """A `show(state)` that draws each state in MuJoCo's passive viewer at real time; False once it is closed."""
    import mujoco
    import mujoco.viewer

    data = mujoco.MjData(model)
    viewer = mujoco.viewer.launch_passive(model, data)
    next_time = [time.perf_counter()]

    def show(state: Any) -> bool:
        if not viewer.is_running():
            return False
        qpos, mocap_pos, mocap_quat = state_arrays(state)
        data.qpos[:] = qpos
        if model.nmocap:
            data.mocap_pos[:], data.mocap_quat[:] = mocap_pos, mocap_quat
        mujoco.mj_forward(model, data)
        viewer.sync()
        next_time[0] += control_dt
        time.sleep(max(0.0, next_time[0] - time.perf_counter()))
        return True

    return show


def describe_result(result: PlayResult, env_name: str) -> str:
    """One line: what was played, the episode returns, where the video is."""
    returns = ", ".join(f"{value:.2f}" for value in result.episode_returns)
    where = f"; wrote {result.out} ({result.frames} frames at {result.fps:.0f} fps)" if result.out else ""
    return (f"played {result.simulated_s:.2f} s of {env_name} in native MuJoCo ({result.control_steps} control "
            f"steps; episode returns: {returns}){where}")
