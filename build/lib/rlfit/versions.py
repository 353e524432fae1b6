"""Versions of rlfit and the libraries that shape its results."""

from __future__ import annotations

from importlib import metadata

__version__ = "0.1.0"

PACKAGES = ("rlfit", "jax", "jaxlib", "mujoco", "mujoco-mjx", "playground", "optax", "flax", "orbax-checkpoint")


def package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
