"""The benchmark suite as a suite: every script under benchmarks/ is registered (or listed as a library), the
generated pages (FIGURES.md, the README's table) are current, and the runner refuses bad input in one line. Every
`--quick` check runs in tests/benchmarks/test_every_quick_check.py."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys

import pytest
from markdown.extensions.toc import slugify

from benchmarks import registry, results_files
from benchmarks.__main__ import figures_command, generated_pages, main
from benchmarks.figures_page import TABLE_BEGIN, TABLE_END, figures_anchor, figures_markdown, suite_table
from tests.conftest import REPO_ROOT

BENCHMARKS = REPO_ROOT / "benchmarks"


def argparse_flags(path) -> set[str]:
    """Every option string the script passes to an `add_argument` call (read from its source, nothing run)."""
    flags = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            flags |= {arg.value for arg in node.args if isinstance(arg, ast.Constant) and str(arg.value).startswith("--")}
    return flags


def test_every_script_is_a_registered_benchmark_or_a_listed_library():
    scripts = {path.name for path in BENCHMARKS.glob("*.py")}
    registered = {f"{benchmark.name}.py" for benchmark in registry.BENCHMARKS}
    assert not registered & set(registry.LIBRARIES), "a module is both a benchmark and a library"
    assert scripts - registered - set(registry.LIBRARIES) == set(), "register these in benchmarks/registry.py"
    assert (registered | set(registry.LIBRARIES)) - scripts == set(), "the registry names scripts that do not exist"


def test_each_benchmark_has_a_known_category_device_and_either_a_quick_check_or_a_reason():
    for benchmark in registry.BENCHMARKS:
        assert benchmark.category in registry.CATEGORIES, benchmark.name
        assert benchmark.device in ("cpu", "gpu", "any"), benchmark.name
        assert benchmark.minutes, benchmark.name
        if benchmark.quick:
            flags = {word for word in benchmark.quick.split() if word.startswith("--")}
            assert "--quick" in flags and flags <= argparse_flags(BENCHMARKS / f"{benchmark.name}.py"), \
                f"{benchmark.name}.py takes no {benchmark.quick}"
            assert not benchmark.quick_exempt, benchmark.name
        else:
            assert benchmark.quick_exempt, f"{benchmark.name}: say why it has no quick check"


def test_every_result_a_benchmark_cites_exists_and_yields_figures():
    for benchmark in registry.BENCHMARKS:
        for source in benchmark.sources:
            path = results_files.newest(source.pattern)
            if benchmark.device == "gpu" and path is None:
                continue  # not measured yet: FIGURES.md says so
            assert path is not None, f"{benchmark.name}: no results/{source.pattern}"
            figures = source.extract(json.loads(path.read_text()))
            assert figures and all(figure.value not in ("", "-") for figure in figures), (benchmark.name, path.name)


def test_the_figures_page_and_the_readme_table_are_current():
    assert figures_command(check=True) == 0, "run python -m benchmarks figures"


def test_a_changed_result_makes_the_figures_page_stale_and_the_new_figure_appears(tmp_path):
    results = tmp_path / "results"
    shutil.copytree(BENCHMARKS / "results", results, ignore=shutil.ignore_patterns("tmp", "*.log", "*.png"))
    record = json.loads((results / "kill9_stress.json").read_text())
    record["max_lost_iterations"], record["date"] = 3, "2030-01-02T03:04:05+00:00"
    (results / "kill9_stress.json").write_text(json.dumps(record))
    figures, readme = tmp_path / "FIGURES.md", tmp_path / "README.md"
    figures.write_text((BENCHMARKS / "FIGURES.md").read_text())
    readme.write_text((BENCHMARKS / "README.md").read_text())
    pages = generated_pages(figures, readme, results)
    assert "| most iterations lost by one kill (save interval 5) | **3 iterations** |" in pages[figures]
    assert "| 2030-01-02 03:04 |" in pages[figures]
    assert figures_command(check=True, pages=pages) == 1
    assert figures_command(check=False, pages=pages) == 0
    assert figures_command(check=True, pages=pages) == 0 and figures.read_text() == pages[figures]


def test_the_newest_of_several_results_is_the_one_with_the_latest_date(tmp_path):
    for name, date in (("a_old.json", "2026-11-01T00:00:00"), ("a_new.json", "2026-11-20T00:00:00"),
                       ("a_mid.json", "2026-11-10T00:00:00")):
        (tmp_path / name).write_text(json.dumps({"command": name, "date": date}))
    assert results_files.newest("a_*.json", tmp_path).name == "a_new.json"
    assert results_files.newest("b_*.json", tmp_path) is None


def test_the_readme_table_is_one_table_listing_every_benchmark_once():
    readme = (BENCHMARKS / "README.md").read_text()
    table = readme[readme.index(TABLE_BEGIN) + len(TABLE_BEGIN):readme.index(TABLE_END)].strip()
    rows = table.split("\n\n")[0].splitlines()
    assert all(row.startswith("|") for row in rows), "a blank line inside the table splits it"
    for benchmark in registry.BENCHMARKS:
        assert sum(f"[`{benchmark.name}.py`]" in row for row in rows) == 1, benchmark.name
    assert table + "\n" == suite_table().strip() + "\n"


def heading_anchors(path) -> set[str]:
    """The anchors of a Markdown file's headings, as the site's table of contents makes them."""
    return {slugify(line.lstrip("#").strip().replace("`", ""), "-") for line in path.read_text().splitlines()
            if line.startswith("#")}


def test_every_benchmark_has_a_method_page_that_the_figures_page_and_the_readme_link():
    page, readme = figures_markdown(), (BENCHMARKS / "README.md").read_text()
    for benchmark in registry.BENCHMARKS:
        file, _, anchor = benchmark.section.partition("#")
        assert file.startswith("methods/") and file.endswith(".md"), f"{benchmark.name}: section names no method page"
        assert (BENCHMARKS / file).is_file(), f"{benchmark.name}: no benchmarks/{file}"
        assert not anchor or anchor in heading_anchors(BENCHMARKS / file), f"{benchmark.name}: no heading #{anchor}"
        assert f"[`{benchmark.name}.py`]({benchmark.section})" in readme, benchmark.name
        if benchmark.sources:
            assert f"([method]({benchmark.section}))" in page, benchmark.name
            assert f"[FIGURES.md](FIGURES.md#{figures_anchor(benchmark)})" in readme, benchmark.name
            assert figures_anchor(benchmark) in heading_anchors(BENCHMARKS / "FIGURES.md"), benchmark.name


def test_every_method_page_is_listed_in_the_readme():
    readme = (BENCHMARKS / "README.md").read_text()
    pages = sorted(path.name for path in (BENCHMARKS / "methods").glob("*.md"))
    assert pages and [name for name in pages if f"](methods/{name})" not in readme] == []


@pytest.mark.parametrize(("argv", "message"), [
    (["run", "no_such_benchmark"], "unknown benchmark 'no_such_benchmark'"),
    (["run", "gpu_check", "--quick"], "gpu_check has no quick check"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
])
def test_bad_input_is_one_line_and_exit_code_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_run_passes_the_arguments_after_the_separator_to_the_script():
    done = subprocess.run([sys.executable, "-m", "benchmarks", "run", "plan_fit_check", "--", "--help"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: plan_fit_check.py" in done.stdout and "--quick" in done.stdout
