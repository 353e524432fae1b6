"""Holm and Benjamini-Hochberg adjusted p-values against hand computations."""

from __future__ import annotations

import pytest

from rlfit.errors import UserError
from rlfit.study.corrections import adjust, check_correction, holm


def test_holm_by_hand():
    # sorted: 0.01 x 4 = 0.04, 0.02 x 3 = 0.06, 0.03 x 2 = 0.06, 0.04 x 1 -> running max 0.06; given order back
    assert holm([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])
    assert adjust([0.03, 0.01, 0.04, 0.02]) == pytest.approx([0.06, 0.04, 0.06, 0.06])


def test_holm_caps_at_one_and_keeps_ties():
    assert holm([0.5, 0.5, 0.9]) == pytest.approx([1.0, 1.0, 1.0])
    assert holm([0.001]) == pytest.approx([0.001])


def test_benjamini_hochberg_by_hand():
    # sorted 0.01, 0.02, 0.03, 0.04 (m 4): p m / rank = 0.04, 0.04, 0.04, 0.04; running min from the top
    assert adjust([0.03, 0.01, 0.04, 0.02], "bh") == pytest.approx([0.04, 0.04, 0.04, 0.04])
    # 0.001 x 3 = 0.003, 0.04 x 3 / 2 = 0.06, 0.05 x 3 / 3 = 0.05 -> min from the top: 0.003, 0.05, 0.05
    assert adjust([0.05, 0.001, 0.04], "bh") == pytest.approx([0.05, 0.003, 0.05])


def test_an_empty_family_adjusts_to_nothing():
    assert adjust([]) == []


def test_an_unknown_correction_is_one_line_naming_the_choices():
    with pytest.raises(UserError, match=r"^unknown correction 'bonferoni'; choose from holm, bh$"):
        check_correction("bonferoni")
    with pytest.raises(UserError, match=r"^unknown correction 'hlm' \(did you mean holm\?\); choose from holm, bh$"):
        adjust([0.1], "hlm")
