"""The package's shape: each stage imports only the stages below it and no modules import each other in a circle,
not even inside a function (the contracts in pyproject.toml's [tool.importlinter], checked by import-linter)."""

from pathlib import Path

from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    assert lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True, no_logo=True) == 0
