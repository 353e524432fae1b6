"""Memory sizes as people write them ('16GiB', '8GB', '12000MiB') and as rlfit prints them."""

from __future__ import annotations

import re

from rlfit.errors import UserError

UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
    "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40,
}
"""Decimal units (GB = 10^9 bytes), binary units (GiB = 2^30), and single letters as binary (like nvidia-smi)."""

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | int, what: str = "--device-memory") -> int:
    """'16GiB' -> 17179869184, '8GB' -> 8000000000, '12000MiB', '1.5G', '4096' (bytes); a UserError otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise UserError(f"{what} must be a positive size, got {text}")
        return text
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in UNITS:
        raise UserError(f"{what} expects a size like 16GiB, 8GB or 12000MiB, got '{text}'")
    size = int(float(match.group(1)) * UNITS[unit])
    if size <= 0:
        raise UserError(f"{what} must be a positive size, got '{text}'")
    return size


def format_bytes(size: int | float | None) -> str:
    """1610612736 -> '1.50 GiB'; 5242880 -> '5.0 MiB'; None -> 'unknown'."""
    if size is None:
        return "unknown"
    for unit, scale, digits in (("TiB", 2**40, 2), ("GiB", 2**30, 2), ("MiB", 2**20, 1), ("KiB", 2**10, 1)):
        if abs(size) >= scale:
            return f"{size / scale:.{digits}f} {unit}"
    return f"{int(size)} B"
