"""The documentation's links: `mkdocs build --strict` (in `make test`) checks docs/ itself; tools/docs_hooks.py
checks the links of README.md and CHANGELOG.md, which mkdocs does not read, and fails the build on a broken one."""

from __future__ import annotations

import sys

import pytest
from mkdocs.exceptions import PluginError

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
                   "benchmarks/README.md", "CHANGELOG.md"):
        assert f"]({target}" in text, target
    assert "make quickstart" in text and "make test" in text
