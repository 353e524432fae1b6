"""One exit code, one meaning, for every command: the codes are named once (`rlfit.exit_codes`), every error that
carries a code and every command that returns one uses those names, and the table of docs/guarantees.md ("Exit
codes") lists exactly them, each in one row. Before, 3 meant both "training became non-finite" and "an
experiment had a trial that failed"."""

from __future__ import annotations

import re
import signal

from rlfit import exit_codes
from tests.conftest import REPO_ROOT


def documented_codes() -> list[tuple[list[int], str]]:
    """The rows of docs/guarantees.md's exit-code table: (the codes of the row's first cell, its meaning)."""
    page = (REPO_ROOT / "docs" / "guarantees.md").read_text()
    section = page[page.index("## Exit codes"):]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        if len(cells) == 2 and (codes := [int(code) for code in re.findall(r"`(\d+)`", cells[0])]):
            rows.append((codes, cells[1].strip()))
    return rows


def test_every_code_is_documented_once_and_only_the_codes_rlfit_uses():
    documented = [code for codes, _ in documented_codes() for code in codes]
    assert len(documented) == len(set(documented)), f"a code in two rows: {documented}"
    assert sorted(documented) == sorted(exit_codes.exit_codes().values())


def test_each_code_has_one_name():
    named = exit_codes.exit_codes()
    assert len(set(named.values())) == len(named), named
    assert exit_codes.NON_FINITE != exit_codes.TRIALS_FAILED


def test_the_rows_say_what_the_names_say():
    meaning = {code: text for codes, text in documented_codes() for code in codes}
    assert "non-finite" in meaning[exit_codes.NON_FINITE] and "trial" not in meaning[exit_codes.NON_FINITE]
    assert "trial" in meaning[exit_codes.TRIALS_FAILED]
    assert "bad input" in meaning[exit_codes.BAD_INPUT]
    assert "could not be written" in meaning[exit_codes.WRITE_FAILED]
    assert "out of device memory" in meaning[exit_codes.OUT_OF_MEMORY]
    assert "doctor" in meaning[exit_codes.CHECK_FAILED]
    assert "SIGINT / SIGTERM" in meaning[exit_codes.INTERRUPTED] == meaning[exit_codes.TERMINATED]


def test_the_errors_and_commands_carry_the_named_codes():
    from rlfit.errors import UserError
    from rlfit.planning.out_of_memory import OutOfMemory
    from rlfit.run.loop import EXIT_NON_FINITE, NonFiniteError
    from rlfit.run.signals import EXIT_CODES
    from rlfit.rundir.write_failures import WriteFailed

    assert UserError.exit_code == exit_codes.BAD_INPUT
    assert WriteFailed.exit_code == exit_codes.WRITE_FAILED
    assert OutOfMemory.exit_code == exit_codes.OUT_OF_MEMORY
    assert NonFiniteError.exit_code == EXIT_NON_FINITE == exit_codes.NON_FINITE
    assert EXIT_CODES == {signal.SIGINT: exit_codes.INTERRUPTED, signal.SIGTERM: exit_codes.TERMINATED}
    assert (exit_codes.INTERRUPTED, exit_codes.TERMINATED, exit_codes.BROKEN_PIPE) == (
        128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + signal.SIGPIPE)


def test_no_command_returns_a_bare_number():
    """The commands name their codes: a `return 3` or `exit_code = 3` in rlfit.cli would be a second meaning
    waiting to happen."""
    bare = re.compile(r"\b(return|exit_code\s*=|EXIT_\w+\s*=)\s*[1-9]\d*\b")
    offenders = [f"{path.name}:{number}" for path in sorted((REPO_ROOT / "src" / "rlfit" / "cli").glob("*.py"))
                 for number, line in enumerate(path.read_text().splitlines(), 1) if bare.search(line)]
    assert offenders == []
