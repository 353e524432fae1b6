"""The NVML sampler: means and maxima per GPU between takes, a background thread that stops, and the values in
every train row of metrics.jsonl (with a stand-in for NVML: this machine has no GPU)."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from rlfit.hardware.utilization import UtilizationSampler


class FakeNVML:
    """Two GPUs; each read returns the next scripted (utilization %, memory used bytes) of that GPU."""

    def __init__(self, script):
        self.script = {i: list(values) for i, values in script.items()}
        self.reads = {i: 0 for i in script}
        self.shut_down = False

    def nvmlDeviceGetCount(self):
        return len(self.script)

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def _next(self, handle):
        values = self.script[handle]
        value = values[min(self.reads[handle], len(values) - 1)]
        return value

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=self._next(handle)[0])

    def nvmlDeviceGetMemoryInfo(self, handle):
        value = self._next(handle)[1]
        self.reads[handle] += 1
        return SimpleNamespace(used=value)

    def nvmlShutdown(self):
        self.shut_down = True


def test_take_gives_the_mean_utilization_and_the_peak_memory_since_the_last_take():
    nvml = FakeNVML({0: [(10, 100), (30, 300), (50, 200)], 1: [(100, 7), (0, 9), (20, 8)]})
    sampler = UtilizationSampler(nvml)
    for _ in range(3):
        sampler.sample()
    assert sampler.take() == {"device/0/util": 30.0, "device/0/memory_bytes": 300,
                              "device/1/util": 40.0, "device/1/memory_bytes": 9}
    assert sampler.take() == {}  # nothing sampled since


def test_no_sampler_on_a_cpu():
    assert UtilizationSampler.for_backend("cpu") is None


def test_the_thread_samples_and_stops():
    nvml = FakeNVML({0: [(60, 1)]})
    sampler = UtilizationSampler(nvml, interval_s=0.01)
    sampler.start()
    deadline = time.monotonic() + 10
    row = {}
    while not row and time.monotonic() < deadline:
        time.sleep(0.05)
        row = sampler.take()
    sampler.stop()
    assert row == {"device/0/util": 60.0, "device/0/memory_bytes": 1}
    assert not sampler._thread.is_alive() and nvml.shut_down


def test_train_rows_carry_the_samples(monkeypatch, tmp_path):
    import rlfit
    from tests.conftest import TOY_ENV, TOY_TRAIN_OVERRIDES

    nvml = FakeNVML({0: [(75, 123_456)]})
    monkeypatch.setattr(UtilizationSampler, "for_backend",
                        classmethod(lambda cls, backend, interval_s=0.0: cls(nvml, interval_s=0.001)))
    overrides = [o for o in TOY_TRAIN_OVERRIDES if not o.startswith("run.num_timesteps")] + ["run.num_timesteps=7680"]
    rlfit.train(TOY_ENV, "smoke", overrides=overrides, run_dir=tmp_path / "run", quiet=True)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["kind"] == "train"]
    assert len(train) == 3
    sampled = [r for r in train if "device/0/util" in r]
    assert sampled, "the sampler ran during training"
    for row in sampled:
        assert row["device/0/util"] == pytest.approx(75.0) and row["device/0/memory_bytes"] == 123_456
    assert nvml.shut_down
