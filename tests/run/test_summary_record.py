"""summary.json is a `SessionSummary`: a real run's file has exactly the record's fields, in order, and reads back
into the record and out again unchanged; a summary of another rlfit version still reads (and resumes)."""

from __future__ import annotations

import dataclasses
import json

from rlfit.run.resume import summary_written
from rlfit.run.summary_record import LaneSummary, RunSummary, SessionSummary, extended


def test_a_real_run_s_summary_has_exactly_the_record_s_fields_and_round_trips(toy_run):
    result = toy_run(0)
    written = json.loads(result.run_dir.summary.read_text())
    assert list(written) == [field.name for field in dataclasses.fields(SessionSummary)]
    record = SessionSummary.from_json(written)
    assert record.to_json() == written == result.summary
    assert isinstance(result.record, SessionSummary) and result.record.to_json() == written  # typed until written
    assert record.iterations == 32 and record.env_steps == 81920 and record.stop_grace is not None


def test_a_lane_s_summary_adds_seed_group_and_no_stop_grace(toy_run):
    session = SessionSummary.from_json(toy_run(0).summary)
    base = RunSummary(**{field.name: getattr(session, field.name) for field in dataclasses.fields(RunSummary)})
    lane = extended(base, LaneSummary, seed_group={"seeds": [0, 1]}).to_json()
    assert list(lane) == [field.name for field in dataclasses.fields(RunSummary)] + ["seed_group"]
    assert {key: lane[key] for key in lane if key != "seed_group"} == {
        key: value for key, value in session.to_json().items() if key != "stop_grace"}


def test_an_older_or_newer_summary_reads_with_missing_fields_none_and_unknown_keys_ignored(toy_run, tmp_path):
    result = toy_run(0)
    other = json.loads(result.run_dir.summary.read_text())
    del other["compile_wait_s"], other["stop_grace"]
    other["added_by_a_newer_rlfit"] = 1
    record = SessionSummary.from_json(other)
    assert record.compile_wait_s is None and record.stop_grace is None and record.iterations == 32
    assert "added_by_a_newer_rlfit" not in record.to_json()
    result.run_dir.summary.write_text(json.dumps(other))
    try:
        assert summary_written(result.run_dir, 32) and not summary_written(result.run_dir, 31)
    finally:
        result.run_dir.summary.write_text(json.dumps(result.summary))
