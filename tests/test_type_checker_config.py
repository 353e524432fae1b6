"""The type checker `make test` runs (pyproject.toml's [tool.mypy]) checks its folders whole and strictly: no module
is exempt from an error code, the modules they import are checked rather than silenced, strict mode (no bare generics
among them) covers run/, algos/ and planning/, and each `# type: ignore` in them names its code and says why (a
library's stubs are wrong)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def mypy_config() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mypy"]


def test_no_module_is_exempt_from_an_error_code():
    config = mypy_config()
    assert "overrides" not in config
    assert not {"disable_error_code", "ignore_errors"} & set(config)
    assert config["warn_unused_ignores"] is True


def test_the_runner_the_algorithms_and_the_planner_are_checked_strictly_with_imports_followed():
    config = mypy_config()
    assert config["follow_imports"] == "normal"
    assert config["strict"] is True and config["disallow_any_generics"] is True
    assert {"src/rlfit/run", "src/rlfit/algos", "src/rlfit/planning"} <= set(config["files"])


def test_each_type_ignore_in_the_checked_folders_names_its_code_and_its_reason():
    ignores = [(path.relative_to(REPO), line) for folder in mypy_config()["files"]
               for path in sorted((REPO / folder).rglob("*.py"))
               for line in path.read_text().splitlines() if "type: ignore" in line]
    unexplained = [(path, line.strip()) for path, line in ignores
                   if not re.search(r"# type: ignore\[[a-z-]+(, [a-z-]+)*\]  # \S", line)]
    assert unexplained == []
