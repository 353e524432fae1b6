"""GPU utilization and memory while training, sampled with NVML on a background thread (no sync in the step).

    sampler = UtilizationSampler.for_backend(jax.default_backend())   # None on a CPU, or without NVML
    sampler.start(); ...; row.update(sampler.take()); ...; sampler.stop()

`take()` gives, per GPU i since the previous take: `device/<i>/util` (mean of the samples' GPU utilization,
percent: the share of time a kernel ran) and `device/<i>/memory_bytes` (the largest memory in use seen, bytes,
every process on the GPU included). Low utilization with a busy CPU means the run is host- or
simulator-bound, not learner-bound: what the guides tell users to watch `nvidia-smi` for.
"""

from __future__ import annotations

import threading
from typing import Any

DEFAULT_INTERVAL_S = 0.5


class UtilizationSampler:
    """Samples every GPU NVML sees each `interval_s` seconds; `nvml` is the pynvml module (or a stand-in)."""

    def __init__(self, nvml: Any, interval_s: float = DEFAULT_INTERVAL_S):
        self.nvml = nvml
        self.interval_s = interval_s
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
        self._lock = threading.Lock()
        self._util: list[list[float]] = [[] for _ in self.handles]
        self._memory: list[int] = [0 for _ in self.handles]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def for_backend(cls, backend: str, interval_s: float = DEFAULT_INTERVAL_S) -> UtilizationSampler | None:
        """A sampler when JAX computes on a GPU and NVML answers, else None (nothing to sample)."""
        if backend != "gpu":
            return None
        try:
            import pynvml

            pynvml.nvmlInit()
            return cls(pynvml, interval_s)
        except Exception:  # noqa: BLE001 - no NVML (a ROCm GPU, a container without the library): no sampling
            return None

    def sample(self) -> None:
        """Reads every GPU once (the thread calls it; tests may too)."""
        readings = [(float(self.nvml.nvmlDeviceGetUtilizationRates(h).gpu),
                     int(self.nvml.nvmlDeviceGetMemoryInfo(h).used)) for h in self.handles]
        with self._lock:
            for i, (util, used) in enumerate(readings):
                self._util[i].append(util)
                self._memory[i] = max(self._memory[i], used)

    def take(self) -> dict[str, float]:
        """The means and maxima since the previous take (no entry for a GPU without samples), then resets."""
        with self._lock:
            row: dict[str, float] = {}
            for i, samples in enumerate(self._util):
                if samples:
                    row[f"device/{i}/util"] = sum(samples) / len(samples)
                    row[f"device/{i}/memory_bytes"] = self._memory[i]
            self._util = [[] for _ in self.handles]
            self._memory = [0 for _ in self.handles]
        return row

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="rlfit-nvml-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.interval_s + 1)
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - shutting down is best effort
            pass

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a failing read ends sampling, never the run
                return
