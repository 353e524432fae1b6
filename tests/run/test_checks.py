"""The `rlfit doctor --full` checks that are cheap on a CPU (the training check is exercised by `rlfit doctor --full`)."""

from __future__ import annotations

import dataclasses

from rlfit.run import checks
from rlfit.hardware.probe import cpu_info
from rlfit.hardware.xla_memory import read_xla_memory_settings

CPU = dataclasses.replace(cpu_info("cpu", "test", read_xla_memory_settings({}), []), budget_bytes=64 << 20)


def test_matmul_is_correct_and_reports_its_throughput():
    result = checks.check_matmul(CPU)
    assert result.passed and "TFLOP/s fp32" in result.figure and "no GPU profile" in result.figure


def test_network_forward_backward_is_finite():
    result = checks.check_network(CPU)
    assert result.passed and "gradients finite" in result.figure


def test_allocation_fills_the_budget_on_the_cpu():
    result = checks.check_allocation(CPU)
    assert result.passed and result.figure.startswith("allocated 64.0 MiB")


def test_a_crashing_check_is_a_failed_result_not_a_crash(monkeypatch):
    def broken(device):
        raise RuntimeError("RESOURCE_EXHAUSTED: Out of memory allocating 1 bytes.")

    for name in ("check_matmul", "check_network", "check_allocation", "check_training"):
        monkeypatch.setattr(checks, name, broken)
    seen = []
    results = checks.run_checks(CPU, seen.append)
    assert [r.name for r in results] == ["matmul", "network", "allocation", "training"] and seen == list(results)
    assert not any(r.passed for r in results)
    assert results[0].figure.startswith("RuntimeError: RESOURCE_EXHAUSTED")
