"""Rewrites the generated part of docs/commands.md from the command line's parsers (`rlfit.cli.reference`):

    python tools/commands_page.py          # write it
    python tools/commands_page.py --check  # exit 1 if it is stale (what `mkdocs build --strict` also checks)

Run it after changing a command's flags or help; the hand-written text around the markers is kept.
"""

from __future__ import annotations

import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "commands.md"


def generated_page(page: str) -> str:
    """docs/commands.md's text with its generated part made from the parsers of rlfit's own algorithms."""
    from rlfit.cli import build_parser
    from rlfit.cli.reference import commands_markdown, with_commands

    return with_commands(page, commands_markdown(build_parser()))


def main(argv: list[str]) -> int:
    current = PAGE.read_text()
    wanted = generated_page(current)
    if "--check" in argv:
        if wanted != current:
            print(f"{PAGE} is stale: run python tools/commands_page.py", file=sys.stderr)
            return 1
        return 0
    if wanted != current:
        PAGE.write_text(wanted)
        print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
