"""Frames of a native MuJoCo model and the video file they go into.

Camera: a camera named `track` where the model has one (Playground's robots), else a camera that follows the
floating base, else the model's first camera, else MuJoCo's default free camera.
"""

from __future__ import annotations

import errno
import os
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlfit.rundir.atomic import write_synced
from rlfit.errors import UserError
from rlfit.rundir.write_failures import WriteFailed, refusal

VIDEO_SUFFIXES = (".mp4", ".gif")
MAX_FPS = 30.0
MAX_SHADOW_SIZE = 2048
"""Shadow map texels: Playground's 8192 makes software (llvmpipe) rendering ~2x slower for no visible gain."""


class FrameRenderer:
    """Renders a model's state (qpos, mocap) to RGB frames [height, width, 3] uint8."""

    def __init__(self, model: Any, width: int = 640, height: int = 480):
        import mujoco

        self.model = model
        self.data = mujoco.MjData(model)
        width = min(width, model.vis.global_.offwidth)
        model.vis.quality.shadowsize = min(int(model.vis.quality.shadowsize), MAX_SHADOW_SIZE)  # visual only
        height = min(height, model.vis.global_.offheight)
        try:
            self.renderer = mujoco.Renderer(model, height=height, width=width)
        except Exception as error:  # noqa: BLE001 - any GL failure is an environment problem, not a bug
            from rlfit.deploy.play.gl import INSTALL_HINT

            raise UserError(f"cannot create an OpenGL context to render ({type(error).__name__}: {error}); "
                            f"{INSTALL_HINT}") from None
        self.camera = choose_camera(model)

    def render(self, qpos: np.ndarray, mocap_pos: np.ndarray | None = None,
               mocap_quat: np.ndarray | None = None) -> np.ndarray:
        """One frame of the model at `qpos` [nq] (and mocap bodies at `mocap_pos` [nmocap, 3], quat [nmocap, 4])."""
        import mujoco

        self.data.qpos[:] = qpos
        if self.model.nmocap and mocap_pos is not None:
            self.data.mocap_pos[:], self.data.mocap_quat[:] = mocap_pos, mocap_quat
        mujoco.mj_forward(self.model, self.data)
        self.renderer.update_scene(self.data, camera=self.camera)
        return self.renderer.render().copy()

    def close(self) -> None:
        self.renderer.close()


def choose_camera(model: Any) -> Any:
    """A camera id/name or an MjvCamera that keeps the robot in view (see module docstring)."""
    import mujoco

    names = [model.camera(i).name for i in range(model.ncam)]
    if "track" in names:
        return "track"
    free_joints = [j for j in range(model.njnt) if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    if free_joints:
        camera = mujoco.MjvCamera()
        mujoco.mjv_defaultFreeCamera(model, camera)
        camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        camera.trackbodyid = int(model.jnt_bodyid[free_joints[0]])
        camera.distance = max(2.0, 1.5 * float(model.stat.extent))
        camera.elevation = -15.0
        return camera
    return 0 if model.ncam else -1


def frame_stride(control_dt: float) -> int:
    """Render every k-th control step so that the video has at most 30 frames per second."""
    return max(1, int(np.ceil(1.0 / (control_dt * MAX_FPS) - 1e-9)))


def check_video_path(path: Path) -> None:
    """A UserError unless `path` ends in .mp4 or .gif and its folder exists and takes a new file (WriteFailed,
    exit code 4, when the disk refuses it: full, over quota, read-only)."""
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise UserError(f"--out must end in {' or '.join(VIDEO_SUFFIXES)}, got '{path.name}'")
    if not path.parent.is_dir():
        raise UserError(f"the folder of --out, {path.parent}, does not exist; create it first")
    check_folder_takes_files(path.parent)
    if path.suffix.lower() == ".mp4":
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            raise UserError("writing .mp4 needs imageio-ffmpeg: pip install 'rlfit[video]' "
                            "(or write a .gif with --out FILE.gif)") from None
    try:
        import imageio  # noqa: F401
    except ImportError:
        raise UserError("writing videos needs imageio: pip install 'rlfit[video]'") from None


def check_folder_takes_files(folder: Path) -> None:
    """Creates and removes an empty file in `folder`: a folder that exists but cannot hold the video (/proc, no
    permission) is a UserError before anything renders, and a disk that refuses writes is WriteFailed."""
    try:
        handle, name = tempfile.mkstemp(prefix=".rlfit-play-", dir=folder)
    except OSError as error:
        what = f"cannot write in the folder of --out, {folder}: {error.strerror or error}"
        if refusal(error) is not None:
            raise WriteFailed(what, "free space or choose another --out") from None
        raise UserError(f"{what}; choose another --out") from None
    os.close(handle)
    os.unlink(name)


def write_video(path: Path, frames: Sequence[np.ndarray], fps: float) -> None:
    """Writes `frames` ([H, W, 3] uint8 each) to `path` (.mp4 with ffmpeg, .gif with Pillow), atomically.

    Raises OSError naming `path` when the disk refuses the video (full, over quota, read-only); nothing is left
    behind then, and a video already at `path` is kept."""
    suffix = path.suffix.lower()
    handle, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=suffix, dir=path.parent)
    os.close(handle)
    tmp = Path(tmp_name)
    tmp.chmod(0o644)  # mkstemp makes it private; a video is as readable as the run directory
    try:
        if suffix == ".gif":
            _write_gif(tmp, frames, fps)
        else:
            _write_mp4(tmp, frames, fps)
        tmp.replace(path)
    except OSError as error:
        raise OSError(error.errno, error.strerror or str(error), str(path)) from None
    finally:
        tmp.unlink(missing_ok=True)


def _write_gif(path: Path, frames: Sequence[np.ndarray], fps: float) -> None:
    """Encodes the GIF in memory, then writes it: a refused write is one OSError, with no encoder object left
    behind to try the write again when it is collected."""
    import imageio.v3 as iio

    write_synced(path, iio.imwrite("<bytes>", np.stack(frames), extension=".gif", duration=1000.0 / fps, loop=0))


def _write_mp4(path: Path, frames: Sequence[np.ndarray], fps: float) -> None:
    """ffmpeg writes the MP4 (quietly); imageio does not report ffmpeg failing, so the file is read back, and an
    unreadable one is the disk's refusal when a small write there is refused too."""
    import imageio.v3 as iio

    with warnings.catch_warnings():  # ffmpeg is started by fork + exec at once: JAX's warning does not apply
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        iio.imwrite(path, np.stack(frames), plugin="FFMPEG", fps=fps, codec="libx264", quality=7,
                    macro_block_size=8, ffmpeg_log_level="quiet")
        if _readable_video(path):
            return
    probe = path.with_name(f"{path.name}.probe")
    try:
        write_synced(probe, bytes(PROBE_BYTES))
    finally:
        probe.unlink(missing_ok=True)
    raise OSError(errno.EIO, "ffmpeg could not write a complete video")


PROBE_BYTES = 1 << 20
"""What `_write_mp4` writes beside a video ffmpeg could not finish, to learn whether the disk refuses writes."""


def _readable_video(path: Path) -> bool:
    """True when ffmpeg reads at least one frame back from `path`."""
    import imageio_ffmpeg

    try:
        return imageio_ffmpeg.count_frames_and_secs(str(path))[0] > 0
    except Exception:  # noqa: BLE001 - any failure to read it back means the video is incomplete
        return False
