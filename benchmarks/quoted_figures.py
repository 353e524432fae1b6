"""Figures quoted in prose, checked against the results JSON they come from (issue 62, item 6).

A document quotes a figure by writing the number and, right after it, a marker naming the JSON and the value:

    rlfit's IQM 474.8<!-- figure: benchmarks/results/suite_8ep_brax.json#summary.final_reward.rlfit.iqm -->

(Inside a fenced code block a marker is an example, not checked.) The path is from the repository root; after `#`
the keys from the JSON's top, dot-separated (a list index is a number); `*1000` (or any factor) after the keys
scales the value first. The quoted number sets the rounding: the JSON value written with as many decimals as the
quote must read the same ("474.8" matches 474.78687; a leading `+`, thousands commas, `**` bold, backticks or a `%`
between the number and the marker are allowed). The marker is an HTML comment: neither GitHub nor mkdocs shows it.
tests/benchmarks/test_quoted_figures.py runs `stale_quotes` over every Markdown file of the repository (QUOTING), so
`make test` fails when a results file changes under a quote.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

REPO = Path(__file__).resolve().parent.parent
QUOTING = ("README.md", "CHANGELOG.md", "docs", "benchmarks", "examples")
"""The files and folders (every *.md below them, hidden folders and results/tmp left out) whose quotes are checked."""
MARKER = re.compile(r"<!--\s*figure:\s*(?P<file>[^#\s]+)#(?P<keys>[^\s*]+)(?:\*(?P<scale>[0-9.eE+-]+))?\s*-->")
NUMBER = re.compile(r"(?P<number>[+\-\u2212]?\d[\d,]*(?:\.\d+)?)[*`%\s]*$")
"""The number a marker quotes: the last one before it, with only bold, code, percent or spaces between."""


class Quote(NamedTuple):
    """One quoted figure: where it stands, the text quoted and the value it names."""

    document: str
    line: int
    quoted: str
    file: str
    keys: str
    scale: float


def quotes(document: Path, root: Path = REPO) -> list[Quote | str]:
    """Every marker of `document` outside fenced code blocks: a Quote, or a problem (a marker with no number right
    before it) as text."""
    found: list[Quote | str] = []
    name = document.relative_to(root).as_posix() if document.is_relative_to(root) else str(document)
    fenced = False
    for number, line in enumerate(document.read_text().splitlines(), start=1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if fenced:  # an example of the syntax, not a quote
            continue
        for marker in MARKER.finditer(line):
            before = NUMBER.search(line[:marker.start()])
            if before is None:
                found.append(f"{name}:{number}: no number right before the marker {marker.group(0)}")
                continue
            found.append(Quote(name, number, before.group("number"), marker.group("file"), marker.group("keys"),
                               float(marker.group("scale") or 1.0)))
    return found


def resolve(quote: Quote, root: Path = REPO) -> Any:
    """The value the quote names, or raises LookupError with what is missing."""
    path = root / quote.file
    if not path.is_file():
        raise LookupError(f"{quote.file} does not exist")
    value: Any = json.loads(path.read_text())
    for key in quote.keys.split("."):
        if isinstance(value, list) and key.lstrip("-").isdigit() and -len(value) <= int(key) < len(value):
            value = value[int(key)]
        elif isinstance(value, dict) and key in value:
            value = value[key]
        else:
            raise LookupError(f"{quote.file} has no {quote.keys} (no {key!r})")
    return value


def written_as(value: float, quoted: str) -> str:
    """`value` written with the quote's decimals, without sign where it rounds to zero (the form compared)."""
    decimals = len(quoted.split(".")[1]) if "." in quoted else 0
    text = f"{value:.{decimals}f}"
    return text.lstrip("-") if float(text) == 0 else text


def problem(quote: Quote, root: Path = REPO) -> str | None:
    """Why `quote` no longer matches its JSON, or None where it does."""
    where = f"{quote.document}:{quote.line}: {quote.quoted} quotes {quote.file}#{quote.keys}"
    try:
        value = resolve(quote, root)
    except LookupError as error:
        return f"{where}, but {error}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{where}, which is {value!r}, not a number"
    quoted = quote.quoted.replace(",", "").replace("\u2212", "-").lstrip("+")
    expected = written_as(value * quote.scale, quoted)
    if quoted.lstrip("-") == expected.lstrip("-") and (quoted.startswith("-") == expected.startswith("-")):
        return None
    return f"{where}, which is now {expected}: rewrite the sentence from the JSON"


def documents(root: Path = REPO) -> list[Path]:
    """Every Markdown file QUOTING names (folders searched whole), sorted."""
    found: set[Path] = set()
    for name in QUOTING:
        path = root / name
        candidates = [path] if path.is_file() else path.rglob("*.md") if path.is_dir() else []
        found |= {p for p in candidates if not any(part.startswith(".") or part == "tmp"
                                                   for part in p.relative_to(root).parts)}
    return sorted(found)


def stale_quotes(root: Path = REPO) -> tuple[list[str], int]:
    """Every quote under `root` that no longer matches its JSON (one line each, with the fix), and how many quotes
    were checked."""
    problems, checked = [], 0
    for document in documents(root):
        for quote in quotes(document, root):
            if isinstance(quote, str):
                problems.append(quote)
                continue
            checked += 1
            found = problem(quote, root)
            if found:
                problems.append(found)
    return problems, checked
