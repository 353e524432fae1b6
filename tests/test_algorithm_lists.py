"""Every list of algorithms a user reads names every registered algorithm (rlfit.algos.registry): the command
line's descriptions and help are built from the registry; the texts written by hand (the package description,
README's Algorithms table, the documentation's home, configuration and commands pages) are checked against it
here, so registering a fourth algorithm fails these tests until the texts name it (shown with the test-only
`tests/algos/detpg`). Before, `rlfit --help` said "PPO or SAC" three algorithms in."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

import rlfit
import rlfit.config.schema
from rlfit.algos.registry import ALGORITHMS, register_algorithm, unregister_algorithm
from rlfit.cli import build_parser
from rlfit.cli.reference import subcommands
from rlfit.config.algorithms import title
from rlfit.config.docs import key_docs
from tests.conftest import REPO_ROOT

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency reads TOML the same way
    import tomli as tomllib


def section(text: str, heading: str) -> str:
    """`text` from the line `heading` to the next heading of the same level."""
    start = text.index(f"\n{heading}\n")
    level = heading.split(" ")[0]
    end = text.find(f"\n{level} ", start + len(heading) + 2)
    return text[start:end if end != -1 else len(text)]


def read(name: str) -> str:
    return (REPO_ROOT / name).read_text()


def by_title(text: str) -> list[str]:
    """The registered algorithms whose title ('FastTD3') `text` does not contain."""
    return [name for name in ALGORITHMS if title(name) not in text]


def by_name(pattern: str) -> Callable[[str], list[str]]:
    """A check: the registered algorithms for which `pattern.format(name)` is not in the text."""
    return lambda text: [name for name in ALGORITHMS if pattern.format(name) not in text]


def choices_missing(text: str) -> list[str]:
    """The registered algorithms some `--algo {a,b,...}` of `text` leaves out (and none if it has no such flag)."""
    choices = [set(part.split("}")[0].split(",")) for part in text.split("--algo {")[1:]]
    return [name for name in ALGORITHMS if not choices or any(name not in given for given in choices)]


HAND_WRITTEN: dict[str, tuple[Callable[[], str], Callable[[str], list[str]]]] = {
    "pyproject.toml's description": (lambda: tomllib.loads(read("pyproject.toml"))["project"]["description"], by_title),
    "the package's docstring": (lambda: rlfit.__doc__ or "", by_title),
    "mkdocs.yml's site_description": (lambda: yaml.safe_load(read("mkdocs.yml"))["site_description"], by_title),
    "README.md's opening line": (lambda: read("README.md").split("\n\n")[1], by_title),
    "README.md's Algorithms table (a row per --algo)": (lambda: section(read("README.md"), "## Algorithms"),
                                                        by_name("| `{}`")),
    "README.md's Commands table (train's --algo)": (lambda: section(read("README.md"), "## Commands"),
                                                    lambda text: [n for n in ALGORITHMS if n not in
                                                                  text.split("--algo ")[1].split("]")[0]]),
    "docs/index.md": (lambda: read("docs/index.md"), by_title),
    "docs/configuration.md's opening": (lambda: read("docs/configuration.md").split("| preset |")[0],
                                        by_name("`algo: {}`")),
    "docs/commands.md (--algo of train and plan)": (lambda: read("docs/commands.md"), choices_missing),
    "the config schema's docstring": (lambda: rlfit.config.schema.__doc__ or "", by_name("`{}`")),
}
"""Where a list of the algorithms is written by hand: how to read it, and which registered ones it leaves out."""


@pytest.fixture
def fourth_algorithm():
    register_algorithm("detpg", "tests.algos.detpg")
    yield "detpg"
    unregister_algorithm("detpg")


@pytest.mark.parametrize("where", list(HAND_WRITTEN))
def test_every_hand_written_list_names_every_registered_algorithm(where):
    text, missing = HAND_WRITTEN[where]
    assert missing(text()) == [], f"{where} leaves out {missing(text())}"


@pytest.mark.parametrize("where", list(HAND_WRITTEN))
def test_a_fourth_algorithm_not_written_in_is_found_missing(where, fourth_algorithm):
    text, missing = HAND_WRITTEN[where]
    assert missing(text()) == [fourth_algorithm]


def help_text(capsys, *argv: str) -> str:
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "--help"])
    return capsys.readouterr().out


def test_the_command_lines_descriptions_and_help_are_built_from_the_registry(capsys, fourth_algorithm):
    assert "with PPO, SAC, FastTD3 or DetPG" in " ".join(help_text(capsys).split())
    train = " ".join(help_text(capsys, "train").split())
    assert "with PPO, SAC, FastTD3 or DetPG" in train and "{ppo,sac,fasttd3,detpg}" in train
    assert "(ppo, sac, fasttd3, detpg)" in train  # the sections --config takes
    commands = subcommands(build_parser())
    assert [a.choices for a in commands["plan"][1]._actions if a.dest == "algo"] == [list(ALGORITHMS)]
    assert "`detpg`" in next(row.meaning for row in key_docs() if row.key == "algo")


def test_without_a_fourth_the_help_names_rlfits_own_three(capsys):
    assert "Train robot control policies with PPO, SAC or FastTD3" in " ".join(help_text(capsys).split())
    assert "DetPG" not in help_text(capsys, "train")
