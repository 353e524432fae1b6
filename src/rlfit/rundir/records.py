"""Records rlfit writes as JSON (summary.json, the policy file's policy.json, plan.json's `extra`): frozen
dataclasses with a docstring under every field, written with `JsonRecord.to_json` and read back with
`JsonRecord.from_json`.

A record's JSON object has one key per field, in the fields' order, except a field marked `WRITTEN_WHEN_SET`,
whose key is left out while its value is None (an entry only some files have). A nested record is written as its
own object. Reading tolerates files of other rlfit versions: a key the record does not know is ignored, and a
field the file lacks takes its default (None for a field without one). The documentation's records page is made
from the field docstrings (tools/docs_hooks.py), as the configuration page is made from the config's.
"""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

WRITTEN_WHEN_SET = {"written_when_set": True}
"""A field's `metadata`: its key is written only while its value is not None."""

RecordT = TypeVar("RecordT", bound="JsonRecord")


class JsonRecord:
    """What a frozen dataclass record inherits: `to_json` and `from_json` (see the module's docstring)."""

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object: one key per field in order (a `WRITTEN_WHEN_SET` one only when not None),
        nested records as objects, other values copied as they are."""
        out: dict[str, Any] = {}
        for field in dataclasses.fields(self):  # type: ignore[arg-type]  # every JsonRecord is a dataclass
            value = getattr(self, field.name)
            if value is None and field.metadata.get("written_when_set"):
                continue
            out[field.name] = value.to_json() if isinstance(value, JsonRecord) else copy.deepcopy(value)
        return out

    @classmethod
    def from_json(cls: type[RecordT], data: Mapping[str, Any]) -> RecordT:
        """The record a JSON object holds: unknown keys ignored, a missing field its default (None without one),
        an object in a field whose type is a record read as that record."""
        hints = typing.get_type_hints(cls)
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):  # type: ignore[arg-type]  # every JsonRecord is a dataclass
            if field.name in data:
                value = data[field.name]
                kind = hints.get(field.name)
                is_record = isinstance(kind, type) and issubclass(kind, JsonRecord)
                values[field.name] = kind.from_json(value) if is_record and isinstance(value, Mapping) else value
            elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                values[field.name] = None
        return cls(**values)

