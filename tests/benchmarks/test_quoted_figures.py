"""Figures quoted in the documentation match the results JSON they name (benchmarks/quoted_figures.py): the
repository's own quotes, and a made-up document whose JSON changes under it."""

from __future__ import annotations

import json

import pytest

from benchmarks import quoted_figures
from benchmarks.quoted_figures import Quote, stale_quotes
from tests.conftest import REPO_ROOT


def test_every_figure_the_documentation_quotes_matches_its_results_json():
    problems, checked = stale_quotes()
    assert checked >= 10, "the quotes are gone: the check would pass on nothing"
    assert problems == [], "\n".join(problems)


def test_the_documentation_quotes_the_suite_headline_through_markers():
    ppo = (REPO_ROOT / "docs" / "algorithms" / "ppo.md")
    assert any(isinstance(q, Quote) and q.keys == "comparisons.rlfit_vs_brax.headline.iqm_a.point"
               and q.file.endswith("quick_preset_2026_12_report.json") for q in quoted_figures.quotes(ppo, REPO_ROOT))


@pytest.fixture
def repo(tmp_path):
    """A repository with one results JSON and a README quoting four of its values."""
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    (tmp_path / "benchmarks" / "results" / "r.json").write_text(json.dumps(
        {"summary": {"iqm": 474.78687, "diff": -12.05, "steps": 10444800, "share": 0.4321},
         "runs": [{"final": 1.0}, {"final": 999.96}]}))
    (tmp_path / "README.md").write_text(
        "IQM 474.8<!-- figure: benchmarks/results/r.json#summary.iqm --> and a difference of\n"
        "**-12.1**<!-- figure: benchmarks/results/r.json#summary.diff --> over 10,444,800 "
        "<!-- figure: benchmarks/results/r.json#summary.steps --> steps; 43.2% <!-- figure: "
        "benchmarks/results/r.json#summary.share*100 -->, last `1000.0`<!-- figure: benchmarks/results/r.json#runs.1.final -->\n")
    return tmp_path


def test_quotes_at_their_stated_rounding_pass(repo):
    assert stale_quotes(repo) == ([], 5)


def test_a_changed_json_value_fails_the_check_and_says_what_it_is_now(repo):
    path = repo / "benchmarks" / "results" / "r.json"
    record = json.loads(path.read_text())
    record["summary"]["iqm"] = 474.74  # 474.7 at the quote's one decimal
    record["summary"]["diff"] = 12.05  # the sign flipped
    path.write_text(json.dumps(record))
    problems, checked = stale_quotes(repo)
    assert checked == 5
    assert problems == [
        "README.md:1: 474.8 quotes benchmarks/results/r.json#summary.iqm, which is now 474.7: rewrite the sentence "
        "from the JSON",
        "README.md:2: -12.1 quotes benchmarks/results/r.json#summary.diff, which is now 12.1: rewrite the sentence "
        "from the JSON"]


def test_a_missing_file_a_missing_key_and_a_marker_without_a_number_are_reported(repo):
    (repo / "docs").mkdir()
    (repo / "docs" / "page.md").write_text(
        "1.0<!-- figure: benchmarks/results/gone.json#a -->\n2.0<!-- figure: benchmarks/results/r.json#summary.nope -->\n"
        "text <!-- figure: benchmarks/results/r.json#summary.iqm -->\n")
    problems, _ = stale_quotes(repo)
    assert problems == [
        "docs/page.md:1: 1.0 quotes benchmarks/results/gone.json#a, but benchmarks/results/gone.json does not exist",
        "docs/page.md:2: 2.0 quotes benchmarks/results/r.json#summary.nope, but benchmarks/results/r.json has no "
        "summary.nope (no 'nope')",
        "docs/page.md:3: no number right before the marker <!-- figure: benchmarks/results/r.json#summary.iqm -->"]


def test_a_committed_result_changing_under_a_quote_fails_the_check(tmp_path):
    """The repository's documents against a copy of the results they quote, the suite headline's IQM moved by 0.1."""
    for document in quoted_figures.documents(REPO_ROOT):
        copy = tmp_path / document.relative_to(REPO_ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(document.read_bytes())
        for quote in quoted_figures.quotes(document, REPO_ROOT):
            if isinstance(quote, Quote) and not (tmp_path / quote.file).exists():
                (tmp_path / quote.file).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / quote.file).write_bytes((REPO_ROOT / quote.file).read_bytes())
    assert stale_quotes(tmp_path)[0] == []
    report = tmp_path / "benchmarks" / "results" / "quick_preset_2026_12_report.json"
    record = json.loads(report.read_text())
    headline = record["comparisons"]["rlfit_vs_brax"]["headline"]["iqm_a"]
    headline["point"] += 0.1
    report.write_text(json.dumps(record))
    quoting = [quote for document in quoted_figures.documents(tmp_path)
               for quote in quoted_figures.quotes(document, tmp_path)
               if isinstance(quote, Quote) and quote.keys == "comparisons.rlfit_vs_brax.headline.iqm_a.point"]
    problems, _ = stale_quotes(tmp_path)
    assert quoting and len(problems) == len(quoting), (quoting, problems)  # every quote of it, and nothing else
    assert all(f"rlfit_vs_brax.headline.iqm_a.point, which is now {headline['point']:.3f}" in problem
               for problem in problems), problems


def test_a_marker_inside_a_fenced_code_block_is_an_example_not_a_quote(repo):
    (repo / "docs").mkdir()
    (repo / "docs" / "how.md").write_text("```markdown\n1.0<!-- figure: benchmarks/results/gone.json#a -->\n```\n"
                                          "474.8<!-- figure: benchmarks/results/r.json#summary.iqm -->\n")
    assert stale_quotes(repo) == ([], 6)
