"""Typed config values: YAML/--set input turned into the type a config field declares, and read-only mappings.

Pure Python; `to_type` raises a one-line UserError naming the key and the type it expects.
"""

from __future__ import annotations

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
    origin = typing.get_origin(hint)
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
        return float(value)
    if hint is str:
        if isinstance(value, (dict, list)):
            raise bad
        return "" if value is None else str(value)
    return value


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
