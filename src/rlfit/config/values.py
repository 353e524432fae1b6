"""Typed config values: YAML/--set input turned into the type a config field declares, and read-only mappings.

Pure Python; `to_type` raises a one-line UserError naming the key and the type it expects. A float key takes
finite numbers only: `.inf`, `-.inf`, `.nan` (YAML), `inf`, `nan`, `Infinity` or `1e999` (Python's float) would
reach training as NaN.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from rlfit.errors import UserError


class FrozenDict(dict):
    """A read-only dict, so a frozen config stays frozen all the way down (still copies, pickles and dumps)."""

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("config mappings are read-only; use Config.replace")

    __setitem__ = __delitem__ = __ior__ = _read_only  # type: ignore[assignment]
    clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]

    def __reduce__(self):
        return (FrozenDict, (dict(self),))

    def __deepcopy__(self, memo: dict) -> FrozenDict:
        import copy

        return FrozenDict(copy.deepcopy(dict(self), memo))


def to_type(name: str, hint: Any, value: Any) -> Any:
    """`value` (from YAML or --set) as the type `hint` declares for the key `name`, or a one-line UserError."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):  # `float | None`
        if value is None:
            return None
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        return to_type(name, inner, value)
    bad = UserError(f"{name} must be {_type_name(hint)}, got {value!r}")
    if origin is tuple:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise bad
        return tuple(to_type(name, typing.get_args(hint)[0], v) for v in value)
    if origin in (Mapping, dict) or hint is Mapping or (origin is not None and origin.__name__ == "Mapping"):
        if value is None:
            return FrozenDict()
        if not isinstance(value, Mapping):
            raise bad
        return FrozenDict(value)
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise bad
    written = value
    if isinstance(value, str) and hint in (int, float):
        value = _number(value)  # YAML 1.1 reads '3e-4' as a string
    if hint is int:
        if isinstance(value, bool):
            raise bad
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int):
            return value
        raise bad
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        return finite_float(name, value, written)
    if hint is str:
        if isinstance(value, (dict, list)):
            raise bad
        if isinstance(value, bool):  # YAML 1.1 reads off/no/false (on/yes/true) as a boolean
            return "on" if value else "off"
        return "" if value is None else str(value)
    return value


def finite_float(name: str, value: int | float, written: Any = None) -> float:
    """`value` as a float, or a one-line UserError naming the key `name` when it is infinite, NaN or too large
    for a float (an integer of 400 digits); the message shows `written` (what the user wrote), when given."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        shown = _shown(value if written is None else written)
        raise UserError(f"{name} must be a finite number, got {shown}; give a number such as 0.5 or 1e-3")
    return number


def _shown(value: Any) -> str:
    if isinstance(value, int) and abs(value) > 10**20:
        return f"an integer of {len(str(abs(value)))} digits"
    return str(value)


def _number(text: str) -> Any:
    try:
        return int(text.replace("_", ""))
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _type_name(hint: Any) -> str:
    if typing.get_origin(hint) is tuple:
        return "a list of integers"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(hint, "a mapping")


def plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([hms])")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str, name: str = "duration") -> float | None:
    """Seconds in '11h30m', '20m', '90s', '1.5h' (None for an empty string); UserError for anything else."""
    text = text.strip().lower()
    if not text:
        return None
    parts = _DURATION.findall(text)
    if not parts or _DURATION.sub("", text).strip():
        raise UserError(f"{name} must be a duration such as 20m, 11h30m or 90s, got '{text}'")
    seconds = sum(float(value) * _UNIT_SECONDS[unit] for value, unit in parts)
    if seconds <= 0:
        raise UserError(f"{name} must be longer than 0, got '{text}'")
    return seconds


def parse_reward(text: str, name: str = "reward") -> float | None:
    """The number in `text` (None for an empty string); UserError when it is not a finite number."""
    text = str(text).strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UserError(f"{name} must be a number (or empty for none), got '{text}'")
    return value
