"""mkdocs hooks (mkdocs.yml's `hooks:`), run by `mkdocs build --strict` in `make test`:

- the configuration page's key table is generated at build time from the config dataclasses' own field
  docstrings (`rlfit.config.docs`, the source of `rlfit keys`), in place of the page's `<!-- rlfit:keys -->`
  line, so the table is written nowhere by hand and cannot go stale; a field without a docstring fails the build;
- the commands page's generated part (between `rlfit.cli.reference.BEGIN` and `END`) must be what
  `rlfit.cli.reference` makes from the argument parsers: a stale one fails the build, naming
  `python tools/commands_page.py`, which rewrites it;
- the relative links of the pages mkdocs does not read (README.md, CHANGELOG.md) are checked: a link to a file
  that does not exist, or to a heading a docs/ page does not have, fails the build as a broken link in docs/ does.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown.extensions.toc import slugify
from mkdocs.exceptions import PluginError

KEYS_MARKER = "<!-- rlfit:keys -->"
"""The line of docs/configuration.md that the generated key table replaces."""
KEYS_PAGE = "configuration.md"
COMMANDS_PAGE = "commands.md"
ROOT = Path(__file__).resolve().parents[1]
CHECKED_OUTSIDE_DOCS = ("README.md", "CHANGELOG.md")
"""Files at the repository's root whose links the build checks (mkdocs checks docs/ itself)."""
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
        elif anchor and resolved.suffix == ".md" and resolved.parent.is_relative_to(root / "docs") \
                and anchor not in headings(resolved):
            broken.append(f"{path.name}: {target} (no such heading)")
    return broken


def on_pre_build(config, **kwargs) -> None:
    """Fails the build on a broken relative link in README.md or CHANGELOG.md."""
    broken = [link for name in CHECKED_OUTSIDE_DOCS for link in broken_links(ROOT / name)]
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


def on_page_markdown(markdown: str, page, config, files, **kwargs) -> str:
    """The configuration page gets the key table generated from the config's docstrings; the commands page must be
    up to date with the parsers; others pass unchanged."""
    if page.file.src_uri == KEYS_PAGE:
        return with_key_table(markdown, key_table())
    if page.file.src_uri == COMMANDS_PAGE:
        check_commands_page(markdown)
    return markdown
