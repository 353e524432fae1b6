"""`rlfit sim2sim RUN_DIR`: the exported policy driven by the JAX-free controller (`rlfit.deploy.controller`) in
native MuJoCo, on the nominal model and on models drawn afresh by the environment's randomizer; with `sweep`, once
per margin condition (`SWEEP`).

    run dir -> config, ONNX file + deploy.yaml (checked against each other and against the run)
        -> models (`rlfit.deploy.transfer.models`, the transfer check's keys) -> episodes (`episodes`)
        -> records per condition -> report (`rlfit.deploy.sim2sim.report`)

Every check of the input happens before anything runs or is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from rlfit.deploy.controller.margins import Margins
from rlfit.deploy.transfer.episodes import NOMINAL, RANDOMIZED, EpisodeRecord, ModelRun
from rlfit.errors import UserError

SWEEP = (Margins(), Margins(action_delay=1), Margins(action_delay=2), Margins(observation_delay=1),
         Margins(kp_scale=0.8), Margins(kp_scale=1.2), Margins(kd_scale=0.5), Margins(kd_scale=2.0),
         Margins(torque_limit_scale=0.8), Margins(gyro_bias=0.1), Margins(tilt_bias=0.05))
"""The `--sweep` grid: one departure at a time from the nominal controller."""


@dataclass(frozen=True)
class Sim2SimOptions:
    """What to run and how much."""

    run_dir: Path
    onnx: Path | None = None
    models: int = 2
    episodes_per_model: int = 2
    max_steps: int | None = None
    seed: int = 0
    sweep: bool = False
    video: Path | None = None
    """Where to write the first nominal episode's video (None: no video)."""


class ConditionRun(NamedTuple):
    """The episodes of one margin condition."""

    margins: Margins
    records: list[EpisodeRecord]


class Sim2SimRun(NamedTuple):
    """What `rlfit sim2sim` ran."""

    env_name: str
    onnx_path: Path
    bundle_path: Path
    observation_set: str
    max_steps: int
    control_dt: float
    conditions: list[ConditionRun]
    randomization: dict[str, Any]
    video: Path | None
    video_note: str


def check_bundle_matches_run(bundle: Any, config: Any, model: Any, where: Path) -> None:
    """A UserError when the bundle is for another environment, robot or observation set than the run."""
    from rlfit.deploy.bundle.build import model_name, observation_set_of

    wanted = {"environment": (bundle.env, config.env.name), "robot": (bundle.robot, model_name(model)),
              "observation set": (bundle.observation_set, observation_set_of(config.env))}
    for what, (theirs, ours) in wanted.items():
        if theirs != ours:
            raise UserError(f"{where} is a bundle for {what} '{theirs}', but the run's is '{ours}': pass the run's "
                            "own export (`rlfit export RUN_DIR`)")


class Checked(NamedTuple):
    """A run, its export and its environment, checked against each other."""

    config: Any
    onnx_path: Path
    bundle: Any
    policy: Any
    env: Any
    model: Any
    """The environment's native MjModel."""
    max_steps: int


def check_inputs(options: Sim2SimOptions) -> Checked:
    """Loads and checks everything `run_sim2sim` needs; a one-line UserError for any bad input."""
    from rlfit.deploy.bundle.schema import bundle_path
    from rlfit.deploy.controller.loop import check_model, load_deployment
    from rlfit.deploy.play.session import load_jax_env, read_run_config
    from rlfit.deploy.transfer.onnx_policy import onnx_path
    from rlfit.envs.vec_env import episode_steps
    from rlfit.hardware.jax_setup import configure_jax

    for flag, value in (("--models", options.models), ("--episodes-per-model", options.episodes_per_model),
                        ("--max-steps", options.max_steps)):
        if value is not None and value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}")
    if not Path(options.run_dir).is_dir():
        raise UserError(f"run directory {options.run_dir} does not exist; pass the folder `rlfit train` wrote")
    config = read_run_config(options.run_dir)
    path = onnx_path(options.run_dir, options.onnx)
    bundle, policy = load_deployment(path)
    configure_jax(config.run.precision)
    env, model = load_jax_env(config)
    check_bundle_matches_run(bundle, config, model, bundle_path(path))
    check_model(bundle, model)
    run_steps = episode_steps(config.env, env)
    if options.max_steps is not None and options.max_steps > run_steps:
        raise UserError(f"--max-steps {options.max_steps} is longer than the run's episodes ({run_steps} policy "
                        "steps); give at most that")
    return Checked(config, path, bundle, policy, env, model, options.max_steps or run_steps)


def run_sim2sim(options: Sim2SimOptions, say: Callable[[str], None] = print) -> Sim2SimRun:
    """Runs the episodes (see the module docstring); UserError for every bad input, before running."""
    import jax

    from rlfit.deploy.bundle.schema import bundle_path
    from rlfit.deploy.sim2sim.episodes import run_episodes
    from rlfit.deploy.sim2sim.native_env import FOLLOW, NativeEnv, NativePhysics
    from rlfit.deploy.transfer.models import EPISODES, check_key

    c = check_inputs(options)
    models, randomization = draw_models(c.config, c.env, c.model, options)
    recorder, note = video_recorder(c.model, options.video, c.bundle.ctrl_dt)
    native = NativeEnv(c.env, NativePhysics(c.model, FOLLOW))
    key = jax.random.fold_in(check_key(options.seed), EPISODES)
    conditions: list[ConditionRun] = []
    for margins in SWEEP if options.sweep else SWEEP[:1]:
        say(f"sim2sim of {c.config.env.name} ({margins.label()}): the controller and {c.onnx_path.name} in native "
            f"MuJoCo, {len(models)} models, up to {c.max_steps} steps of {c.bundle.ctrl_dt:g} s")
        records = run_episodes(native, c.bundle, c.policy, models, c.max_steps, key, margins,
                               recorder if not conditions else None)
        conditions.append(ConditionRun(margins, records))
    video = None
    if recorder is not None and options.video is not None:
        from rlfit.rundir.write_failures import stop_on_refusal

        with stop_on_refusal("free space or choose another --out, then run `rlfit sim2sim` again"):
            video = write_frames(recorder, options.video, c.bundle.ctrl_dt)
    return Sim2SimRun(c.config.env.name, c.onnx_path, bundle_path(c.onnx_path), c.bundle.observation_set,
                      c.max_steps, c.bundle.ctrl_dt, conditions, randomization, video, note)


def draw_models(config: Any, env: Any, mj_model: Any, options: Sim2SimOptions) -> tuple[list[ModelRun], dict[str, Any]]:
    """The nominal model and `options.models` randomized ones (the transfer check's draw, for the same seed)."""
    from rlfit.deploy.transfer.models import draw_check_models, native_copy, row
    from rlfit.envs.randomization import resolve_randomization

    randomization = resolve_randomization(config.env.randomization, config.env.name, env, options.models)
    models = [ModelRun(NOMINAL, -1, {}, mj_model, options.episodes_per_model)]
    if randomization.enabled and randomization.function is not None:
        batch = draw_check_models(randomization.function, env.mjx_model, options.seed, options.models)
        models += [ModelRun(RANDOMIZED, i, {}, native_copy(mj_model, row(batch, i)), options.episodes_per_model)
                   for i in range(options.models)]
    return models, randomization.to_dict()


class FrameRecorder:
    """Renders the controller's state every `stride` control steps (at most 30 frames per second)."""

    def __init__(self, renderer: Any, stride: int):
        self.renderer, self.stride, self.count = renderer, stride, 0
        self.frames: list[Any] = []

    def __call__(self, data: Any) -> None:
        if self.count % self.stride == 0:
            self.frames.append(self.renderer.render(data.qpos.copy(), data.mocap_pos.copy(), data.mocap_quat.copy()))
        self.count += 1


def video_recorder(model: Any, out: Path | None, control_dt: float) -> tuple[FrameRecorder | None, str]:
    """(recorder, note): a recorder of the controller's states, or None and why there is no video."""
    if out is None:
        return None, "no video asked for"
    from rlfit.deploy.play.gl import activate, choose_backend
    from rlfit.deploy.play.video import FrameRenderer, check_video_path, frame_stride

    check_video_path(out)
    try:
        activate(choose_backend())
        renderer = FrameRenderer(model)
    except UserError as error:
        return None, f"no video: {error}"
    return FrameRecorder(renderer, frame_stride(control_dt)), ""


def write_frames(recorder: FrameRecorder, out: Path, control_dt: float) -> Path | None:
    from rlfit.deploy.play.video import frame_stride, write_video

    recorder.renderer.close()
    if not recorder.frames:
        return None
    write_video(out, recorder.frames, 1.0 / (control_dt * frame_stride(control_dt)))
    return out
