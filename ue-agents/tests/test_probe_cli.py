"""`cellab probe` sub-app (typer): analyze a capture, and bad input as a clear message."""

from __future__ import annotations

import subprocess

import pytest
from cellab.ue.probe_cli import probe_app
from cellab.ue.probe_synth import SynthConfig, simulate, write_pcap
from typer.testing import CliRunner

from cellab.paths import BUILD_BIN, PROJECT_ROOT


@pytest.fixture(scope="module", autouse=True)
def probe_bin() -> None:
    subprocess.run(["make", "-s", str(BUILD_BIN / "cellab-probe")], cwd=PROJECT_ROOT, check=True,
                   capture_output=True, timeout=300)


def test_analyze_prints_the_estimate(tmp_path):
    pcap = write_pcap(simulate(SynthConfig(sr_period_ms=20, duration_s=1.5)), tmp_path / "c.pcap")
    result = CliRunner().invoke(probe_app, ["analyze", str(pcap), "--out", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "SR period" in result.output and "20 ms" in result.output
    assert (tmp_path / "analyze-summary.json").exists()


def test_bad_control_names_the_allowed_values(tmp_path):
    result = CliRunner().invoke(probe_app, ["fetch", "127.0.0.1", "--bytes", "1000", "--control", "fast",
                                            "--out", str(tmp_path)], env={"COLUMNS": "200"})
    assert result.exit_code == 2
    assert "control" in result.output and "exll" in result.output and "dfcsd" in result.output


def test_missing_capture_is_an_input_error(tmp_path):
    result = CliRunner().invoke(probe_app, ["analyze", str(tmp_path / "nope.pcap")], env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "file does not exist" in result.output
