"""Built-in GPU profiles: memory, compute capability, bf16 support and peak dense throughput.

Peak figures are the vendor's dense (non-sparse) numbers; `peak_bf16_tflops` is the tensor-core rate with
FP32 accumulate where the datasheet gives both (GeForce cards run FP32-accumulate at half the FP16-accumulate
rate). They are used only to judge the `rlfit doctor --full` matmul benchmark; memory is measured whenever a
probe can, and a device that is not in the table falls back entirely to what was measured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

GIB = 1 << 30

VARIANT_WORDS = frozenset({"ti", "super", "laptop", "mobile", "max", "nvl"})
"""Name words that mark a different card from the base model; a profile matches them only if it names them."""


@dataclass(frozen=True)
class GpuProfile:
    """One GPU model's published figures."""

    name: str
    words: tuple[str, ...]
    """Lower-case words that must all appear in the device name for this profile to match."""
    memory_bytes: int
    compute_capability: str
    bf16: bool
    """Native bf16 arithmetic (compute capability 8.0 and later)."""
    peak_fp32_tflops: float
    """Dense FP32 (non-tensor) TFLOP/s."""
    peak_bf16_tflops: float | None
    """Dense bf16 tensor TFLOP/s (None: no bf16 tensor cores)."""

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "memory_bytes": self.memory_bytes, "compute_capability": self.compute_capability,
                "bf16": self.bf16, "peak_fp32_tflops": self.peak_fp32_tflops,
                "peak_bf16_tflops": self.peak_bf16_tflops}


PROFILES: tuple[GpuProfile, ...] = (
    # NVIDIA T4 Tensor Core GPU datasheet: 16 GB GDDR6, 8.1 TFLOPS FP32; Turing has no bf16.
    GpuProfile("T4", ("t4",), 16 * GIB, "7.5", False, 8.1, None),
    # NVIDIA V100 Tensor Core GPU datasheet (SXM2): 16/32 GB HBM2, 15.7 TFLOPS FP32; Volta has no bf16.
    GpuProfile("V100 16GB", ("v100",), 16 * GIB, "7.0", False, 15.7, None),
    GpuProfile("V100 32GB", ("v100", "32gb"), 32 * GIB, "7.0", False, 15.7, None),
    # AWS EC2 G5 instance documentation (NVIDIA publishes no A10G datasheet): 24 GB GDDR6, 31.2 TFLOPS FP32,
    # about 70 TFLOPS dense bf16 tensor (approximate; the A10 datasheet's 125 does not apply to the A10G).
    GpuProfile("A10G", ("a10g",), 24 * GIB, "8.6", True, 31.2, 70.0),
    # NVIDIA A100 Tensor Core GPU datasheet: 40/80 GB HBM2(e), 19.5 TFLOPS FP32, 312 TFLOPS bf16 dense.
    GpuProfile("A100 40GB", ("a100",), 40 * GIB, "8.0", True, 19.5, 312.0),
    GpuProfile("A100 80GB", ("a100", "80gb"), 80 * GIB, "8.0", True, 19.5, 312.0),
    # NVIDIA L4 Tensor Core GPU datasheet: 24 GB GDDR6, 30.3 TFLOPS FP32, 121 TFLOPS bf16 dense (242 sparse).
    GpuProfile("L4", ("l4",), 24 * GIB, "8.9", True, 30.3, 121.0),
    # NVIDIA Ampere GA102 GPU architecture whitepaper (appendix): RTX 3060 Ti 8 GB, 16.2 TFLOPS FP32,
    # 32.4 TFLOPS bf16 dense with FP32 accumulate; RTX 3090 24 GB, 35.6 FP32, 71 bf16.
    GpuProfile("RTX 3060 Ti", ("3060", "ti"), 8 * GIB, "8.6", True, 16.2, 32.4),
    GpuProfile("RTX 3090", ("3090",), 24 * GIB, "8.6", True, 35.6, 71.0),
    # NVIDIA Ada GPU architecture whitepaper (appendix): RTX 4070 12 GB, 29.1 FP32, 58.3 bf16 dense (FP32
    # accumulate); RTX 4080 16 GB, 48.7 FP32, 97.5 bf16; RTX 4090 24 GB, 82.6 FP32, 165.2 bf16.
    GpuProfile("RTX 4070", ("4070",), 12 * GIB, "8.9", True, 29.1, 58.3),
    GpuProfile("RTX 4080", ("4080",), 16 * GIB, "8.9", True, 48.7, 97.5),
    GpuProfile("RTX 4090", ("4090",), 24 * GIB, "8.9", True, 82.6, 165.2),
    # NVIDIA RTX Blackwell GPU architecture whitepaper: RTX 5070 12 GB GDDR7, 30.9 FP32, 61.7 bf16 dense (FP32
    # accumulate); RTX 5090 32 GB GDDR7, 104.8 FP32, 209.5 bf16.
    GpuProfile("RTX 5070", ("5070",), 12 * GIB, "12.0", True, 30.9, 61.7),
    GpuProfile("RTX 5090", ("5090",), 32 * GIB, "12.0", True, 104.8, 209.5),
    # NVIDIA H100 Tensor Core GPU datasheet: SXM 80 GB HBM3, 67 TFLOPS FP32, 989 TFLOPS bf16 dense (1979
    # sparse); PCIe 80 GB HBM2e, 51 FP32, 756 bf16 dense.
    GpuProfile("H100 SXM", ("h100",), 80 * GIB, "9.0", True, 67.0, 989.0),
    GpuProfile("H100 PCIe", ("h100", "pcie"), 80 * GIB, "9.0", True, 51.0, 756.0),
    # NVIDIA H200 Tensor Core GPU datasheet (SXM): 141 GB HBM3e, 67 TFLOPS FP32, 989 TFLOPS bf16 dense.
    GpuProfile("H200", ("h200",), 141 * 10**9, "9.0", True, 67.0, 989.0),
)


def name_words(device_name: str) -> tuple[str, ...]:
    """'NVIDIA A100-SXM4-80GB' -> ('nvidia', 'a100', 'sxm4', '80gb')."""
    return tuple(word for word in re.split(r"[^a-z0-9]+", device_name.lower()) if word)


def find_profile(device_name: str) -> GpuProfile | None:
    """The profile whose words all appear in `device_name` (the most specific wins), or None.

    A name with a variant word (Ti, SUPER, Laptop, ...) that the profile does not name does not match it:
    'RTX 4070 Ti' is not an 'RTX 4070'.
    """
    words = set(name_words(device_name))
    variants = words & VARIANT_WORDS
    matches = [p for p in PROFILES if set(p.words) <= words and variants <= set(p.words)]
    if not matches:
        return None
    return max(matches, key=lambda p: len(p.words))


def bf16_from_compute_capability(compute_capability: str | None) -> bool | None:
    """NVIDIA GPUs compute in bf16 natively from compute capability 8.0 (Ampere); None if unknown."""
    if not compute_capability:
        return None
    try:
        major = int(str(compute_capability).split(".")[0])
    except ValueError:
        return None
    return major >= 8
