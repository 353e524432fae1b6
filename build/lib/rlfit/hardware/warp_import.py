"""MJX without NVIDIA Warp where Warp cannot run: a CPU-only JAX.

`mujoco.mjx` imports NVIDIA Warp and MuJoCo Warp when it is first imported, whatever the device: about 2.7 s of a
4.5 s `import mujoco_playground` on a quiet 2-core CPU (`python -X importtime`), and more than the rest of a warm
start. MJX's Warp implementation (`env.impl=warp`) needs a CUDA GPU, so where JAX has no CUDA plugin installed, or
`JAX_PLATFORMS` names only `cpu`, Warp can never run, and rlfit lets MJX find it missing: MJX then sets
`WARP_INSTALLED = False` and runs its JAX implementation, as it does on any machine without Warp. MJX's two
"Failed to import ..." lines that say so are not printed; every other line is.

Only MJX's own first import is concerned: once `mujoco.mjx.warp` is loaded, `import warp` works again for anyone
else. `RLFIT_MJX_WARP=1` keeps MJX's import as it is (Warp loaded on a CPU too).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import io
import os
import pkgutil
import sys
from typing import Any

MJX_WARP = "mujoco.mjx.warp"
"""The module of MJX that imports Warp."""

BLOCKED = ("warp", "mujoco.mjx.third_party.mujoco_warp")
"""The modules MJX is left to find missing."""

MJX_NOTES = ("Failed to import warp:", "Failed to import mujoco_warp:")
"""The starts of the lines MJX prints when it finds them missing."""


def cuda_possible() -> bool:
    """Whether JAX could run on a CUDA GPU here: a CUDA plugin is installed and `JAX_PLATFORMS` (when set)
    names a platform besides the CPU. Neither imports JAX nor starts a backend."""
    platforms = {p.strip().lower() for p in os.environ.get("JAX_PLATFORMS", "").split(",") if p.strip()}
    if platforms and platforms <= {"cpu"}:
        return False
    if any(importlib.util.find_spec(name) is not None for name in ("jax_cuda12_plugin", "jax_cuda13_plugin")):
        return True
    try:
        import jax_plugins
    except ImportError:
        return False
    return any(module.name.startswith("xla_cuda") for module in pkgutil.iter_modules(jax_plugins.__path__))


def warp_wanted() -> bool:
    """Whether MJX's first import should load Warp: `RLFIT_MJX_WARP=1`, or a CUDA GPU possible."""
    return os.environ.get("RLFIT_MJX_WARP", "").strip().lower() in ("1", "on", "true", "yes") or cuda_possible()


class _MjxWithoutWarp(importlib.abc.MetaPathFinder):
    """Finds `mujoco.mjx.warp` as usual, and runs it with Warp's modules missing (once, when Warp is not wanted)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != MJX_WARP:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or warp_wanted():
            return spec
        spec.loader = _LoaderWithoutWarp(spec.loader)
        return spec


class _LoaderWithoutWarp(importlib.abc.Loader):
    """`loader`, with Warp's modules missing while it executes the module and MJX's notes about it not printed."""

    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def __getattr__(self, name: str) -> Any:  # the rest of the loader's interface (get_source, is_package, ...)
        return getattr(self.loader, name)

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        present = {name: sys.modules[name] for name in BLOCKED if name in sys.modules}
        printed = io.StringIO()
        try:
            for name in BLOCKED:
                sys.modules[name] = None  # type: ignore[assignment]  # `import name` raises ImportError
            with contextlib.redirect_stdout(printed):
                self.loader.exec_module(module)
        finally:
            for name in BLOCKED:
                if sys.modules.get(name, ...) is None:
                    del sys.modules[name]
            sys.modules.update(present)
            kept = [line for line in printed.getvalue().splitlines(keepends=True) if not line.startswith(MJX_NOTES)]
            sys.stdout.write("".join(kept))


def install() -> None:
    """Has MJX's first import in this process skip Warp where it cannot run (see the module's docstring); nothing
    when MJX is already imported or the finder is installed."""
    if MJX_WARP in sys.modules or any(isinstance(finder, _MjxWithoutWarp) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _MjxWithoutWarp())
