"""Errors that are the user's to fix: shown as one line, exit code 2, never a traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from rlfit.exit_codes import BAD_INPUT


class UserError(Exception):
    """A problem with the user's input (config, arguments, files); the message says how to fix it."""

    exit_code = BAD_INPUT


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Returns ' (did you mean X?)' for the closest of `choices`, or '' when none is close."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""
