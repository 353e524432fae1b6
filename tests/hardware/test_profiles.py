"""The built-in GPU table and the lookup by device name."""

from __future__ import annotations

import pytest

from rlfit.hardware.profiles import PROFILES, bf16_from_compute_capability, find_profile

REQUIRED = ("T4", "V100 16GB", "A10G", "A100 40GB", "A100 80GB", "L4", "RTX 3060 Ti", "RTX 3090", "RTX 4070",
            "RTX 4080", "RTX 4090", "RTX 5070", "RTX 5090", "H100 SXM", "H200")


@pytest.mark.parametrize("device_name, profile", [
    ("Tesla T4", "T4"),
    ("Tesla V100-SXM2-16GB", "V100 16GB"),
    ("Tesla V100-SXM2-32GB", "V100 32GB"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA GeForce RTX 3060 Ti", "RTX 3060 Ti"),
    ("NVIDIA GeForce RTX 3090", "RTX 3090"),
    ("NVIDIA GeForce RTX 4070", "RTX 4070"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("NVIDIA GeForce RTX 5090", "RTX 5090"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H200", "H200"),
])
def test_lookup_by_device_name(device_name, profile):
    assert find_profile(device_name).name == profile


@pytest.mark.parametrize("device_name", [
    "NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070 SUPER", "NVIDIA GeForce RTX 3060",
    "NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA H100 NVL", "NVIDIA L40S", "cpu", "",
])
def test_other_cards_are_not_mistaken_for_a_listed_one(device_name):
    assert find_profile(device_name) is None


def test_table_covers_the_guides_gpus_with_consistent_figures():
    names = {p.name for p in PROFILES}
    assert set(REQUIRED) <= names
    for profile in PROFILES:
        assert profile.bf16 == bf16_from_compute_capability(profile.compute_capability), profile.name
        assert profile.peak_fp32_tflops > 0 and profile.memory_bytes >= 8 * 2**30
        assert (profile.peak_bf16_tflops is None) == (not profile.bf16), profile.name
        if profile.peak_bf16_tflops:
            assert profile.peak_bf16_tflops > profile.peak_fp32_tflops


def test_no_bf16_on_turing_and_volta():
    assert find_profile("Tesla T4").bf16 is False
    assert find_profile("Tesla V100-PCIE-16GB").bf16 is False
    assert bf16_from_compute_capability("7.5") is False and bf16_from_compute_capability("8.0") is True
    assert bf16_from_compute_capability(None) is None
