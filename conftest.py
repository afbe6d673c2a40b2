"""Fixtures shared by every room's tests."""

from __future__ import annotations

import os
import secrets
import shutil

import pytest


def have_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture
def require_root() -> None:
    if not have_root():
        pytest.skip("needs root: network namespaces and BPF (CI runs as root)")


@pytest.fixture
def netns_prefix() -> str:
    """A namespace-name prefix no other test (or helper session) uses."""
    return "ct" + secrets.token_hex(2)


@pytest.fixture
def require_program():
    def check(name: str) -> str:
        path = shutil.which(name)
        if path is None:
            pytest.fail(f"{name} is missing: `make setup` installs it")
        return path

    return check
