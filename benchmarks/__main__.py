"""The benchmark suite's one runner, from the repository root:

    python -m benchmarks list                       # every benchmark by category: device, minutes, quick check
    python -m benchmarks run NAME [--quick] [-- ARGS...]   # python benchmarks/NAME.py with this interpreter
    python -m benchmarks figures [--check]          # write benchmarks/FIGURES.md (--check: exit 1 if it is stale)

Bad input (an unknown benchmark, `--quick` for one without a quick check) is one line and exit code 2.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from benchmarks.figures_page import FIGURES, README, figures_markdown, suite_table, with_suite_table
from benchmarks.registry import BENCH_DIR, by_name


class UsageError(Exception):
    """Bad input: the message names the problem and the fix."""


def list_command() -> int:
    """Prints the generated table of benchmarks (the one the benchmarks README holds)."""
    print(suite_table(), end="")
    return 0


def run_command(name: str, quick: bool, extra: list[str]) -> int:
    """Runs benchmarks/NAME.py (with `--quick`'s arguments where asked) in this interpreter; its exit code."""
    benchmarks = by_name()
    if name not in benchmarks:
        raise UsageError(f"unknown benchmark {name!r}: choose one of {', '.join(sorted(benchmarks))} "
                         "(python -m benchmarks list)")
    benchmark = benchmarks[name]
    if quick and not benchmark.quick:
        raise UsageError(f"{name} has no quick check ({benchmark.quick_exempt}): run it without --quick")
    argv = [sys.executable, str(BENCH_DIR / f"{name}.py"), *(benchmark.quick.split() if quick else []), *extra]
    return subprocess.call(argv, cwd=BENCH_DIR.parent)


def generated_pages(figures: Path = FIGURES, readme: Path = README, results: Path | None = None) -> dict[Path, str]:
    """Each generated page and the text it should have now: FIGURES.md, and the README with its table."""
    try:
        return {figures: figures_markdown(results), readme: with_suite_table(readme.read_text(), suite_table())}
    except ValueError as error:
        raise UsageError(str(error)) from None


def figures_command(check: bool, pages: dict[Path, str] | None = None) -> int:
    """Writes `pages` (default: FIGURES.md and the README's table, from the registry and the newest results JSON);
    with `check`, writes nothing and returns 1 where any page on disk differs."""
    pages = generated_pages() if pages is None else pages
    stale = [page for page, text in pages.items() if not page.exists() or page.read_text() != text]
    for page in stale:
        name = page.relative_to(BENCH_DIR.parent) if page.is_relative_to(BENCH_DIR.parent) else page
        if check:
            print(f"{name} is stale (a results JSON or benchmarks/registry.py changed): run python -m benchmarks "
                  "figures", file=sys.stderr)
        else:
            page.write_text(pages[page])
            print(f"wrote {name}")
    return 1 if check and stale else 0


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports bad input in one line (no usage block) with exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"error: {message} (python -m benchmarks --help)", file=sys.stderr)
        raise SystemExit(2)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m benchmarks", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    commands.add_parser("list", help="every benchmark by category")
    run = commands.add_parser("run", help="run one benchmark script")
    run.add_argument("name", help="the script's name without .py (python -m benchmarks list)")
    run.add_argument("--quick", action="store_true", help="its short check instead of the full run")
    figures = commands.add_parser("figures", help="write benchmarks/FIGURES.md from the results JSON")
    figures.add_argument("--check", action="store_true", help="exit 1 if FIGURES.md is stale, write nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = build_parser()
    try:
        args = parser.parse_args(ours)
    except SystemExit as stop:  # --help (0) or bad input, already reported in one line (2)
        return int(stop.code or 0)
    try:
        if args.command == "list":
            return list_command()
        if args.command == "run":
            return run_command(args.name, args.quick, extra)
        return figures_command(args.check)
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
