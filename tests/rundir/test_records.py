"""`rlfit.rundir.records`: a record's JSON object (keys in field order, a WRITTEN_WHEN_SET key only when set, nested
records as objects) and reading files of other versions (unknown keys ignored, missing fields their defaults)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from rlfit.rundir.records import WRITTEN_WHEN_SET, JsonRecord


@dataclass(frozen=True)
class Inner(JsonRecord):
    """A nested record."""

    size: int
    """A size."""


@dataclass(frozen=True)
class Outer(JsonRecord):
    """A record with a nested one and an optional key."""

    name: str
    """A name."""
    inner: Inner
    """The nested record."""
    rows: list[int]
    """Some numbers."""
    note: str | None = field(default=None, metadata=WRITTEN_WHEN_SET)
    """Written only when set."""
    reward: float | None = None
    """Always written, null or not."""
    count: int = 7
    """A default other than None."""


def test_to_json_writes_the_fields_in_order_with_nested_records_as_objects():
    record = Outer("a", Inner(3), [1, 2])
    assert json.dumps(record.to_json()) == '{"name": "a", "inner": {"size": 3}, "rows": [1, 2], "reward": null, "count": 7}'
    assert list(Outer("a", Inner(3), [], note="n").to_json()) == ["name", "inner", "rows", "note", "reward", "count"]


def test_to_json_copies_values_so_the_object_does_not_share_the_record_s_lists():
    rows = [1, 2]
    written = Outer("a", Inner(3), rows).to_json()
    rows.append(3)
    assert written["rows"] == [1, 2]


def test_from_json_reads_back_what_to_json_wrote():
    record = Outer("a", Inner(3), [1, 2], note="n", reward=0.5, count=2)
    assert Outer.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_from_json_ignores_unknown_keys_and_gives_missing_fields_their_defaults_or_none():
    older = {"name": "a", "inner": {"size": 3, "added_later": True}, "dropped_since": 1}
    assert Outer.from_json(older) == Outer("a", Inner(3), None, note=None, reward=None, count=7)  # type: ignore[arg-type]
