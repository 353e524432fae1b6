"""The accelerator probes: each failure falls back to the next probe with a note, never a crash."""

from __future__ import annotations

import sys
import types

import jax
import pytest

from rlfit.hardware import probe
from rlfit.hardware.probe import Accelerator, parse_meminfo, parse_nvidia_smi, probe_device
from rlfit.hardware.xla_memory import gpu_budget, read_xla_memory_settings

GIB = 1 << 30
MIB = 1 << 20
NO_XLA_VARIABLES: dict[str, str] = {}


def fake_pynvml(name="NVIDIA GeForce RTX 4070", total=12 * GIB, free=11 * GIB, capability=(8, 9), count=1):
    """A stand-in for the `pynvml` module with one GPU."""
    module = types.ModuleType("pynvml")
    module.nvmlInit = lambda: None
    module.nvmlShutdown = lambda: None
    module.nvmlDeviceGetCount = lambda: count
    module.nvmlDeviceGetHandleByIndex = lambda index: ("handle", index)
    module.nvmlDeviceGetName = lambda handle: name.encode()  # older nvidia-ml-py returns bytes
    module.nvmlDeviceGetMemoryInfo = lambda handle: types.SimpleNamespace(total=total, free=free, used=total - free)
    module.nvmlDeviceGetCudaComputeCapability = lambda handle: capability
    module.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    return module


def failing_pynvml():
    module = types.ModuleType("pynvml")

    def init():
        raise RuntimeError("NVML Shared Library Not Found")

    module.nvmlInit = init
    return module


def raise_error(error):
    def probe_fails(*args, **kwargs):
        raise error
    return probe_fails


@pytest.fixture
def no_nvidia(monkeypatch):
    """JAX sees only the CPU, NVML is missing, nvidia-smi is not on PATH."""
    monkeypatch.setattr(probe, "probe_jax", lambda: None)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    monkeypatch.setattr(probe.shutil, "which", lambda name: None)


def test_all_probes_failing_falls_back_to_the_cpu_with_a_note_each(no_nvidia, monkeypatch):
    monkeypatch.setattr(probe, "system_memory", lambda: (32 * GIB, 20 * GIB))
    info = probe_device(NO_XLA_VARIABLES)
    assert info.platform == "cpu" and info.source == "CPU"
    notes = " | ".join(info.notes)
    assert "JAX: no accelerator" in notes
    assert "NVML probe failed (ModuleNotFoundError" in notes
    assert "nvidia-smi probe failed (FileNotFoundError: nvidia-smi is not on PATH)" in notes
    assert "no GPU found" in notes
    assert info.total_bytes == 32 * GIB and info.free_bytes == 20 * GIB
    assert info.budget_bytes == 15 * GIB  # 0.75 of the available RAM


def test_system_memory_reads_this_machine():
    total, available = probe.system_memory()
    assert total > 0 and 0 < available <= total


def test_a_crashing_jax_probe_hands_over_to_nvml(monkeypatch):
    monkeypatch.setattr(jax, "devices", raise_error(RuntimeError("Unable to initialize backend 'cuda'")))
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    info = probe_device(NO_XLA_VARIABLES)
    assert info.source == "NVML"
    assert info.name == "NVIDIA GeForce RTX 4070" and info.platform == "gpu"
    assert info.total_bytes == 12 * GIB and info.free_bytes == 11 * GIB
    assert info.compute_capability == "8.9" and info.bf16 is True and info.driver == "550.54.15"
    assert info.profile is not None and info.profile.name == "RTX 4070"
    assert info.budget_bytes == int(12 * GIB * 0.75)  # JAX's default pool: 75% of the total
    assert any("JAX probe failed (RuntimeError: Unable to initialize backend 'cuda')" in n for n in info.notes)
    assert any("install the CUDA build of JAX" in n for n in info.notes)
    assert not info.jax_uses_it


def test_failing_nvml_hands_over_to_nvidia_smi(monkeypatch):
    monkeypatch.setattr(probe, "probe_jax", lambda: None)
    monkeypatch.setitem(sys.modules, "pynvml", failing_pynvml())
    monkeypatch.setattr(probe, "run_nvidia_smi", lambda: "Tesla T4, 15360, 15000, 7.5, 535.104.05\n")
    info = probe_device(NO_XLA_VARIABLES)
    assert info.source == "nvidia-smi"
    assert info.name == "Tesla T4" and info.total_bytes == 15360 * MIB and info.free_bytes == 15000 * MIB
    assert info.bf16 is False and info.compute_capability == "7.5" and info.driver == "535.104.05"
    assert any("NVML probe failed (RuntimeError: NVML Shared Library Not Found)" in n for n in info.notes)


def test_failing_nvidia_smi_falls_back_to_the_cpu(monkeypatch):
    monkeypatch.setattr(probe, "probe_jax", lambda: None)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setattr(probe, "run_nvidia_smi", raise_error(RuntimeError("NVIDIA-SMI has failed")))
    info = probe_device(NO_XLA_VARIABLES)
    assert info.platform == "cpu"
    assert any("nvidia-smi probe failed (RuntimeError: NVIDIA-SMI has failed)" in n for n in info.notes)


def test_jax_gpu_probe_uses_the_allocator_limit_and_survives_a_failing_nvml(monkeypatch):
    class FakeGpu:
        platform = "gpu"
        device_kind = "NVIDIA H200"
        compute_capability = "9.0"

        def memory_stats(self):
            return {"bytes_limit": 100 * GIB, "bytes_in_use": 2 * GIB, "peak_bytes_in_use": 2 * GIB}

    monkeypatch.setattr(jax, "devices", lambda: [FakeGpu()])
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setitem(sys.modules, "pynvml", failing_pynvml())
    info = probe_device(NO_XLA_VARIABLES)
    assert info.source == "JAX" and info.jax_uses_it
    assert info.budget_bytes == 98 * GIB  # bytes_limit - bytes_in_use
    assert info.total_bytes == 141 * 10**9  # not measured: from the H200 profile, with a note
    assert any("from the H200 profile" in n for n in info.notes)
    assert any("NVML could not add" in n for n in info.notes)


def test_unknown_gpu_uses_measured_values_only(monkeypatch):
    monkeypatch.setattr(probe, "probe_jax", lambda: None)
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(name="NVIDIA Future GPU", total=48 * GIB, capability=(10, 0)))
    info = probe_device(NO_XLA_VARIABLES)
    assert info.profile is None and info.total_bytes == 48 * GIB and info.bf16 is True
    assert any("not in rlfit's GPU table" in n for n in info.notes)


def test_unexpected_errors_in_every_probe_never_escape(monkeypatch):
    monkeypatch.setattr(probe, "probe_jax", raise_error(ValueError("odd")))
    monkeypatch.setattr(probe, "probe_nvml", raise_error(OSError("odd")))
    monkeypatch.setattr(probe, "probe_nvidia_smi", raise_error(KeyError("odd")))
    assert probe_device(NO_XLA_VARIABLES).platform == "cpu"


def test_parse_nvidia_smi_reads_mib_and_missing_fields():
    found = parse_nvidia_smi("NVIDIA A100-SXM4-80GB, 81920, 81000, 8.0, 535.1\nNVIDIA A100-SXM4-80GB, 81920, 1, 8.0, 535.1\n")
    assert found == Accelerator("gpu", "NVIDIA A100-SXM4-80GB", 2, 81920 * MIB, 81000 * MIB, "8.0", "535.1")
    old_driver = parse_nvidia_smi("Tesla V100-SXM2-16GB, 16160, 16000, [N/A], 418.67")
    assert old_driver.compute_capability is None and old_driver.total_bytes == 16160 * MIB
    assert parse_nvidia_smi("") is None
    with pytest.raises(ValueError):
        parse_nvidia_smi("garbage")


def test_parse_meminfo_in_bytes():
    fields = parse_meminfo("MemTotal:       24684096 kB\nMemFree:  1000 kB\nMemAvailable:   22679356 kB\nHugePages_Total: 0\n")
    assert fields["MemTotal"] == 24684096 * 1024 and fields["MemAvailable"] == 22679356 * 1024
    assert fields["HugePages_Total"] == 0


def test_xla_memory_settings():
    default = read_xla_memory_settings({})
    assert (default.preallocate, default.mem_fraction, default.allocator) == (True, 0.75, "default")
    new = read_xla_memory_settings({"XLA_CLIENT_MEM_FRACTION": ".5", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    assert (new.preallocate, new.mem_fraction, new.fraction_source) == (False, 0.5, "XLA_CLIENT_MEM_FRACTION")
    old = read_xla_memory_settings({"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.25"})
    assert old.mem_fraction == 0.25 and old.problems == ()
    both = read_xla_memory_settings({"XLA_CLIENT_MEM_FRACTION": "0.5", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.25"})
    assert any("JAX refuses" in p for p in both.problems)
    bad = read_xla_memory_settings({"XLA_PYTHON_CLIENT_MEM_FRACTION": "75", "XLA_PYTHON_CLIENT_ALLOCATOR": "magic"})
    assert bad.mem_fraction == 0.75 and len(bad.problems) == 2 and bad.allocator == "default"


def test_gpu_budget_follows_the_allocator():
    assert gpu_budget(16 * GIB, None, read_xla_memory_settings({}))[0] == 12 * GIB
    assert gpu_budget(16 * GIB, 4 * GIB, read_xla_memory_settings({}))[0] == 4 * GIB  # others hold the rest
    assert gpu_budget(16 * GIB, None, read_xla_memory_settings({"XLA_CLIENT_MEM_FRACTION": "0.5"}))[0] == 8 * GIB
    platform = read_xla_memory_settings({"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"})
    assert gpu_budget(16 * GIB, 15 * GIB, platform)[0] == 15 * GIB
