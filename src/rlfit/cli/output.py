"""The output flags every command shares: `--quiet` (nothing but errors) and, for a command that prints a result,
`--json` (the result as one JSON object on stdout, nothing else there).

A command prints two kinds of text: progress (what it is doing, for a person watching) and its result (what it
made: a file's path, a table, a list). `--quiet` drops both; `--json` prints the result as JSON, also with
`--quiet`, and keeps stdout for it alone (progress written to stdout is dropped; `rlfit plan`'s, on stderr and
only on a terminal, stays). Errors on stderr are never dropped.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rlfit.console import say_line

QUIET_HELP = "print nothing but errors (with --json: the JSON object too)"
JSON_HELP = "print the result as one JSON object on stdout, and nothing else there"


def add_output_arguments(parser: argparse.ArgumentParser, json_result: bool = True) -> None:
    """Adds `--quiet` and, where the command prints a result (`json_result`), `--json`."""
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    if json_result:
        parser.add_argument("--json", action="store_true", help=JSON_HELP)


def silent(args: argparse.Namespace) -> bool:
    """Whether progress lines are dropped: under `--quiet` or `--json`."""
    return bool(getattr(args, "quiet", False) or getattr(args, "json", False))


def progress(args: argparse.Namespace) -> Callable[[str], None]:
    """`say(line)` for progress: prints and flushes, or does nothing under `--quiet` or `--json`."""
    if silent(args):
        return lambda line: None
    return say_line  # one write a line: the compile threads' lines never run together


def show_result(args: argparse.Namespace, text: str | None, data: dict[str, Any]) -> None:
    """Prints the command's result: `data` as one JSON object under `--json`; else `text` (None: nothing) unless
    `--quiet`. Paths in `data` are written as strings."""
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=_plain), flush=True)
    elif text is not None and not getattr(args, "quiet", False):
        print(text, flush=True)


def report_folder(args: argparse.Namespace) -> Path:
    """Where a check of an exported policy (`rlfit sim2sim`, `rlfit transfer-check`) writes its report: `--out`,
    which must be an existing folder, else RUN_DIR; its `--seed` checked first. Wrong input raises UserError (one
    line, exit code 2) before anything is loaded."""
    from rlfit.config.rules import check_seed
    from rlfit.errors import UserError

    check_seed(args.seed, "--seed")
    if args.out is None:
        return Path(args.run_dir)
    if not args.out.is_dir():
        raise UserError(f"--out {args.out} is not a folder; create it first")
    return Path(args.out)


@contextlib.contextmanager
def writing_report(command: str) -> Iterator[None]:
    """Writes a report into `report_folder`: a file that cannot be written stops `rlfit COMMAND` in one line
    (`rlfit.rundir.write_failures.stop_on_refusal`) naming the fix."""
    from rlfit.rundir.write_failures import stop_on_refusal

    with stop_on_refusal(f"free space or choose another --out, then run `rlfit {command}` again"):
        yield


def _plain(value: Any) -> Any:
    """JSON for the values results hold beyond JSON's own: paths, tuples of them."""
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
