"""The package's shape: each stage imports only the stages below it and no modules import each other in a circle,
not even inside a function (the contracts in pyproject.toml's [tool.importlinter], checked by import-linter)."""

from pathlib import Path

from importlinter.cli import lint_imports

REPO = Path(__file__).resolve().parents[1]


def test_the_import_contracts_hold():
    assert lint_imports(config_filename=str(REPO / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def layers_bottom_up() -> list[set[str]]:
    """pyproject.toml's layers contract, lowest first, each layer as the set of its stages' short names."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest's own dependency reads TOML the same way
        import tomli as tomllib

    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [layers] = [contract["layers"] for contract in contracts
                if contract["type"] == "layers" and contract["name"].startswith("each stage")]
    return [{name.strip().removeprefix("rlfit.") for name in layer.split("|")} for layer in reversed(layers)]


def test_the_readme_gives_the_stages_in_the_order_lint_imports_checks():
    """README's "How it fits together" names the folders lowest first, "/" joining a layer's stages; the root
    modules below them all (the errors, the versions, the exit codes, the console) are left to docs/architecture.md."""
    import re

    text = " ".join((REPO / "README.md").read_text().split())
    sentence = text[text.index("each imports only those before it in this order"):]
    sentence = sentence[sentence.index(": ") + 2:sentence.index(". [Architecture]")]
    written = [{name.removesuffix("/").removesuffix(".py") for name in re.findall(r"`([a-z_]+/?(?:\.py)?)`", group)}
               for group in sentence.split(", ")]
    folders = [layer for layer in layers_bottom_up() if not layer <= {"errors", "versions", "exit_codes", "console"}]
    assert written == folders


def test_pyprojects_comment_gives_the_same_order():
    text = (REPO / "pyproject.toml").read_text()
    comment = " ".join(line.removeprefix("#").strip() for line in text[:text.index("[tool.importlinter]")]
                       .splitlines() if line.startswith("#"))
    chain = comment[comment.index("read bottom up"):]
    chain = chain[chain.index(": ") + 2:chain.index(";")]
    written = [{name.strip().replace("exit codes", "exit_codes") for name in group.split(",")}
               for group in chain.split("->")]
    assert written == layers_bottom_up()


def test_only_the_algos_stage_may_import_an_algorithm():
    """The contract that forbids importing rlfit.algos.<name> covers every stage and root module but `algos`, and
    forbids every algorithm rlfit ships (so a new stage or algorithm cannot slip past it)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    import rlfit
    from rlfit.config.algorithms import ALGORITHMS

    shipped = {package for package in ALGORITHMS.values() if package.startswith("rlfit.algos.")}
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    [forbidden] = [contract for contract in contracts
                   if contract["type"] == "forbidden" and set(contract["forbidden_modules"]) == shipped]
    package = Path(rlfit.__file__).parent
    stages = {path.stem for path in package.iterdir()
              if (path.is_dir() and (path / "__init__.py").exists()) or (path.suffix == ".py" and path.stem != "__init__")}
    assert {name.removeprefix("rlfit.") for name in forbidden["source_modules"]} == stages - {"algos"}
    [independent] = [contract for contract in contracts if contract["type"] == "independence"]
    assert set(independent["modules"]) == shipped
