"""mkdocs hooks (mkdocs.yml's `hooks:`), run by `mkdocs build --strict` in `make test`:

- the configuration page's key table is generated at build time from the config dataclasses' own field
  docstrings (`rlfit.config.docs`, the source of `rlfit keys`), in place of the page's `<!-- rlfit:keys -->`
  line, so the table is written nowhere by hand and cannot go stale; a field without a docstring fails the build;
- the records page's tables are generated the same way from the docstrings of the dataclasses that summary.json,
  policy.json and plan.json's `extra` are written from (`RECORDS`), in place of its `<!-- rlfit:records -->` line;
  a field without a docstring fails the build;
- the commands page's generated part (between `rlfit.cli.reference.BEGIN` and `END`) must be what
  `rlfit.cli.reference` makes from the argument parsers: a stale one fails the build, naming
  `python tools/commands_page.py`, which rewrites it;
- the relative links of the pages mkdocs does not read (README.md, CHANGELOG.md, the benchmarks' README,
  FIGURES.md, method pages and decision records) are checked: a link to a file that does not exist, or to a heading a docs/ or
  benchmarks/ page does not have, fails the build as a broken link in docs/ does;
- the benchmark pages are the benchmarks' own files, shown in the site with their links made the site's: the
  Benchmarks page is benchmarks/README.md (the index), Current figures is benchmarks/FIGURES.md (a stale one fails
  the build, naming `python -m benchmarks figures`), Benchmark methods is every page in benchmarks/methods/ (in the
  order the index links them), Benchmark decisions is every record in benchmarks/decisions/.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from markdown.extensions.toc import slugify
from mkdocs.exceptions import PluginError

KEYS_MARKER = "<!-- rlfit:keys -->"
"""The line of docs/configuration.md that the generated key table replaces."""
KEYS_PAGE = "configuration.md"
RECORDS_MARKER = "<!-- rlfit:records -->"
"""The line of docs/records.md that the generated record tables replace."""
RECORDS_PAGE = "records.md"
RECORDS = (
    ("summary.json", "rlfit.run.summary_record", ("RunSummary", "SessionSummary", "LaneSummary")),
    ("policy/policy.json", "rlfit.deploy.policy_record",
     ("PolicyDescription", "PolicyActionSpace", "PolicyNetwork", "PolicyObservation")),
    ("plan.json's extra", "rlfit.planning.plan", ("PlanExtra",)),
)
"""(file, module, record classes) of each record on the records page, in the page's order."""
COMMANDS_PAGE = "commands.md"
ROOT = Path(__file__).resolve().parents[1]
CHECKED_OUTSIDE_DOCS = ("README.md", "CHANGELOG.md", "benchmarks/README.md", "benchmarks/FIGURES.md")
"""Files whose links the build checks (mkdocs checks docs/ itself), with every benchmarks/methods/*.md and
benchmarks/decisions/*.md."""
BENCHMARK_PAGES = {"benchmarks.md": "<!-- benchmarks:readme -->", "benchmark-figures.md": "<!-- benchmarks:figures -->",
                   "benchmark-methods.md": "<!-- benchmarks:methods -->",
                   "benchmark-decisions.md": "<!-- benchmarks:decisions -->"}
"""The docs pages made of the benchmarks' files, each with the line its generated part replaces."""
LINK = re.compile(r"\]\(([^)\s]+)\)")


def key_table() -> str:
    """The key table in Markdown (`rlfit keys --markdown`); PluginError naming the fields without a docstring."""
    from rlfit.config.docs import key_docs, markdown_table

    missing = [row.key for row in key_docs() if not row.meaning]
    if missing:
        raise PluginError(f"give these config fields a docstring (the configuration page is built from them): {missing}")
    return markdown_table()


def with_key_table(markdown: str, table: str) -> str:
    """`markdown` with its one KEYS_MARKER line replaced by `table`; PluginError unless there is exactly one."""
    if markdown.count(KEYS_MARKER) != 1:
        raise PluginError(f"docs/{KEYS_PAGE} needs exactly one '{KEYS_MARKER}' line where the key table goes")
    return markdown.replace(KEYS_MARKER, table.rstrip("\n"))


def record_table(cls: type) -> str:
    """A Markdown table of a record's own fields (a subclass's: those it adds): key, type and docstring;
    PluginError naming the fields without a docstring."""
    import dataclasses

    from rlfit.config.docs import attribute_docs

    docs = attribute_docs(cls)
    own = [field for field in dataclasses.fields(cls) if field.name in cls.__annotations__]
    missing = [field.name for field in own if not docs.get(field.name)]
    if missing:
        raise PluginError(f"give these fields of {cls.__module__}.{cls.__qualname__} a docstring (the records page is "
                          f"built from them): {missing}")
    rows = ["| key | type | meaning |", "| --- | --- | --- |"]
    for field in own:
        kind = str(field.type).replace("|", "or")
        when = " Written only when set." if field.metadata.get("written_when_set") else ""
        rows.append(f"| `{field.name}` | `{kind}` | {docs[field.name]}{when} |")
    return "\n".join(rows)


def records_markdown(records: tuple[tuple[str, str, tuple[str, ...]], ...] = RECORDS) -> str:
    """The records page's generated part: per file, each record's docstring and field table."""
    import importlib

    parts = []
    for file, module_name, names in records:
        module = importlib.import_module(module_name)
        parts.append(f"## {file}")
        for name in names:
            cls = getattr(module, name)
            base = next((b for b in cls.__bases__ if b.__module__ == cls.__module__), None)
            adds = f" The fields of `{base.__name__}`, then:" if base is not None else ""
            summary = " ".join((cls.__doc__ or "").split())
            parts += [f"### {name}", f"`{module_name}.{name}`: {summary}{adds}", record_table(cls)]
    return "\n\n".join(parts) + "\n"


def with_records(markdown: str, tables: str) -> str:
    """`markdown` with its one RECORDS_MARKER line replaced by `tables`; PluginError unless there is exactly one."""
    if markdown.count(RECORDS_MARKER) != 1:
        raise PluginError(f"docs/{RECORDS_PAGE} needs exactly one '{RECORDS_MARKER}' line where the tables go")
    return markdown.replace(RECORDS_MARKER, tables.rstrip("\n"))


def headings(path: Path) -> set[str]:
    """The anchors of `path`'s Markdown headings as the site's table of contents makes them (fenced code skipped)."""
    anchors, fenced = set(), False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} +(.+)", line)):
            anchors.add(slugify(re.sub(r"[`*]", "", match.group(1)).strip(), "-"))
    return anchors


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    """`path`'s relative links whose file does not exist under `root`, or whose anchor is no heading of a docs/
    page, each as 'file: link'."""
    broken = []
    for target in LINK.findall(path.read_text()):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue  # a web address, mail, or a heading of the same file
        file, _, anchor = target.partition("#")
        resolved = (path.parent / file).resolve()
        if not resolved.exists() or not resolved.is_relative_to(root):
            broken.append(f"{path.name}: {target}")
        elif anchor and resolved.suffix == ".md" and any(resolved.is_relative_to(root / part)
                                                          for part in ("docs", "benchmarks")) \
                and anchor not in headings(resolved):
            broken.append(f"{path.name}: {target} (no such heading)")
    return broken


def checked_outside_docs(root: Path = ROOT) -> list[Path]:
    """The files outside docs/ whose relative links the build checks."""
    return [root / name for name in CHECKED_OUTSIDE_DOCS if (root / name).exists()] + \
        sorted((root / "benchmarks" / "methods").glob("*.md")) + sorted((root / "benchmarks" / "decisions").glob("*.md"))


def on_pre_build(config, **kwargs) -> None:
    """Fails the build on a broken relative link in README.md, CHANGELOG.md or the benchmarks' pages."""
    broken = [link for path in checked_outside_docs(ROOT) for link in broken_links(path)]
    if broken:
        raise PluginError("broken links: " + "; ".join(broken))


def check_commands_page(markdown: str) -> None:
    """PluginError unless the commands page's generated part is what the parsers make now."""
    from rlfit.cli import build_parser
    from rlfit.cli.reference import commands_markdown, with_commands

    try:
        wanted = with_commands(markdown, commands_markdown(build_parser()))
    except ValueError as error:
        raise PluginError(f"docs/{COMMANDS_PAGE}: {error}") from None
    if wanted != markdown:
        raise PluginError(f"docs/{COMMANDS_PAGE} is stale (a command's flags or help changed): run "
                          "python tools/commands_page.py")


def title_anchor(path: Path) -> str:
    """The anchor of a Markdown file's first heading (a decision record's title on the decisions page)."""
    for line in path.read_text().splitlines():
        if match := re.match(r"#{1,6} +(.+)", line):
            return slugify(re.sub(r"[`*]", "", match.group(1)).strip(), "-")
    raise PluginError(f"{path.relative_to(ROOT)} has no heading")


def site_links(markdown: str, source: Path, root: Path = ROOT) -> str:
    """`markdown` from the file `source` (under benchmarks/) with its relative links made the site's: the benchmarks'
    README, FIGURES.md, method pages and decision records become their docs pages (a method page: its title's anchor
    on the methods page, or the link's own anchor, which the page keeps), docs/ pages stay links, and any other file
    (a results JSON) becomes its repository path in code, which the site does not serve."""
    bench = root / "benchmarks"

    def relink(match: re.Match) -> str:
        text, target = match.group(1), match.group(2)
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            return match.group(0)
        file, _, anchor = target.partition("#")
        resolved = (source.parent / file).resolve()
        hash_anchor = f"#{anchor}" if anchor else ""
        if resolved == bench / "README.md":
            return f"[{text}](benchmarks.md{hash_anchor})"
        if resolved == bench / "FIGURES.md":
            return f"[{text}](benchmark-figures.md{hash_anchor})"
        if resolved == bench / "methods":
            return f"[{text}](benchmark-methods.md)"
        if resolved.parent == bench / "methods" and resolved.suffix == ".md":
            return f"[{text}](benchmark-methods.md#{anchor or title_anchor(resolved)})"
        if resolved.parent == bench / "decisions" and resolved.suffix == ".md":
            page = "benchmark-decisions.md"
            return f"[{text}]({page})" if resolved.name == "README.md" else f"[{text}]({page}#{title_anchor(resolved)})"
        if resolved.is_relative_to(root / "docs"):
            return f"[{text}]({resolved.relative_to(root / 'docs').as_posix()}{hash_anchor})"
        path = resolved.relative_to(root).as_posix() if resolved.is_relative_to(root) else target
        return f"`{path}`" if text.strip("`") in (path, file, Path(file).name) else f"{text} (`{path}`)"

    return re.sub(r"\[([^\]]*)\]\(([^)\s]+)\)", relink, markdown)


def demoted(markdown: str) -> str:
    """`markdown` with every heading one level lower (a decision record's title under the decisions page's)."""
    lines, fenced = [], False
    for line in markdown.splitlines():
        fenced = not fenced if line.startswith("```") else fenced
        lines.append("#" + line if not fenced and re.match(r"#{1,5} ", line) else line)
    return "\n".join(lines) + "\n"


def method_pages(root: Path = ROOT) -> list[Path]:
    """benchmarks/methods/*.md in the order the benchmarks' README first links them, then any it does not link."""
    methods = root / "benchmarks" / "methods"
    linked = re.findall(r"\]\(methods/([\w-]+\.md)", (root / "benchmarks" / "README.md").read_text())
    order = list(dict.fromkeys(name for name in linked if (methods / name).is_file()))
    return [methods / name for name in order] + sorted(path for path in methods.glob("*.md") if path.name not in order)


def benchmark_part(uri: str, root: Path = ROOT) -> str:
    """The generated part of a benchmark docs page: the benchmarks' README, FIGURES.md (PluginError if stale), every
    method page or every decision record, with the site's links."""
    bench = root / "benchmarks"
    if uri == "benchmark-figures.md":
        if str(root) not in sys.path:
            sys.path.insert(0, str(root))
        from benchmarks.figures_page import figures_markdown

        page = bench / "FIGURES.md"
        if page.read_text() != figures_markdown():
            raise PluginError("benchmarks/FIGURES.md is stale (a results JSON or benchmarks/registry.py changed): run "
                              "python -m benchmarks figures")
        return site_links(page.read_text(), page, root)
    if uri == "benchmarks.md":
        return site_links(bench.joinpath("README.md").read_text(), bench / "README.md", root)
    if uri == "benchmark-methods.md":
        return "\n".join(site_links(demoted(path.read_text()), path, root) for path in method_pages(root))
    records = sorted(path for path in (bench / "decisions").glob("[0-9]*.md"))
    return "\n".join(site_links(demoted(path.read_text()), path, root) for path in records)


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    """The configuration page gets the key table generated from the config's docstrings, the records page its tables
    from the records' docstrings; the commands page must be up to date with the parsers; the benchmark pages get the
    benchmarks' files; others pass unchanged."""
    if page.file.src_uri in BENCHMARK_PAGES:
        marker = BENCHMARK_PAGES[page.file.src_uri]
        if markdown.count(marker) != 1:
            raise PluginError(f"docs/{page.file.src_uri} needs exactly one '{marker}' line")
        return markdown.replace(marker, benchmark_part(page.file.src_uri).rstrip("\n"))
    if page.file.src_uri == KEYS_PAGE:
        return with_key_table(markdown, key_table())
    if page.file.src_uri == RECORDS_PAGE:
        return with_records(markdown, records_markdown())
    if page.file.src_uri == COMMANDS_PAGE:
        check_commands_page(markdown)
    return markdown
