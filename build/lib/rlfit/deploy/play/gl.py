"""Headless OpenGL for rendering videos: EGL or OSMesa, picked automatically through `MUJOCO_GL`.

MuJoCo chooses its OpenGL backend once, from `MUJOCO_GL`, when `mujoco` is first imported. `choose_backend`
keeps a `MUJOCO_GL` the user set; otherwise it tries each headless backend in a short subprocess (so that a
backend that fails cannot leave this process in a bad state) and `activate` sets the first that renders.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import NamedTuple

from rlfit.errors import UserError

HEADLESS_BACKENDS = ("egl", "osmesa")
LABELS = {"egl": "EGL", "osmesa": "OSMesa", "glfw": "GLFW", "glx": "GLX", "cgl": "CGL", "wgl": "WGL"}
PROBE = ("import mujoco\n"
         "r = mujoco.Renderer(mujoco.MjModel.from_xml_string('<mujoco/>'), 16, 16)\n"
         "r.render()\n")
INSTALL_HINT = ("install Debian's libegl1 libegl-mesa0 libgl1-mesa-dri (EGL) or libosmesa6 (OSMesa), e.g. with "
                "`make install` as root, or set MUJOCO_GL to a backend that works here")


class GLBackend(NamedTuple):
    """The OpenGL backend MuJoCo renders with."""

    name: str
    """The MUJOCO_GL value: egl, osmesa, glfw, ..."""
    source: str
    """'MUJOCO_GL' when the user set it, 'probe' when rlfit picked it."""

    @property
    def label(self) -> str:
        """A human name, e.g. 'EGL (picked automatically)'."""
        how = "from MUJOCO_GL" if self.source == "MUJOCO_GL" else "picked automatically"
        return f"{LABELS.get(self.name, self.name)} ({how})"


def choose_backend(environ: Mapping[str, str] | None = None) -> GLBackend:
    """The user's MUJOCO_GL, else the first headless backend that renders here; UserError when none does."""
    environ = os.environ if environ is None else environ
    requested = environ.get("MUJOCO_GL", "").strip().lower()
    if requested:
        return GLBackend(requested, "MUJOCO_GL")
    for name in HEADLESS_BACKENDS:
        if backend_works(name):
            return GLBackend(name, "probe")
    tried = ", ".join(LABELS[name] for name in HEADLESS_BACKENDS)
    raise UserError(f"no headless OpenGL found for rendering (tried {tried}); "
                    f"{INSTALL_HINT}")


def backend_works(name: str, timeout_s: float = 60.0) -> bool:
    """True when a fresh Python with MUJOCO_GL=`name` can create a MuJoCo renderer and render one frame."""
    env = {**os.environ, "MUJOCO_GL": name, "PYOPENGL_PLATFORM": name}
    try:
        # close_fds=False lets Python use posix_spawn: no fork of this (possibly multithreaded, JAX) process.
        result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, timeout=timeout_s,
                                close_fds=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def activate(backend: GLBackend) -> None:
    """Makes MuJoCo render with `backend` in this process (also when `mujoco` was imported already)."""
    os.environ["MUJOCO_GL"] = backend.name
    if backend.name in HEADLESS_BACKENDS:
        os.environ.setdefault("PYOPENGL_PLATFORM", backend.name)
    if "mujoco" not in sys.modules:
        return
    from mujoco.rendering.classic import gl_context

    if getattr(gl_context, "_MUJOCO_GL", None) == backend.name or backend.name not in HEADLESS_BACKENDS:
        return
    try:
        gl_context.GLContext = importlib.import_module(f"mujoco.{backend.name}").GLContext
    except (ImportError, AttributeError, OSError) as error:
        raise UserError(f"cannot switch MuJoCo to {LABELS[backend.name]} after it was imported ({error}); "
                        f"set MUJOCO_GL={backend.name} before starting Python") from None
