"""Bad requests to the loader: a clear error naming what is wrong, and nothing half-loaded."""

from __future__ import annotations

import os
import subprocess

import pytest
from cellab.server import modules

from cellab.errors import CellabError, InputError


def test_unknown_module_names_the_allowed_ones(programs, loader):
    with pytest.raises(InputError) as err:
        modules.preflight(["c2tcp", "c3tcp"], source="campaign.yaml")
    text = str(err.value)
    assert "campaign.yaml" in text and "[1]" in text and "c3tcp" in text
    assert all(name in text for name in modules.MODULE_NAMES)


def test_loader_rejects_unknown_module_before_loading(programs, loader, host_clean):
    out = loader("load", "c2tcp", "bogus")
    assert out.returncode == 2
    assert "unknown module bogus" in out.stderr and "c2tcp" in out.stderr
    assert "c2tcp" not in modules.available_congestion_controls()


@pytest.mark.parametrize("param, value, needle", [
    ("target_ms", -5, "out of range"),
    ("target_ms", 20000, "out of range"),
    ("alpha_init", 0.5, "out of range"),
    ("speed", 1, "unknown parameter"),
])
def test_bad_parameters_are_rejected_with_the_allowed_values(programs, loader, param, value, needle):
    with pytest.raises(InputError) as err:
        modules.set_param("c2tcp", param, value, source="run 3")
    assert needle in str(err.value) and "run 3" in str(err.value) and "allowed" in str(err.value)


def test_loader_rejects_negative_target(programs, loader, host_clean):
    assert loader("load", "c2tcp").returncode == 0
    try:
        out = loader("set", "c2tcp", "target_ms", "-5")
        assert out.returncode == 2
        assert "out of range" in out.stderr and "0..10000 ms" in out.stderr
        listed = {m.name: m for m in modules.describe().values()}
        assert listed["c2tcp"].params["target_ms"] == 50  # unchanged default
    finally:
        loader("unload", "c2tcp")


def test_no_btf_is_reported_and_nothing_loads(programs, loader, host_clean, monkeypatch):
    out = loader("load", "c2tcp", env={"CELLAB_KERNEL_BTF": "/nonexistent/vmlinux"})
    assert out.returncode == 4 and "no kernel BTF" in out.stderr
    assert "c2tcp" not in modules.available_congestion_controls()
    monkeypatch.setenv("CELLAB_KERNEL_BTF", "/nonexistent/vmlinux")
    with pytest.raises(CellabError, match="no kernel BTF"):
        modules.load(["c2tcp"])


def test_not_root_is_reported(programs, loader, unprivileged, monkeypatch):
    out = subprocess.run(unprivileged([str(programs["cellab-modules"]), "load", "c2tcp"]), capture_output=True,
                         text=True, timeout=30, check=False)
    assert out.returncode == 3 and "needs root" in out.stderr
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(CellabError, match="needs root"):
        modules.load(["c2tcp"])


def test_failure_midway_undoes_the_whole_command(programs, loader, host_clean):
    # or_ingress needs --dev: the loader fails on it after c2tcp was registered, and must undo c2tcp
    out = loader("load", "c2tcp", "or_ingress")
    assert out.returncode == 2 and "--dev" in out.stderr
    assert "c2tcp" not in modules.available_congestion_controls()
    assert not modules.loaded()


def test_tc_module_on_a_missing_interface(programs, loader, host_clean):
    out = loader("load", "burst_drop", "--dev", "nosuchdev0")
    assert out.returncode == 2 and "nosuchdev0" in out.stderr
    assert "burst_drop" not in modules.loaded()


def test_settings_are_checked_before_anything_loads(programs, host_clean):
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        modules.ModuleSettings.model_validate({"load": ["c2tcp"], "parms": {}})
    bad = modules.ModuleSettings.model_validate({"load": ["c2tcp"], "params": {"c2tcp": {"target_ms": -1}}})
    with pytest.raises(InputError, match=r"campaign.yaml: params.c2tcp.target_ms: -1.0 is out of range"):
        modules.apply_settings(bad, source="campaign.yaml")
    assert "c2tcp" not in modules.available_congestion_controls()
    good = modules.ModuleSettings.model_validate({"load": ["c2tcp"], "params": {"c2tcp": {"target_ms": 70}}})
    modules.apply_settings(good, source="campaign.yaml")
    try:
        assert modules.describe()["c2tcp"].params["target_ms"] == 70
    finally:
        modules.unload(["c2tcp"])
