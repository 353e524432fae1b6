"""Where metrics go: a JSON-lines file, TensorBoard, the console. All share one small protocol, no JAX."""

from __future__ import annotations

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
        for sink in self.sinks:
            sink.write(kind, row)

    def rewind(self, iteration: int) -> None:
        """Forget rows past `iteration` where a sink can (after falling back to an earlier state)."""
        for sink in self.sinks:
            if hasattr(sink, "rewind"):
                sink.rewind(iteration)

    def close(self) -> None:
        for sink in self.sinks:
            sink.close()
