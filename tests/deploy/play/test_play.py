"""`rlfit play`: native MuJoCo physics under the environment's own step, video output, one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rlfit.errors import UserError
from tests.conftest import cli_environment, cli_in_process
from tests.deploy.play.support import headless_gl_reason, make_policy_run

CARTPOLE = "CartpoleBalance"


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory) -> Path:
    return make_policy_run(tmp_path_factory.mktemp("play") / "run", CARTPOLE)


@pytest.fixture(scope="module")
def cartpole_env():
    from rlfit.config.schema import EnvConfig
    from rlfit.envs import load_env

    return load_env(EnvConfig(name=CARTPOLE, impl="jax"), "cpu")


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rlfit", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env=cli_environment())


def test_physics_is_native_mujoco_and_observations_are_the_environments(cartpole_env):
    import mujoco

    from rlfit.deploy.play.native import NativeSimulator, native_physics_step, physics_replaced

    env = cartpole_env
    state = jax.jit(env.reset)(jax.random.PRNGKey(3))
    action = jnp.array([0.7])
    simulator = NativeSimulator(env.mj_model)
    with physics_replaced(native_physics_step(simulator)):
        native_state = jax.jit(lambda s, a: env.step(s, a))(state, action)
    assert simulator.calls == 1
    reference = mujoco.MjData(env.mj_model)  # independent: the C simulator driven directly
    reference.qpos[:], reference.qvel[:], reference.ctrl[:] = state.data.qpos, state.data.qvel, action
    for _ in range(env.n_substeps):
        mujoco.mj_step(env.mj_model, reference)
    np.testing.assert_allclose(native_state.data.qpos, reference.qpos, atol=1e-6)
    np.testing.assert_allclose(native_state.data.qvel, reference.qvel, atol=1e-5)
    mjx_state = jax.jit(lambda s, a: env.step(s, a))(state, action)  # the same step with MJX physics
    np.testing.assert_allclose(native_state.obs, mjx_state.obs, atol=1e-3)
    np.testing.assert_allclose(native_state.reward, mjx_state.reward, atol=1e-3)


def test_an_environment_without_a_mujoco_model_is_refused():
    from rlfit.deploy.play.native import native_model
    from tests.toy_env import make

    with pytest.raises(UserError, match="no MuJoCo model"):
        native_model(make(), "tests.toy_env:make")


def test_play_writes_a_gif_whose_frames_change(cartpole_run, tmp_path):
    reason = headless_gl_reason()
    if reason:
        pytest.skip(reason)
    import imageio.v3 as iio

    out = tmp_path / "cartpole.gif"
    result = run_cli("play", str(cartpole_run), "--seconds", "0.6", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "native MuJoCo" in result.stdout and ("EGL" in result.stdout or "OSMesa" in result.stdout)
    frames = iio.imread(out, index=None)
    assert frames.shape[0] == 15 and frames.shape[-1] == 3  # 0.6 s at dt 0.01, every 4th step: 25 fps
    assert frames_change(frames)


def frames_change(frames: np.ndarray) -> bool:
    """Some frame differs from the first by more than half a grey level on average (the scene moves)."""
    return max(np.abs(frames[i].astype(int) - frames[0]).mean() for i in range(1, len(frames))) > 0.5


def one_line_error(capsys, *argv: str) -> str:
    from rlfit.cli import main

    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and err.startswith("rlfit: error: "), err
    return err


def test_missing_run_dir_is_one_line(capsys, tmp_path):
    assert "does not exist" in one_line_error(capsys, "play", str(tmp_path / "nowhere"))


def test_unknown_video_format_is_one_line_and_writes_nothing(capsys, cartpole_run, tmp_path):
    err = one_line_error(capsys, "play", str(cartpole_run), "--out", str(tmp_path / "video.avi"))
    assert ".mp4 or .gif" in err and not (tmp_path / "video.avi").exists()


def test_missing_checkpoint_is_one_line(capsys, cartpole_run):
    assert "no checkpoint '7'" in one_line_error(capsys, "play", str(cartpole_run), "--checkpoint", "7")


def test_bad_command_is_one_line(capsys, cartpole_run):
    assert "VX,VY,WZ" in one_line_error(capsys, "play", str(cartpole_run), "--command", "fast")


def test_viewer_without_a_display_is_one_line(capsys, cartpole_run, monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    if not sys.platform.startswith("linux"):
        pytest.skip("the display check is for Linux desktops")
    assert "--viewer needs a desktop" in one_line_error(capsys, "play", str(cartpole_run), "--viewer")


def test_command_is_held_where_the_environment_samples_one():
    from rlfit.deploy.play.commands import hold_command, parse_command

    class Joystick:
        def sample_command(self, rng):
            return jax.random.uniform(rng, (3,))

    env = Joystick()
    hold_command(env, "Joystick", parse_command("0.5, 0, -0.25"))
    np.testing.assert_array_equal(env.sample_command(jax.random.PRNGKey(0)), [0.5, 0.0, -0.25])


def test_command_for_an_environment_without_one_is_refused(cartpole_env):
    from rlfit.deploy.play.commands import hold_command

    with pytest.raises(UserError, match="takes no velocity command"):
        hold_command(cartpole_env, CARTPOLE, (0.5, 0.0, 0.0))


def test_frame_stride_keeps_videos_at_most_30_fps():
    from rlfit.deploy.play.video import frame_stride

    assert [frame_stride(dt) for dt in (0.04, 0.02, 0.01, 0.004, 1 / 30)] == [1, 2, 4, 9, 1]


def test_an_out_folder_that_takes_no_files_is_one_line_before_anything_renders(capsys, cartpole_run, monkeypatch):
    def renders(*args):
        raise AssertionError("play rendered before checking --out")

    monkeypatch.setattr("rlfit.deploy.play.gl.choose_backend", renders)
    err = one_line_error(capsys, "play", str(cartpole_run), "--out", "/proc/x.gif")
    assert "cannot write in the folder of --out, /proc" in err and "choose another --out" in err
    assert not Path("/proc/x.gif").exists()


def test_an_out_folder_on_a_read_only_disk_is_exit_4_before_anything_renders(capsys, cartpole_run, tmp_path,
                                                                             monkeypatch):
    import errno
    import os

    import rlfit.deploy.play.video as video
    from rlfit.cli import main

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(tmp_path / ".rlfit-play-x"))

    monkeypatch.setattr(video.tempfile, "mkstemp", read_only)
    monkeypatch.setattr("rlfit.deploy.play.gl.choose_backend", lambda: pytest.fail("play rendered before checking --out"))
    code = main(["play", str(cartpole_run), "--out", str(tmp_path / "x.gif")])
    err = capsys.readouterr().err
    assert code == 4 and err.count("\n") == 1, err
    assert f"cannot write in the folder of --out, {tmp_path}: Read-only file system" in err
    assert list(tmp_path.iterdir()) == []


def test_a_video_the_disk_refuses_is_exit_4_and_leaves_nothing(capfd, cartpole_run, tmp_path, monkeypatch):
    reason = headless_gl_reason()
    if reason:
        pytest.skip(reason)
    import rlfit.deploy.play.video as video
    from tests.full_disk import disk_full

    def full(path, data):
        raise disk_full(path)

    monkeypatch.setattr(video, "write_synced", full)
    out = tmp_path / "cartpole.gif"
    result = cli_in_process(capfd, "play", str(cartpole_run), "--seconds", "0.2", "--out", str(out), cwd=tmp_path)
    assert result.returncode == 4
    lines = result.stderr.strip().splitlines()
    assert lines == [f"rlfit: error: cannot write {out}: No space left on device; free space or choose another --out, "
                     "then run `rlfit play` again"], result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("suffix", [".mp4", ".gif"])
def test_write_video_on_a_real_full_disk_is_one_os_error_and_leaves_nothing(capfd, suffix):
    import errno
    import gc

    from rlfit.deploy.play.video import write_video
    from tests.full_disk import small_tmpfs

    frames = list(np.random.default_rng(0).integers(0, 256, (20, 240, 320, 3), dtype=np.uint8))
    with small_tmpfs("24k") as disk:
        with pytest.raises(OSError) as caught:
            write_video(disk / f"video{suffix}", frames, 25.0)
        gc.collect()  # an encoder left behind would try the write again here
        assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(disk / f"video{suffix}")
        assert list(disk.iterdir()) == []
    assert capfd.readouterr().err == ""  # not ffmpeg's lines, nor an error ignored in a destructor
