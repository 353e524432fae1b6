"""The `rlfit` command line. Each subcommand lives in its own module with `register(subparsers)`; every one takes
`--quiet`, and every one that prints a result `--json` (`rlfit.cli.output`).

Exit codes, one meaning each across commands, are named in `rlfit.exit_codes` (and listed in docs/guarantees.md).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys

from rlfit import exit_codes
from rlfit.errors import UserError
from rlfit.run.signals import StopRequested
from rlfit.rundir.write_failures import EXIT_WRITE_FAILED, describe, refusal

COMMANDS = ("train", "resume", "experiment", "report", "play", "export", "transfer-check", "sim2sim", "doctor", "plan",
            "info", "convert-weights")


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (what is wrong and where to look), exit code 2,
    and no abbreviated options (`--num-env` is an error, not `--num-envs`)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    from rlfit.config.algorithms import titles_in_words
    from rlfit.versions import __version__

    parser = OneLineParser(prog="rlfit",
                           description=f"Train robot control policies with {titles_in_words()}, sized to your hardware.")
    parser.add_argument("--version", action="version", version=f"rlfit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=OneLineParser)
    subparsers.required = True
    for name in COMMANDS:
        importlib.import_module(f"rlfit.cli.{name.replace('-', '_')}").register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    from rlfit.algos.registry import register_from_environment

    try:
        register_from_environment()  # algorithms from outside rlfit ($RLFIT_ALGORITHMS), before --algo's choices
        parser = build_parser()  # reads every algorithm's presets
    except UserError as error:
        print(f"rlfit: error: {error}", file=sys.stderr)
        return error.exit_code
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except UserError as error:
        print(f"rlfit: error: {error}", file=sys.stderr)
        return error.exit_code
    except StopRequested as stop:
        print(f"rlfit: {stop}", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print("rlfit: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:  # `rlfit keys | head`: the reader has gone; stop quietly, as `cat` does
        return broken_pipe_exit()
    except Exception as error:  # noqa: BLE001 - a refused write anywhere is one line; anything else is a bug
        if non_finite(error):
            print(f"rlfit: {error}", file=sys.stderr)
            return exit_codes.NON_FINITE
        refused = refusal(error)
        if refused is None:
            raise
        print(f"rlfit: error: {describe(refused)}; free space (or make it writable), then run the command again",
              file=sys.stderr)
        return EXIT_WRITE_FAILED


def non_finite(error: BaseException) -> bool:
    """Whether `error` is the run loop's `NonFiniteError`. It is looked up, not imported: its module imports JAX, and
    only a process that imported it can have raised it (`rlfit --help` imports no JAX)."""
    loop = sys.modules.get("rlfit.run.loop")
    return loop is not None and isinstance(error, loop.NonFiniteError)


def run() -> None:
    """The `rlfit` command: `main()` on the process's arguments, then the process ends with its exit code. Where a
    program is still compiling in a background thread (a run that stopped before it needed its evaluation), the
    process leaves with `os._exit` after flushing its output: the run's files are written and closed by then, and
    the interpreter's teardown of a thread inside XLA's compile would abort it (exit -6) instead of the code. A
    process of a multi-process run leaves that run first (`os._exit` skips JAX's own exit handler), or the others
    would wait at their shutdown for its heartbeat and abort. Python's garbage collector runs less often in the
    process (`rlfit.cli.gc_thresholds`)."""
    import os

    from rlfit.cli.gc_thresholds import collect_less_often
    from rlfit.hardware.compile_log import compiling_in_background
    from rlfit.parallel.distributed import leave

    collect_less_often()  # before the command imports JAX and traces its programs
    code = main()
    if compiling_in_background():
        with contextlib.suppress(Exception):
            leave()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    sys.exit(code)


def broken_pipe_exit() -> int:
    """Points stdout at /dev/null (so the interpreter's last flush cannot fail again) and returns 141
    (`exit_codes.BROKEN_PIPE`), the shell's code for a process whose reader went away (128 + SIGPIPE)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    return exit_codes.BROKEN_PIPE
