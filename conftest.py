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


def measure_on_time(lab, measure):
    """measure(), taken again once when the virtual lab's cell reports that the host stalled it during the
    first try (more TTIs late than a campaign allows, or a clock resync): such a measurement is of the host,
    and the cell says so itself. Fails if both were."""
    from cellab.campaign import Retry

    rule = Retry()  # the runner's rule for virtual-lab runs, with the campaign default

    def counts() -> tuple[int, int, int]:
        with lab.control() as ctl:
            stats = ctl.stats()
        return stats["tti"], stats["late_ttis"], stats["resyncs"]

    for _ in range(2):
        before = counts()
        result = measure()
        ttis, late, resyncs = (a - b for a, b in zip(counts(), before, strict=True))
        if not rule.host_stalled(ttis, late, resyncs):
            return result
        print(f"the host stalled the cell: {late} of {ttis} TTIs late, {resyncs} resyncs; measuring again")
    pytest.fail(f"the host stalled the cell in both tries ({late} of {ttis} TTIs late, {resyncs} resyncs in the "
                "second): nothing measured of the model")


@pytest.fixture
def on_time():
    """measure_on_time, for tests that measure timing through an emulated cell."""
    return measure_on_time
