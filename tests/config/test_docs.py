"""The key table comes from the config dataclasses' own docstrings: `rlfit keys`, `rlfit keys --markdown` and
README.md's table list every key exactly once, and README's table is what the generator writes today."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import pytest
import yaml

from rlfit.config.schema import Config, section_types
from rlfit.config.docs import key_docs, markdown_table
from tests.conftest import REPO_ROOT, cli_in_process

sys.path.insert(0, str(REPO_ROOT / "tools"))
import readme_keys  # noqa: E402

EVERY_KEY = ["algo", *(f"{section}.{field.name}" for section, cls in section_types().items()
                       for field in dataclasses.fields(cls))]
"""Every key the config accepts, from the dataclasses' fields."""


def table_rows(table: str) -> list[list[str]]:
    r"""The cells of each body row of a Markdown table (a '\|' is a '|' inside a cell)."""
    rows = []
    for line in table.strip().splitlines()[2:]:
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        rows.append([cell.strip().replace("\\|", "|") for cell in cells])
    return rows


def test_readmes_key_table_is_the_generated_one():
    text = (REPO_ROOT / "README.md").read_text()
    assert readme_keys.with_table(text, markdown_table()) == text, (
        "README.md's key table differs from the config's docstrings; run python tools/readme_keys.py")


def test_readmes_table_has_every_key_once_with_its_default_and_meaning():
    text = (REPO_ROOT / "README.md").read_text()
    table = text.split(readme_keys.START)[1].split(readme_keys.END)[0]
    rows = table_rows(table)
    assert [row[0].strip("`") for row in rows] == EVERY_KEY
    assert all(len(row) == 3 and row[2] for row in rows), [row for row in rows if len(row) != 3 or not row[2]]
    defaults = {row[0].strip("`"): yaml.safe_load(row[1].strip("`")) for row in rows}
    config = Config()
    for key in EVERY_KEY[1:]:
        section, name = key.split(".")
        value = getattr(config.algos[section] if section in config.algos else getattr(config, section), name)
        assert defaults[key] == (list(value) if isinstance(value, tuple) else value), key
    assert defaults["algo"] == config.algo


def test_every_key_has_a_docstring():
    missing = [row.key for row in key_docs() if not row.meaning]
    assert not missing, f"give these config fields a docstring: {missing}"
    assert [row.key for row in key_docs()] == EVERY_KEY


def test_the_keys_the_issue_found_missing_are_in_the_table():
    keys = {row[0].strip("`") for row in table_rows(markdown_table())}
    assert {"env.observation", "network.encoder", "network.encoder_features", "network.pretrained",
            "run.wandb", "run.wandb_project", "run.time_budget", "run.early_stop_patience",
            "run.target_reward"} <= keys


def test_rlfit_keys_prints_every_key_on_one_line_and_markdown_prints_the_table(capfd, tmp_path):
    plain = cli_in_process(capfd, "keys", cwd=tmp_path)
    assert plain.returncode == 0
    lines = plain.stdout.splitlines()
    assert [line.split()[0] for line in lines] == EVERY_KEY
    bottleneck = next(line for line in lines if line.startswith("network.bottleneck "))
    assert "KL(q(z | obs) || N(0, I))" in bottleneck  # the whole docstring, on the key's own line
    markdown = cli_in_process(capfd, "keys", "--markdown", cwd=tmp_path)
    assert markdown.returncode == 0 and markdown.stdout == markdown_table()


def test_the_tool_rewrites_a_drifted_table_and_check_fails_until_then(tmp_path, capsys):
    readme = tmp_path / "README.md"
    current = (REPO_ROOT / "README.md").read_text()
    drifted = current.replace(next(line for line in current.splitlines() if line.startswith("| `run.wandb` |"))
                              + "\n", "")
    readme.write_text(drifted)
    assert readme_keys.main(["--check"], readme=readme) == 1
    assert "run python tools/readme_keys.py" in capsys.readouterr().err
    assert readme_keys.main([], readme=readme) == 0
    assert readme.read_text() == current
    assert readme_keys.main(["--check"], readme=readme) == 0


def test_without_markers_the_tool_says_what_it_needs(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# a README without the markers\n")
    with pytest.raises(ValueError, match="keys:start"):
        readme_keys.main(["--check"], readme=readme)
    assert Path(readme).read_text() == "# a README without the markers\n"
