"""Where metrics go: a JSON-lines file, TensorBoard, the console. All share one small protocol, no JAX."""

from __future__ import annotations

import time
from typing import Any, Protocol


class Sink(Protocol):
    """Receives rows of metrics; `kind` is 'train' (one per iteration) or 'eval'."""

    def write(self, kind: str, row: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


class Sinks:
    """Fans rows out to several sinks."""

    def __init__(self, sinks: list[Sink]):
        self.sinks = sinks

    def write(self, kind: str, row: dict[str, Any]) -> None:
        """Sends `row`, stamped with the wall-clock `time` (Unix seconds), to every sink."""
        row = {**row, "time": time.time()}
        for sink in self.sinks:
            sink.write(kind, row)

    def sync(self) -> None:
        """Forces what the sinks wrote to disk where a sink can (called at every checkpoint)."""
        for sink in self.sinks:
            if hasattr(sink, "sync"):
                sink.sync()

    def rewind(self, iteration: int) -> None:
        """Forget rows past `iteration` where a sink can (after falling back to an earlier state)."""
        for sink in self.sinks:
            if hasattr(sink, "rewind"):
                sink.rewind(iteration)

    def close(self) -> None:
        """Closes every sink, then raises the first error one of them raised (a full disk, say)."""
        failures = []
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as error:  # noqa: BLE001 - the others are closed too, then it is raised
                failures.append(error)
        if failures:
            raise failures[0]
