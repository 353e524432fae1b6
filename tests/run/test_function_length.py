"""The host loop's package reads in short pieces: every function and method in rlfit/run/ is at most 40 lines, from its
`def` to its last line (decorators apart), docstring included (issue 64)."""

import ast
from pathlib import Path

import rlfit.run

LIMIT = 40


def long_functions(source: str, name: str) -> list[str]:
    """'name:line function (lines)' for each function or method of `source` over LIMIT lines."""
    return [f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > LIMIT]


def test_every_function_in_run_is_at_most_40_lines():
    package = Path(rlfit.run.__file__).parent
    modules = sorted(package.rglob("*.py"))
    assert len(modules) > 10  # the package itself, not an empty folder
    offenders = [hit for path in modules for hit in long_functions(path.read_text(), path.name)]
    assert offenders == []


def test_the_count_finds_a_long_method_and_spares_one_at_the_limit():
    at_limit = "def f():\n" + "    x = 1\n" * (LIMIT - 1)
    over = "class C:\n    def g(self):\n" + "        x = 1\n" * LIMIT
    assert long_functions(at_limit, "a.py") == []
    assert long_functions(over, "b.py") == [f"b.py:2 g ({LIMIT + 1} lines)"]
