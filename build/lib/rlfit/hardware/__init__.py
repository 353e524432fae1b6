"""What hardware rlfit runs on: accelerator probes, GPU profiles, and the XLA memory settings in effect."""

from rlfit.hardware.probe import DeviceInfo, probe_device
from rlfit.hardware.profiles import PROFILES, GpuProfile, find_profile
from rlfit.hardware.xla_memory import XlaMemorySettings, read_xla_memory_settings

__all__ = ["PROFILES", "DeviceInfo", "GpuProfile", "XlaMemorySettings", "find_profile", "probe_device",
           "read_xla_memory_settings"]
