"""`rlfit envs` and `rlfit keys`: what can be trained and configured."""

from __future__ import annotations

import argparse


def register(subparsers) -> None:
    envs = subparsers.add_parser("envs", help="list the environments rlfit can train")
    envs.set_defaults(handler=list_envs)
    keys = subparsers.add_parser("keys", help="list every config key with its meaning and default")
    keys.add_argument("--markdown", action="store_true",
                      help="print the list as a Markdown table (the documentation's configuration page is this table)")
    keys.set_defaults(handler=list_keys)


def list_envs(args: argparse.Namespace) -> int:
    """Playground's names, then each family's `<prefix>:<name>` (a family whose package is missing: a note)."""
    import sys

    from rlfit.envs.loading import FAMILIES, family_names
    from rlfit.envs.names import playground_names
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
    """Every config key, its default and its meaning, from the config dataclasses' own docstrings."""
    from rlfit.config.docs import markdown_table, plain_table

    print(markdown_table() if args.markdown else plain_table(), end="")
    return 0
