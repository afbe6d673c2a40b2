"""`cellab modules ...` sub-commands (typer), as the lead mounts them."""

from __future__ import annotations

from cellab.server import modules
from cellab.server.cli import modules_app
from typer.testing import CliRunner


def test_list_and_errors(programs):
    runner = CliRunner()
    out = runner.invoke(modules_app, ["list"])
    assert out.exit_code == 0
    assert all(name in out.output for name in modules.MODULE_NAMES)
    bad = runner.invoke(modules_app, ["load", "c3tcp"])
    assert bad.exit_code == 2 and "unknown module 'c3tcp'" in bad.output


def test_load_set_stats_unload(programs, host_clean):
    runner = CliRunner()
    assert runner.invoke(modules_app, ["load", "c2tcp"]).exit_code == 0
    try:
        assert runner.invoke(modules_app, ["set", "c2tcp", "target_ms", "40"]).exit_code == 0
        out = runner.invoke(modules_app, ["set", "c2tcp", "target_ms", "--", "-4"])
        assert out.exit_code == 2 and "out of range" in out.output
        assert '"flows"' in runner.invoke(modules_app, ["stats", "c2tcp"]).output
        assert "target_ms=40" in runner.invoke(modules_app, ["list"]).output
    finally:
        assert runner.invoke(modules_app, ["unload", "c2tcp"]).exit_code == 0
    assert "c2tcp" not in modules.available_congestion_controls()
