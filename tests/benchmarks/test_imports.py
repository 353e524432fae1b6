"""Every name a benchmark script imports from rlfit exists (a restructure must not break the GPU runbook)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def rlfit_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for each `from rlfit... import name` and (module, None) for each `import rlfit...`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rlfit":
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names if alias.name.split(".")[0] == "rlfit"]
    return found


SCRIPTS = sorted(BENCHMARKS.glob("*.py"))


def test_the_benchmarks_import_rlfit():
    assert any(rlfit_imports(path) for path in SCRIPTS), "no benchmark imports rlfit: the check below checks nothing"


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_rlfit_name_a_benchmark_imports_exists(path):
    missing = []
    for module_name, name in rlfit_imports(path):
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            missing.append(module_name)
            continue
        if name is not None and not hasattr(module, name):
            try:
                importlib.import_module(f"{module_name}.{name}")
            except ModuleNotFoundError:
                missing.append(f"{module_name}.{name}")
    assert not missing, f"{path.name} imports names rlfit no longer has: {missing}"
