"""`rlfit doctor [--json] [--full]`: what hardware rlfit sees, and (with --full) whether it works."""

from __future__ import annotations

import argparse
import sys

from rlfit.cli.output import JSON_HELP, QUIET_HELP, show_result, silent
from rlfit.exit_codes import CHECK_FAILED


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "doctor", help="show the accelerator, its memory and JAX's settings; --full also tests it",
        description="Detect the accelerator (JAX, then NVML, then nvidia-smi, then CPU) and report what a run can use.")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    parser.add_argument("--json", action="store_true", help=JSON_HELP)
    parser.add_argument("--full", action="store_true",
                        help="also run the checks: matmul benchmark, network pass, allocation, 2-iteration training")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from rlfit.run.checks import CheckResult, run_checks
    from rlfit.hardware.probe import jax_devices, probe_device

    device = probe_device()
    devices = jax_devices()
    if not silent(args):
        for line in describe(device) + describe_devices(devices):
            print(line)

    def show(result: CheckResult) -> None:
        if not silent(args):
            print(f"  {'pass' if result.passed else 'FAIL'}  {result.name:<10s} {result.figure}", flush=True)

    checks = ()
    if args.full:
        if not silent(args):
            where = "on the GPU" if device.jax_uses_it and device.is_accelerator else "on the CPU, no GPU in use"
            print(f"checks, {where}:", flush=True)
        checks = run_checks(device, show)
    out = {"device": device.to_dict(), "jax_devices": devices}
    if args.full:
        out["checks"] = [c.to_dict() for c in checks]
        out["passed"] = all(c.passed for c in checks)
    show_result(args, None, out)
    failed = [c.name for c in checks if not c.passed]
    if failed:
        print(f"rlfit: error: {len(failed)} check(s) failed: {', '.join(failed)}; `rlfit doctor --full` shows each "
              "check's figure", file=sys.stderr)
        return CHECK_FAILED
    return 0


def describe_devices(devices: list[dict]) -> list[str]:
    """One line per device JAX computes on (a run uses them all by default: run.devices=auto)."""
    from rlfit.hardware.units import format_bytes

    lines = [f"jax devices  {len(devices)} (a run splits its environments over all of them; run.devices=N for fewer)"]
    for d in devices:
        memory = f", {format_bytes(d['memory_bytes'])} usable" if d["memory_bytes"] else ""
        lines.append(f"  {d['platform']}:{d['id']}  {d['kind']} (process {d['process']}){memory}")
    return lines


def describe(device) -> list[str]:
    """The text report: one 'label  value' line per fact, then the probe notes."""
    from rlfit.hardware.units import format_bytes

    if device.is_accelerator:
        head = f"{device.name} x{device.count} ({device.platform}, found by {device.source})"
        if not device.jax_uses_it:
            head += f"; JAX computes on '{device.jax_backend}', not on it"
    else:
        head = f"no GPU found: JAX computes on the CPU ({device.name}, {device.count} cores)"
    memory = f"total {format_bytes(device.total_bytes)}, free {format_bytes(device.free_bytes)}"
    lines = [
        f"device       {head}",
        f"memory       {memory}; budget {format_bytes(device.budget_bytes)} ({device.budget_reason})",
        f"compute      capability {device.compute_capability or 'n/a'}; bf16 "
        f"{ {True: 'yes', False: 'no', None: 'unknown'}[device.bf16] }",
        f"driver       {device.driver or 'n/a'}",
        f"jax          {device.jax_version}, backend {device.jax_backend}",
        f"XLA memory   {device.xla.describe()}; set: "
        f"{', '.join(f'{k}={v}' for k, v in device.xla.variables) or 'none'}",
    ]
    if device.profile is not None:
        p = device.profile
        bf16 = f"{p.peak_bf16_tflops:g}" if p.peak_bf16_tflops else "none"
        lines.append(f"profile      {p.name}: {format_bytes(p.memory_bytes)}, peak {p.peak_fp32_tflops:g} TFLOP/s fp32, "
                     f"{bf16} bf16")
    elif device.is_accelerator:
        lines.append("profile      not in rlfit's GPU table (measured values only)")
    lines += ["notes"] + [f"  - {note}" for note in device.notes]
    return lines
