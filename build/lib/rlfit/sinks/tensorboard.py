"""TensorBoard event files under `tb/`, one scalar per numeric metric, x-axis = env steps.

metrics.jsonl is the record; TensorBoard is a view of it. Events are written synchronously (tensorboardX's
protos and record framing, without its background queue) and handed to the OS after every row, so a kill -9
loses at most the row being written; they are forced to disk at every checkpoint. Whenever a run directory
is opened again (resume, or a rewind after an out-of-memory back-off) `tb/` is rebuilt from metrics.jsonl,
so both agree row for row after any sequence of kills. The rebuild is written aside and swapped in whole.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from rlfit.rundir.atomic import swap_into_place
from rlfit.sinks.jsonl import read_rows
from rlfit.rundir.write_failures import naming

SKIP = {"iteration", "env_steps", "wall_s", "time", "kind"}


def scalars(kind: str, row: dict[str, Any]) -> Iterable[tuple[str, float]]:
    """The (tag, value) pairs TensorBoard shows for one metrics row."""
    for name, value in row.items():
        if name in SKIP or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        yield (name if "/" in name else f"{kind}/{name}"), value


class TensorBoardSink:
    """Writes each row's numbers as TensorBoard scalars (rebuilt from metrics.jsonl when reopened)."""

    def __init__(self, directory: Path, metrics_path: Path):
        self.directory = directory
        self.metrics_path = metrics_path
        rows = read_rows(metrics_path)
        if directory.exists() or rows:
            rebuild(directory, rows)
        self.writer = EventFile(directory, "live")

    def write(self, kind: str, row: dict[str, Any]) -> None:
        _add_row(self.writer, kind, row)
        self.writer.flush()

    def sync(self) -> None:
        self.writer.sync()

    def rewind(self, iteration: int) -> None:
        """Drops the events past `iteration` by rebuilding from metrics.jsonl's rows up to it."""
        self.writer.close()
        rebuild(self.directory, [r for r in read_rows(self.metrics_path) if r.get("iteration", 0) <= iteration])
        self.writer = EventFile(self.directory, "live")

    def close(self) -> None:
        self.writer.close()


def rebuild(directory: Path, rows: list[dict[str, Any]]) -> None:
    """Replaces `directory` with event files holding exactly `rows` (metrics.jsonl rows with their 'kind')."""
    staging = directory.with_name(f".{directory.name}.rebuild")
    shutil.rmtree(staging, ignore_errors=True)
    try:
        writer = EventFile(staging, "rebuilt")
        try:
            for row in rows:
                _add_row(writer, row.get("kind", "train"), row)
            writer.sync()
        finally:
            writer.close()
        swap_into_place(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # a failed write (a full disk) leaves the old tb/ alone
        raise


class EventFile:
    """One TensorBoard event file, written synchronously (a TFRecord of `Event` protos)."""

    def __init__(self, directory: Path, label: str):
        from tensorboardX.proto.event_pb2 import Event

        directory.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.{os.getpid()}.{label}"
        self.path = directory / name
        self.file = open(self.path, "ab")
        self._write(Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

    def add_scalar(self, tag: str, value: float, step: int, walltime: float | None = None) -> None:
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary

        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value))])
        self._write(Event(wall_time=walltime or time.time(), step=step, summary=summary))

    def flush(self) -> None:
        """Hands the buffered events to the OS (they survive the process being killed)."""
        with naming(self.path):
            self.file.flush()

    def sync(self) -> None:
        """Forces the events to disk (they survive the machine losing power)."""
        with naming(self.path):
            self.file.flush()
            os.fsync(self.file.fileno())

    def close(self) -> None:
        with naming(self.path):
            self.file.close()

    def _write(self, event) -> None:
        from tensorboardX.record_writer import masked_crc32c

        data = event.SerializeToString()
        header = struct.pack("Q", len(data))
        with naming(self.path):
            self.file.write(header + struct.pack("I", masked_crc32c(header)) + data
                            + struct.pack("I", masked_crc32c(data)))


def _add_row(writer: EventFile, kind: str, row: dict[str, Any]) -> None:
    step = int(row["env_steps"])
    for tag, value in scalars(kind, row):
        writer.add_scalar(tag, value, step, walltime=row.get("time"))
