"""metrics.jsonl: whole lines, a torn last line told apart from a damaged middle line, atomic truncation."""

from __future__ import annotations

import json

from rlfit.sinks.jsonl import JsonlSink, parse_metrics, read_metrics, truncate_after


def rows(n: int) -> list[dict]:
    return [{"kind": "train", "iteration": i, "env_steps": 10 * i} for i in range(1, n + 1)]


def text(items: list[dict]) -> str:
    return "".join(json.dumps(row) + "\n" for row in items)


def test_each_row_is_one_whole_line_even_when_long(tmp_path):
    path = tmp_path / "metrics.jsonl"
    sink = JsonlSink(path)
    long_row = {"iteration": 1, "env_steps": 1, "note": "x" * 100_000}  # longer than any write buffer
    sink.write("train", long_row)
    sink.write("eval", {"iteration": 1, "env_steps": 1, "eval/episode_reward": 2.5})
    sink.sync()
    sink.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["kind"] for line in lines] == ["train", "eval"]
    assert json.loads(lines[0])["note"] == long_row["note"]


def test_torn_last_line_is_not_damage_but_a_middle_line_is(tmp_path):
    torn = parse_metrics((text(rows(3)) + '{"kind": "train", "itera').encode())
    assert [r["iteration"] for r in torn.rows] == [1, 2, 3]
    assert torn.torn_tail and torn.damaged == []

    lines = text(rows(5)).splitlines(keepends=True)
    lines[1] = "garbage\n"
    damaged = parse_metrics("".join(lines).encode())
    assert damaged.damaged == [2] and not damaged.torn_tail
    assert [r["iteration"] for r in damaged.rows] == [1, 3, 4, 5]
    assert damaged.damaged_before(3) == [2]  # row 3 follows it: it lies among the rows kept at iteration 3
    assert damaged.damaged_before(1) == []  # past iteration 1: dropped with the rest on resume anyway

    assert read_metrics(tmp_path / "absent.jsonl").rows == []


def test_truncate_after_keeps_rows_up_to_the_iteration(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text(text(rows(6)) + '{"torn')
    truncate_after(path, 4)
    assert path.read_text() == text(rows(4))
    assert not list(tmp_path.glob(".*tmp*"))  # written through a temporary file, none left behind
