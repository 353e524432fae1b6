"""Find the accelerator: JAX first, then NVML, then `nvidia-smi`, then the CPU.

Each probe that fails (library missing, driver broken, no device) adds a note and hands over to the next;
`probe_device` never raises. The result is a frozen `DeviceInfo`, including the XLA memory settings in
effect and the device-memory budget they leave a JAX process (`budget_bytes`).
"""

from __future__ import annotations

import os
import platform as host_platform
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from rlfit.hardware.profiles import GpuProfile, bf16_from_compute_capability, find_profile
from rlfit.hardware.xla_memory import XlaMemorySettings, cpu_budget, gpu_budget, read_xla_memory_settings

MIB = 1 << 20
NVIDIA_SMI_FIELDS = ("name", "memory.total", "memory.free", "compute_cap", "driver_version")


@dataclass(frozen=True)
class Accelerator:
    """What one probe found about the first accelerator (None: the probe could not tell)."""

    platform: str
    """'gpu' or 'tpu'."""
    name: str
    count: int
    total_bytes: int | None = None
    free_bytes: int | None = None
    compute_capability: str | None = None
    driver: str | None = None
    jax_limit_bytes: int | None = None
    """JAX's allocator limit for the device (`memory_stats()['bytes_limit']`)."""
    jax_in_use_bytes: int | None = None


@dataclass(frozen=True)
class DeviceInfo:
    """The device rlfit found, and what a JAX process may use of it."""

    platform: str
    """'gpu', 'tpu' or 'cpu'."""
    name: str
    count: int
    total_bytes: int | None
    """Physical memory of one device (system RAM for the CPU)."""
    free_bytes: int | None
    compute_capability: str | None
    bf16: bool | None
    """Native bf16 arithmetic (None: unknown)."""
    driver: str | None
    source: str
    """The probe that found the device: 'JAX', 'NVML', 'nvidia-smi' or 'CPU'."""
    jax_backend: str
    """The backend JAX computes on ('gpu', 'tpu', 'cpu'; 'unavailable' if JAX cannot start)."""
    jax_version: str
    xla: XlaMemorySettings
    budget_bytes: int | None
    """Bytes a JAX process may use on one device under `xla` (None: unknown)."""
    budget_reason: str
    profile: GpuProfile | None
    notes: tuple[str, ...]

    @property
    def is_accelerator(self) -> bool:
        return self.platform != "cpu"

    @property
    def jax_uses_it(self) -> bool:
        """True when JAX computes on this device (False e.g. for a GPU without the CUDA build of JAX)."""
        return self.jax_backend == self.platform

    def to_dict(self) -> dict[str, Any]:
        return {"platform": self.platform, "name": self.name, "count": self.count, "total_bytes": self.total_bytes,
                "free_bytes": self.free_bytes, "compute_capability": self.compute_capability, "bf16": self.bf16,
                "driver": self.driver, "source": self.source, "jax_backend": self.jax_backend,
                "jax_version": self.jax_version, "xla_memory": self.xla.to_dict(), "budget_bytes": self.budget_bytes,
                "budget_reason": self.budget_reason, "profile": self.profile.to_dict() if self.profile else None,
                "notes": list(self.notes)}


def probe_device(environ: Mapping[str, str] | None = None) -> DeviceInfo:
    """The first accelerator any probe finds, else the CPU; never raises."""
    settings = read_xla_memory_settings(os.environ if environ is None else environ)
    notes = list(settings.problems)
    backend, version = jax_backend_and_version(notes)
    probes: tuple[tuple[str, Callable[[], Accelerator | None]], ...] = (
        ("JAX", probe_jax), ("NVML", probe_nvml), ("nvidia-smi", probe_nvidia_smi))
    for source, probe in probes:
        found = _attempt(source, probe, notes)
        if found is None:
            continue
        if source == "JAX" and found.total_bytes is None:
            found = _with_nvml_memory(found, notes)
        if source != "JAX":
            notes.append(f"JAX computes on '{backend}', not on this GPU: install the CUDA build of JAX "
                         "(pip install -e '.[cuda]') to train on it")
        return gpu_info(found, source, backend, version, settings, notes)
    notes.append("no GPU found: JAX runs on the CPU")
    return cpu_info(backend, version, settings, notes)


def _attempt(source: str, probe: Callable[[], Accelerator | None], notes: list[str]) -> Accelerator | None:
    try:
        found = probe()
    except Exception as error:  # noqa: BLE001 - a failing probe is a note and the next probe runs
        notes.append(f"{source} probe failed ({short_error(error)}); trying the next probe")
        return None
    if found is None:
        notes.append(f"{source}: no accelerator")
    return found


def jax_backend_and_version(notes: list[str]) -> tuple[str, str]:
    """('gpu' | 'tpu' | 'cpu', jax.__version__), or ('unavailable', ...) with a note when JAX cannot start."""
    try:
        import jax

        return jax.default_backend(), jax.__version__
    except Exception as error:  # noqa: BLE001
        notes.append(f"JAX could not start a backend ({short_error(error)})")
        return "unavailable", _installed_version("jax")


def probe_jax() -> Accelerator | None:
    """The first non-CPU device JAX sees, with its allocator limit; None when JAX has only the CPU."""
    import jax

    devices = [d for d in jax.devices() if d.platform != "cpu"]
    if not devices:
        return None
    device = devices[0]
    stats = device.memory_stats() or {}
    capability = getattr(device, "compute_capability", None)
    limit, in_use = stats.get("bytes_limit"), stats.get("bytes_in_use")
    return Accelerator(
        platform="gpu" if device.platform in ("gpu", "cuda", "rocm") else device.platform,
        name=str(getattr(device, "device_kind", device.platform)),
        count=len(devices),
        free_bytes=int(limit - (in_use or 0)) if limit is not None else None,
        compute_capability=str(capability) if capability else None,
        jax_limit_bytes=int(limit) if limit is not None else None,
        jax_in_use_bytes=int(in_use) if in_use is not None else None,
    )


def jax_devices() -> list[dict[str, Any]]:
    """Every device JAX computes on, in every process (id, process, kind, memory JAX may use where it says)."""
    import jax

    def memory(device: Any) -> int | None:
        try:
            limit = (device.memory_stats() or {}).get("bytes_limit")
        except Exception:  # noqa: BLE001 - a device of another process, or a backend without statistics
            return None
        return int(limit) if limit else None

    return [{"id": int(d.id), "process": int(d.process_index), "kind": getattr(d, "device_kind", d.platform),
             "platform": d.platform, "memory_bytes": memory(d) if d.process_index == jax.process_index() else None}
            for d in jax.devices()]


def peak_bytes_in_use(device: Any = None) -> int | None:
    """The most memory JAX's allocator has held so far in this process on `device` (default: the first;
    `memory_stats()`'s `peak_bytes_in_use`); None where the backend keeps no statistics (the CPU)."""
    import jax

    stats = (device if device is not None else jax.devices()[0]).memory_stats() or {}
    peak = stats.get("peak_bytes_in_use")
    return int(peak) if peak is not None else None


def probe_nvml() -> Accelerator | None:
    """The first GPU NVML (nvidia-ml-py) reports; None when it reports none."""
    import pynvml

    pynvml.nvmlInit()
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        if count == 0:
            return None
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return Accelerator("gpu", _text(pynvml.nvmlDeviceGetName(handle)), count, int(memory.total),
                           int(memory.free), f"{major}.{minor}", _text(pynvml.nvmlSystemGetDriverVersion()))
    finally:
        pynvml.nvmlShutdown()


def probe_nvidia_smi() -> Accelerator | None:
    """The first GPU `nvidia-smi --query-gpu` lists; None when it lists none."""
    return parse_nvidia_smi(run_nvidia_smi())


def run_nvidia_smi() -> str:
    """The CSV lines of `nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS> --format=csv,noheader,nounits`."""
    executable = shutil.which("nvidia-smi")
    if executable is None:
        raise FileNotFoundError("nvidia-smi is not on PATH")
    query = f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}"
    result = subprocess.run([executable, query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                            timeout=20, check=False)
    if result.returncode != 0:
        raise RuntimeError((result.stderr or result.stdout).strip().splitlines()[0] if (result.stderr or result.stdout)
                           else f"nvidia-smi exited with {result.returncode}")
    return result.stdout


def parse_nvidia_smi(text: str) -> Accelerator | None:
    """Parses `name, total MiB, free MiB, compute_cap, driver` lines; '[N/A]' fields become None."""
    rows = [[field.strip() for field in line.split(",")] for line in text.splitlines() if line.strip()]
    if not rows:
        return None
    first = rows[0]
    if len(first) != len(NVIDIA_SMI_FIELDS):
        raise ValueError(f"unexpected nvidia-smi output: {text.strip()[:120]!r}")
    name, total, free, capability, driver = (None if f in ("", "[N/A]", "N/A") else f for f in first)
    return Accelerator("gpu", name or "unknown NVIDIA GPU", len(rows),
                       int(float(total)) * MIB if total else None, int(float(free)) * MIB if free else None,
                       capability, driver)


def gpu_info(found: Accelerator, source: str, backend: str, version: str, settings: XlaMemorySettings,
             notes: list[str]) -> DeviceInfo:
    """DeviceInfo for an accelerator: profile figures where measurements are missing, and the budget."""
    profile = find_profile(found.name)
    if profile is None:
        notes.append(f"'{found.name}' is not in rlfit's GPU table; using measured values only")
    total = found.total_bytes
    if total is None and profile is not None:
        total = profile.memory_bytes
        notes.append(f"total memory from the {profile.name} profile (no probe measured it)")
    if found.jax_limit_bytes is not None:
        budget = found.jax_limit_bytes - (found.jax_in_use_bytes or 0)
        reason = "JAX's allocator limit (memory_stats bytes_limit) less the bytes in use"
    elif total is not None:
        budget, reason = gpu_budget(total, found.free_bytes, settings)
    else:
        budget, reason = None, "unknown: no probe measured the memory and the device has no profile"
    bf16 = profile.bf16 if profile else (True if found.platform == "tpu"
                                         else bf16_from_compute_capability(found.compute_capability))
    return DeviceInfo(found.platform, found.name, found.count, total, found.free_bytes,
                      found.compute_capability or (profile.compute_capability if profile else None), bf16,
                      found.driver, source, backend, version, settings, budget, reason, profile, tuple(notes))


def cpu_info(backend: str, version: str, settings: XlaMemorySettings, notes: list[str]) -> DeviceInfo:
    """DeviceInfo for the host CPU: its RAM is the device memory."""
    total, available = system_memory()
    budget, reason = cpu_budget(available) if available is not None else (None, "unknown: RAM could not be read")
    return DeviceInfo("cpu", cpu_name(), usable_cores(), total, available, None, True, None, "CPU", backend,
                      version, settings, budget, reason, None, tuple(notes))


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def system_memory(meminfo_path: str = "/proc/meminfo") -> tuple[int | None, int | None]:
    """(total, available) RAM in bytes from /proc/meminfo, else from `os.sysconf`; None where unknown."""
    try:
        with open(meminfo_path) as handle:
            fields = parse_meminfo(handle.read())
        if "MemTotal" in fields:
            return fields["MemTotal"], fields.get("MemAvailable", fields.get("MemFree"))
    except OSError:
        pass
    try:
        page = os.sysconf("SC_PAGE_SIZE")
        return page * os.sysconf("SC_PHYS_PAGES"), page * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None, None


def parse_meminfo(text: str) -> dict[str, int]:
    """'MemTotal:  24000000 kB' lines -> {'MemTotal': bytes}."""
    fields = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if parts and parts[0].isdigit():
            fields[key.strip()] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return fields


def cpu_name() -> str:
    """The CPU model from /proc/cpuinfo, else what `platform` says."""
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return host_platform.processor() or host_platform.machine() or "CPU"


def short_error(error: BaseException) -> str:
    """'TypeName: first line of the message' (at most 160 characters)."""
    text = str(error).strip().splitlines()
    message = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    return message[:160]


def _with_nvml_memory(found: Accelerator, notes: list[str]) -> Accelerator:
    """Adds NVML's total memory and driver to what JAX found (JAX reports only its own pool)."""
    try:
        extra = probe_nvml()
    except Exception as error:  # noqa: BLE001
        notes.append(f"NVML could not add the total memory and driver ({short_error(error)})")
        return found
    if extra is None:
        return found
    return replace(found, total_bytes=extra.total_bytes, driver=extra.driver,
                   compute_capability=found.compute_capability or extra.compute_capability)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _installed_version(package: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"
