"""Waits and timeouts from the environment: a bad value is an error naming the variable, read when used."""

from __future__ import annotations

import pytest

from cellab.envvars import env_seconds
from cellab.errors import InputError


@pytest.mark.parametrize("raw", ["abc", "nan", "inf", "-1", "1e400", "90000", "1_0x"])
def test_a_bad_value_names_the_variable_and_the_range(monkeypatch, raw):
    monkeypatch.setenv("CELLAB_TEST_WAIT_S", raw)
    with pytest.raises(InputError) as err:
        env_seconds("CELLAB_TEST_WAIT_S", 10.0)
    assert "$CELLAB_TEST_WAIT_S" in str(err.value) and "0..86400" in str(err.value), str(err.value)


def test_unset_or_empty_is_the_default_and_a_good_value_is_taken(monkeypatch):
    monkeypatch.delenv("CELLAB_TEST_WAIT_S", raising=False)
    assert env_seconds("CELLAB_TEST_WAIT_S", 10.0) == 10.0
    monkeypatch.setenv("CELLAB_TEST_WAIT_S", " ")
    assert env_seconds("CELLAB_TEST_WAIT_S", 10.0) == 10.0
    monkeypatch.setenv("CELLAB_TEST_WAIT_S", "2.5")
    assert env_seconds("CELLAB_TEST_WAIT_S", 10.0) == 2.5
    monkeypatch.setenv("CELLAB_TEST_WAIT_S", "0")
    with pytest.raises(InputError):
        env_seconds("CELLAB_TEST_WAIT_S", 10.0, minimum=0.1)
