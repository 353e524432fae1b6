"""`rlfit envs` and `rlfit keys`: what can be trained and configured."""

from __future__ import annotations

import argparse

from rlfit.cli.output import add_output_arguments, show_result


def register(subparsers) -> None:
    envs = subparsers.add_parser(
        "envs", help="list the environments rlfit can train",
        description="List the environments rlfit can train: MuJoCo Playground's, then those of each family "
                    "whose package is installed, as `<family>:<name>` (a missing family: a note on stderr).")
    add_output_arguments(envs)
    envs.set_defaults(handler=list_envs)
    keys = subparsers.add_parser(
        "keys", help="list every config key with its meaning and default",
        description="List every config key with rlfit's own default and its meaning, from the config's own "
                    "docstrings (Playground's published settings and the presets come on top).")
    keys.add_argument("--markdown", action="store_true",
                      help="print the list as a Markdown table (the documentation's configuration page is this table)")
    add_output_arguments(keys)
    keys.set_defaults(handler=list_keys)


def list_envs(args: argparse.Namespace) -> int:
    """Playground's names, then each family's `<prefix>:<name>` (a family whose package is missing: a note on
    stderr, which `--quiet` drops too: it is no error)."""
    import sys

    from rlfit.envs.loading import FAMILIES, family_names
    from rlfit.envs.names import playground_names
    from rlfit.errors import UserError

    names, missing = list(playground_names()), {}
    for prefix in FAMILIES:
        try:
            names += family_names(prefix)
        except UserError as error:
            missing[prefix] = str(error)
    if not args.quiet and not args.json:
        for prefix, reason in missing.items():
            print(f"({prefix}:<name>: {reason})", file=sys.stderr)
    show_result(args, "\n".join(names), {"environments": names, "families_missing": missing})
    return 0


def list_keys(args: argparse.Namespace) -> int:
    """Every config key, its default and its meaning, from the config dataclasses' own docstrings."""
    from rlfit.config.docs import default_text, key_docs, markdown_table, plain_table

    rows = [{"key": row.key, "default": row.default, "default_text": default_text(row.default), "meaning": row.meaning}
            for row in key_docs()]
    show_result(args, (markdown_table() if args.markdown else plain_table()).rstrip("\n"), {"keys": rows})
    return 0
