"""`module:function` references to the user's own code: the callable itself, else one line naming the setting."""

from __future__ import annotations

import pytest

from rlfit.envs.user_code import import_callable
from rlfit.errors import UserError
from tests.envs import randomizers


def test_the_named_function_is_returned_itself():
    assert import_callable("tests.envs.randomizers:scaled_masses", "env.randomization") is randomizers.scaled_masses


@pytest.mark.parametrize(("reference", "expected"), [
    ("tests.envs.nowhere:f", "env.randomization: cannot import module 'tests.envs.nowhere'"),
    ("tests.envs.randomizers:absent", "env.randomization: module 'tests.envs.randomizers' has no function 'absent'; "
                                      "give module:function"),
    ("tests.envs.randomizers:not_callable", "has no function 'not_callable'"),
])
def test_a_bad_reference_is_one_line_naming_the_setting(reference, expected):
    with pytest.raises(UserError) as raised:
        import_callable(reference, "env.randomization", expected="give module:function")
    assert expected in str(raised.value) and "\n" not in str(raised.value)
