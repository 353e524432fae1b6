"""docs/commands.md's reference part is generated from the argument parsers (`rlfit.cli.reference`), as the key
table of docs/configuration.md is from the config: it lists every command and flag the parsers take and only
those, it is up to date (a stale one fails this test and the documentation build, naming the tool that rewrites
it), and the hand-written text around it is kept."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from rlfit.cli import build_parser
from rlfit.cli.reference import BEGIN, END, commands_markdown, subcommands, usage, with_commands
from tests.conftest import REPO_ROOT, cli_environment

sys.path.insert(0, str(REPO_ROOT / "tools"))
import docs_hooks  # noqa: E402

PAGE = REPO_ROOT / "docs" / "commands.md"


def generated_part(page: str) -> str:
    return page[page.index(BEGIN):page.index(END) + len(END)] + "\n"


def test_the_commands_page_is_up_to_date_with_the_parsers():
    assert generated_part(PAGE.read_text()) == commands_markdown(build_parser()), \
        "docs/commands.md is stale: run python tools/commands_page.py"


def test_the_page_names_every_command_and_every_flag_each_takes():
    page = PAGE.read_text()
    for name, (_, parser) in subcommands(build_parser()).items():
        part = page[page.index(f"### rlfit {name}\n"):]
        part = part[:part.find("\n### ", 1)] if "\n### " in part[1:] else part
        documented = set(re.findall(r"^\| `(--[a-z-]+)", part, flags=re.MULTILINE))
        taken = {flag for action in parser._actions for flag in action.option_strings if flag.startswith("--")}
        assert documented == taken - {"--help"}, name


def test_a_flag_added_to_a_parser_makes_the_page_stale(monkeypatch):
    import rlfit.cli.play

    register = rlfit.cli.play.register

    def with_a_new_flag(subparsers):
        register(subparsers)
        subparsers.choices["play"].add_argument("--speed", metavar="X", help="playback speed")

    monkeypatch.setattr(rlfit.cli.play, "register", with_a_new_flag)
    wanted = commands_markdown(build_parser())
    assert "| `--speed X` | playback speed |" in wanted
    assert wanted != generated_part(PAGE.read_text())
    with pytest.raises(PluginError, match="commands.md is stale.*tools/commands_page.py"):
        docs_hooks.on_page_markdown(PAGE.read_text(), page=SimpleNamespace(file=SimpleNamespace(src_uri="commands.md")),
                                    config=None, files=None)


def test_the_hook_passes_an_up_to_date_page_unchanged():
    page = PAGE.read_text()
    assert docs_hooks.on_page_markdown(page, page=SimpleNamespace(file=SimpleNamespace(src_uri="commands.md")),
                                       config=None, files=None) == page


def test_usage_lines_as_a_user_types_them():
    parser = argparse.ArgumentParser(prog="x")
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("env", nargs="?", metavar="ENV")
    total = parser.add_mutually_exclusive_group()
    total.add_argument("--timesteps", type=int, metavar="N")
    total.add_argument("--iterations", type=int, metavar="N")
    parser.add_argument("--set", metavar="KEY=VALUE", action="append", default=[])
    parser.add_argument("--kind", choices=("a", "b"), required=True)
    parser.add_argument("--device-memory", metavar="SIZE", nargs="+")
    parser.add_argument("--quiet", action="store_true")
    assert usage("rlfit x", parser) == ("rlfit x RUN_DIR [ENV] [--timesteps N | --iterations N] [--set KEY=VALUE]... "
                                        "--kind {a,b} [--device-memory SIZE [SIZE ...]] [--quiet]")


def test_hand_written_text_around_the_markers_is_kept_and_markers_are_required():
    page = f"# Commands\n\nintro\n\n{BEGIN}\nold\n{END}\n\n## What a command prints\n"
    assert with_commands(page, f"{BEGIN}\nnew\n{END}\n") == \
        f"# Commands\n\nintro\n\n{BEGIN}\nnew\n{END}\n\n## What a command prints\n"
    for broken in ("no markers\n", f"{END}\n{BEGIN}\n", f"{BEGIN}\n{BEGIN}\n{END}\n"):
        with pytest.raises(ValueError, match="rlfit:commands"):
            with_commands(broken, f"{BEGIN}\n{END}\n")


def test_the_tool_finds_the_page_up_to_date():
    check = subprocess.run([sys.executable, str(REPO_ROOT / "tools" / "commands_page.py"), "--check"],
                           capture_output=True, text=True, timeout=120, env=cli_environment())
    assert check.returncode == 0, check.stderr
