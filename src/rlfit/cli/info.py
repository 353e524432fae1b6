"""`rlfit envs` and `rlfit keys`: what can be trained and configured."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    envs = subparsers.add_parser("envs", help="list the environments rlfit can train")
    envs.set_defaults(handler=list_envs)
    keys = subparsers.add_parser("keys", help="list every config key with its meaning and default")
    keys.set_defaults(handler=list_keys)


def list_envs(args: argparse.Namespace) -> int:
    """Playground's names, then each family's `<prefix>:<name>` (a family whose package is missing: a note)."""
    import sys

    from rlfit.envs.loading import FAMILIES, family_names, playground_names
    from rlfit.errors import UserError

    for name in playground_names():
        print(name)
    for prefix in FAMILIES:
        try:
            names = family_names(prefix)
        except UserError as error:
            print(f"({prefix}:<name>: {error})", file=sys.stderr)
            continue
        for name in names:
            print(name)
    return 0


def list_keys(args: argparse.Namespace) -> int:
    import dataclasses

    from rlfit.config import field_docs, section_types
    from rlfit.config_values import plain

    defaults = {name: plain(dataclasses.asdict(cls())) for name, cls in section_types().items()}
    print(f"{'algo':30s} {'ppo':28s} The learning algorithm: ppo or sac (its section holds its settings).")
    for dotted, doc in field_docs().items():
        section, key = dotted.split(".")
        print(f"{dotted:30s} {defaults[section][key]!s:28s} {doc}")
    return 0
