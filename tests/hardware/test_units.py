"""Sizes as users type them."""

from __future__ import annotations

import pytest

from rlfit.errors import UserError
from rlfit.hardware.units import format_bytes, parse_size


@pytest.mark.parametrize("text, size", [
    ("16GiB", 16 * 1024**3), ("8GB", 8 * 1000**3), ("12000MiB", 12000 * 1024**2), ("1.5GiB", 1536 * 1024**2),
    ("4096", 4096), ("512 mib", 512 * 1024**2), ("2G", 2 * 1024**3), (" 80gb ", 80 * 1000**3), (1024, 1024),
])
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "GiB", "16 GiBs", "sixteen", "-1GiB", "0", "0.0001B", "1e9", "16XB", 0, -5])
def test_bad_sizes_are_one_line_user_errors(text):
    with pytest.raises(UserError) as caught:
        parse_size(text)
    message = str(caught.value)
    assert "--device-memory" in message and "\n" not in message


def test_format_bytes():
    assert format_bytes(1536 * 1024**2) == "1.50 GiB"
    assert format_bytes(5 * 1024**2) == "5.0 MiB"
    assert format_bytes(100) == "100 B"
    assert format_bytes(None) == "unknown"
