"""The documentation's links: `mkdocs build --strict` (in `make test`) checks docs/ itself; tools/docs_hooks.py
checks the links of README.md and CHANGELOG.md, which mkdocs does not read, and fails the build on a broken one."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import pytest
from mkdocs.exceptions import PluginError

from rlfit.rundir.records import WRITTEN_WHEN_SET, JsonRecord
from tests.conftest import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "tools"))
import docs_hooks  # noqa: E402


@pytest.fixture
def repo(tmp_path):
    """A tiny repository: a docs page with two headings, a benchmarks README, and a README linking to them."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text("# Guide\n\n## Exit codes\n\n```bash\n# not a heading\n```\n"
                                                 "## `rlfit play`\n")
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "README.md").write_text("# Benchmarks\n")
    return tmp_path


def test_links_to_files_and_headings_that_exist_are_not_reported(repo):
    readme = repo / "README.md"
    readme.write_text("[a](docs/guide.md) [b](docs/guide.md#exit-codes) [c](docs/guide.md#rlfit-play) "
                      "[d](benchmarks/README.md) [e](https://example.org/x) [f](#local) [g](docs/)\n")
    assert docs_hooks.broken_links(readme, root=repo) == []


def test_a_missing_file_a_missing_heading_and_a_path_outside_are_reported(repo):
    readme = repo / "README.md"
    readme.write_text("[a](docs/gone.md) [b](docs/guide.md#no-such-part) [c](docs/guide.md#not-a-heading) "
                      "[d](../elsewhere.md)\n")
    (repo.parent / "elsewhere.md").write_text("# outside the repository\n")
    assert docs_hooks.broken_links(readme, root=repo) == [
        "README.md: docs/gone.md", "README.md: docs/guide.md#no-such-part (no such heading)",
        "README.md: docs/guide.md#not-a-heading (no such heading)", "README.md: ../elsewhere.md"]


def test_the_build_fails_on_a_broken_link_outside_docs(repo, monkeypatch):
    (repo / "README.md").write_text("[gone](docs/gone.md)\n")
    (repo / "CHANGELOG.md").write_text("# Changelog\n")
    monkeypatch.setattr(docs_hooks, "ROOT", repo)
    with pytest.raises(PluginError, match="docs/gone.md"):
        docs_hooks.on_pre_build(config=None)


def test_the_readme_and_changelog_have_no_broken_links():
    assert [link for name in docs_hooks.CHECKED_OUTSIDE_DOCS
            for link in docs_hooks.broken_links(REPO_ROOT / name)] == []


def test_the_readme_links_into_the_docs_and_the_benchmarks():
    text = (REPO_ROOT / "README.md").read_text()
    for target in ("docs/getting-started.md", "docs/configuration.md", "docs/guarantees.md", "docs/planning.md",
                   "benchmarks/README.md", "benchmarks/FIGURES.md", "CHANGELOG.md"):
        assert f"]({target}" in text, target
    assert "make quickstart" in text and "make test" in text


def test_the_benchmark_pages_links_become_the_sites(repo):
    bench = repo / "benchmarks"
    (bench / "decisions").mkdir()
    (bench / "decisions" / "0001-a-choice.md").write_text("# 0001 A choice: 4 epochs\n\ntext\n")
    (bench / "FIGURES.md").write_text("# Current figures\n")
    (bench / "results").mkdir()
    (bench / "results" / "x.json").write_text("{}")
    source = bench / "decisions" / "0002-another.md"
    text = ("[m](../README.md#quickstartpy) [f](../FIGURES.md#speed) [d](0001-a-choice.md) [i](README.md) "
            "[../results/x.json](../results/x.json) [the run](../results/x.json) [g](../../docs/guide.md#exit-codes) "
            "[w](https://example.org) [h](#here)")
    assert docs_hooks.site_links(text, source, root=repo) == (
        "[m](benchmarks.md#quickstartpy) [f](benchmark-figures.md#speed) "
        "[d](benchmark-decisions.md#0001-a-choice-4-epochs) [i](benchmark-decisions.md) "
        "`benchmarks/results/x.json` the run (`benchmarks/results/x.json`) [g](guide.md#exit-codes) "
        "[w](https://example.org) [h](#here)")


def test_a_decision_record_is_one_level_down_on_the_decisions_page():
    assert docs_hooks.demoted("# 0001 Title\n\n## Figures\n\n```bash\n# a comment\n```\n") == \
        "## 0001 Title\n\n### Figures\n\n```bash\n# a comment\n```\n"


def test_a_stale_figures_page_fails_the_build(repo):
    (repo / "benchmarks" / "FIGURES.md").write_text("# Current figures\n\nold\n")
    with pytest.raises(PluginError, match="FIGURES.md is stale.*python -m benchmarks figures"):
        docs_hooks.benchmark_part("benchmark-figures.md", root=repo)


def test_the_benchmark_pages_are_the_benchmarks_own_files():
    figures = docs_hooks.benchmark_part("benchmark-figures.md")
    assert figures.startswith("# Current figures") and "](benchmark-methods.md#quickstartpy)" in figures
    methods = docs_hooks.benchmark_part("benchmark-methods.md")
    pages = list((REPO_ROOT / "benchmarks" / "methods").glob("*.md"))
    assert methods.startswith("## ") and methods.count("\n## ") + 1 == len(pages) >= 25
    assert "\n## quickstart.py\n" in methods
    decisions = docs_hooks.benchmark_part("benchmark-decisions.md")
    records = sorted((REPO_ROOT / "benchmarks" / "decisions").glob("[0-9]*.md"))
    assert decisions.count("\n## ") + decisions.startswith("## ") == len(records) >= 16
    assert "## 0015 The quick preset keeps `gae_once`" in decisions
    assert "## 0017 PPO's quick preset: 8 epochs per batch and Brax's estimator" in decisions


def test_a_method_page_link_becomes_its_title_or_its_anchor_on_the_methods_page(repo):
    methods = repo / "benchmarks" / "methods"
    methods.mkdir()
    (methods / "suite.md").write_text("# suite.py (issue 28)\n\n## rlfit's settings\n")
    source = repo / "benchmarks" / "FIGURES.md"
    text = "[a](methods/suite.md) [b](methods/suite.md#rlfits-settings) [c](methods/) [d](README.md#running-them)"
    assert docs_hooks.site_links(text, source, root=repo) == (
        "[a](benchmark-methods.md#suitepy-issue-28) [b](benchmark-methods.md#rlfits-settings) "
        "[c](benchmark-methods.md) [d](benchmarks.md#running-them)")


def test_the_methods_page_is_every_method_page_in_the_order_the_index_links_them(repo):
    methods = repo / "benchmarks" / "methods"
    methods.mkdir()
    for name, title in (("a.md", "a.py"), ("b.md", "b.py"), ("c.md", "Measured by hand")):
        (methods / name).write_text(f"# {title}\n\n## How\n\n[back](../README.md)\n")
    (repo / "benchmarks" / "README.md").write_text("# Benchmarks\n\n[b](methods/b.md) [a](methods/a.md#how) "
                                                     "[b again](methods/b.md)\n")
    assert [path.name for path in docs_hooks.method_pages(repo)] == ["b.md", "a.md", "c.md"]
    page = docs_hooks.benchmark_part("benchmark-methods.md", root=repo)
    assert page.startswith("## b.py\n\n### How\n\n[back](benchmarks.md)\n")
    assert page.index("## a.py") < page.index("## Measured by hand")


@dataclass(frozen=True)
class _Documented(JsonRecord):
    """A record whose fields all have docstrings."""

    steps: int
    """Steps taken."""
    note: str | None = field(default=None, metadata=WRITTEN_WHEN_SET)
    """A remark."""


@dataclass(frozen=True)
class _Undocumented(_Documented):
    """A record that adds a field without a docstring."""

    extra_field: float = 0.0


def test_a_record_table_lists_each_field_with_its_type_and_docstring():
    assert docs_hooks.record_table(_Documented).splitlines() == [
        "| key | type | meaning |", "| --- | --- | --- |", "| `steps` | `int` | Steps taken. |",
        "| `note` | `str or None` | A remark. Written only when set. |"]


def test_a_record_field_without_a_docstring_fails_the_build():
    with pytest.raises(PluginError, match=r"_Undocumented a docstring .*\['extra_field'\]"):
        docs_hooks.record_table(_Undocumented)


def test_the_records_page_lists_every_field_of_every_record():
    import dataclasses
    import importlib

    page = docs_hooks.records_markdown()
    for _, module, names in docs_hooks.RECORDS:
        for name in names:
            for record_field in dataclasses.fields(getattr(importlib.import_module(module), name)):
                assert f"| `{record_field.name}` |" in page, (name, record_field.name)
    page_source = (REPO_ROOT / "docs" / docs_hooks.RECORDS_PAGE).read_text()
    assert docs_hooks.with_records(page_source, page).count("### ") == sum(len(n) for _, _, n in docs_hooks.RECORDS)
