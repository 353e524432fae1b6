"""Playground's environment names: the registry's list and the check that a name is in it (with the closest
name in the message)."""

from __future__ import annotations

from rlfit.errors import UserError, did_you_mean


def playground_names() -> tuple[str, ...]:
    """Every environment name in Playground's registry."""
    from mujoco_playground import registry

    return tuple(registry.ALL_ENVS)


def check_playground_name(name: str) -> None:
    """UserError (with the closest name) when `name` is not in Playground's registry."""
    names = playground_names()
    if name not in names:
        raise UserError(f"unknown environment '{name}'{did_you_mean(name, names)}; "
                        "`rlfit envs` lists them, or pass module:factory for your own")
