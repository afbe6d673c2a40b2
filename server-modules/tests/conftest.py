"""Fixtures for the server-modules tests: built programs, and a host left as it was found."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cellab.errors import CellabError
from cellab.paths import find_program

BPFFS_CELLAB = Path("/sys/fs/bpf/cellab")


@pytest.fixture(scope="session")
def programs() -> dict[str, Path]:
    try:
        return {name: find_program(name) for name in ("cellab-modules", "cellab-send")}
    except CellabError as exc:
        pytest.fail(f"{exc} (the server-modules programs are built by `make build`)")


@pytest.fixture
def host_clean(require_root, programs):
    """Fails the test if a module it loaded stays registered or pinned (and then cleans that up).
    Only this process's loads count: another run on the same host keeps its modules."""
    from cellab.server import experiment, modules

    with experiment.bpf_lock():
        first = len(modules.LOAD_HISTORY)
        yield
        used = set(modules.LOAD_HISTORY[first:])
        left = set(modules.LOADED_BY_THIS_PROCESS)
        for name, netns in sorted(left, key=lambda h: (h[0], h[1] or "")):
            modules.unload([name], netns=netns)
        assert not left, f"test left modules loaded: {sorted(left, key=str)}"
        # a lab instance running on this host at the same time may hold a module too: that one stays
        others = {name for name in used if modules.holders(name)}
        still = set(modules.available_congestion_controls()) & used - others
        assert not still, f"congestion controls stayed registered: {sorted(still)}"
        pinned = sorted(name for name in used - others if (BPFFS_CELLAB / name).exists())
        assert not pinned, f"pins left behind under {BPFFS_CELLAB}: {pinned}"


def run_as_nobody(argv: list[str], env: dict[str, str] | None = None):
    """argv for running a program without root (setpriv drops to nobody, no capabilities)."""
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", *argv]


@pytest.fixture
def unprivileged():
    if os.geteuid() != 0:
        pytest.skip("dropping to another user needs root")
    return run_as_nobody


@pytest.fixture
def loader(programs):
    """Run cellab-modules directly (the binary's own checks, not the Python wrapper's)."""
    import subprocess

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        full_env = dict(os.environ)
        full_env.update(env or {})
        return subprocess.run([str(programs["cellab-modules"]), *args], capture_output=True, text=True,
                              timeout=60, env=full_env, check=False)

    return run
