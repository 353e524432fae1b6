"""The weights file a config names (`network.pretrained`): a safetensors file, checked before anything runs and
again when it is loaded (`rlfit.networks.pretrained`); a pickle or PyTorch file is refused, since loading one can
run code."""

from __future__ import annotations

import struct
from pathlib import Path

from rlfit.errors import UserError

SETTING = "network.pretrained"
MAX_HEADER_BYTES = 100 * 1024 * 1024
"""safetensors' own limit on the JSON header."""


def check_safetensors(path: str | Path) -> Path:
    r"""`path` if it exists and starts like a safetensors file, else a one-line UserError with the fix.

    safetensors: 8 bytes little-endian header length n, then a JSON header of n bytes starting with '{'.
    A PyTorch checkpoint is a zip (b'PK') or a pickle (b'\x80' then a protocol number).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{SETTING}: no file at {path}; give the path of a .safetensors file made by "
                        "`rlfit convert-weights`")
    size = path.stat().st_size
    with path.open("rb") as handle:
        head = handle.read(9)
    if len(head) == 9:
        (header_bytes,) = struct.unpack("<Q", head[:8])
        if head[8:9] == b"{" and header_bytes <= min(size - 8, MAX_HEADER_BYTES):
            return path
    if head[:2] == b"PK" or head[:1] == b"\x80":
        kind = "a PyTorch (zip) checkpoint" if head[:2] == b"PK" else "a pickle"
        raise UserError(f"{SETTING}: {path} is {kind}, which rlfit does not load (pickle can run code); convert "
                        "it with `rlfit convert-weights` and give the .safetensors file it writes")
    raise UserError(f"{SETTING}: {path} is not a readable safetensors file ({safetensors_reason(path)}); give a "
                    ".safetensors file made by `rlfit convert-weights`")


def safetensors_reason(path: Path) -> str:
    """safetensors' own one-line reason for refusing `path` (or 'damaged' when it reads the header after all)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy"):
            return "damaged"
    except Exception as error:  # the reason is all we want from it
        return f"safetensors: {str(error).splitlines()[0]}" if str(error) else type(error).__name__
