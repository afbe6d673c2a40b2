"""Issue 27, module parameters of the wrong kind: a whole-number parameter (a 0/1 switch, packets) given 0.5
is refused naming the campaign field and the allowed values, by `validate` and by the loader itself. Before,
the range alone was checked and the loader stored round(0.5) = 1 without a word."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from cellab.campaign.load import load_campaign
from cellab.contracts.server import ListModulesResult, check_param
from cellab.errors import InputError, InputErrors
from cellab.paths import find_program


def _loader() -> Path:
    try:
        return find_program("cellab-modules")
    except Exception:  # noqa: BLE001 - not built on this host
        pytest.skip("cellab-modules is not built (make build)")


def test_the_loader_lists_each_parameters_step_and_refuses_half_a_switch():
    listing = ListModulesResult.model_validate({**json.loads(subprocess.run(
        [str(_loader()), "list"], capture_output=True, text=True, timeout=20, check=True).stdout), "available_cc": []})
    c2tcp = next(m for m in listing.modules if m.name == "c2tcp")
    assert c2tcp.param_steps["tuner"] == 1 and c2tcp.param_steps["target_ms"] == 0.001, c2tcp.param_steps
    proc = subprocess.run([str(_loader()), "set", "c2tcp", "tuner", "0.5"], capture_output=True, text=True, timeout=20)
    assert proc.returncode != 0 and "not a whole number" in proc.stderr, proc.stderr  # refused before "not loaded"


def test_check_param_steps():
    ranges, steps = {"tuner": (0, 1, "0|1"), "target_ms": (0, 10000, "ms")}, {"tuner": 1.0, "target_ms": 0.001}
    check_param(ranges, "tuner", 1, "c.yaml", "f", steps)
    check_param(ranges, "target_ms", 0.5, "c.yaml", "f", steps)  # a finer step is resolution, not a kind
    check_param(ranges, "tuner", 0.5, "c.yaml", "f")  # an older loader lists no steps
    with pytest.raises(InputError, match=r"0.5 is not a whole number.*allowed: 0..1 in steps of 1"):
        check_param(ranges, "tuner", 0.5, "c.yaml", "f", steps)


@pytest.mark.parametrize("module, param, value", [("c2tcp", "tuner", 0.5), ("scubic", "ssthresh_at_exit", 0.5),
                                                  ("c2tcp", "small_flight_pkts", 2.5), ("c2tcp", "tuner", "1"),
                                                  ("c2tcp", "tuner", True)])
def test_validate_refuses_a_fraction_of_a_whole_number_parameter(tmp_path, module, param, value):
    _loader()
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "c", "lab": "virtual", "workload": {"tool": "iperf3", "duration_s": 2},
                                    "fixed": {"cc": module, "module_params": {module: {param: value}}}}))
    with pytest.raises(InputErrors) as caught:
        load_campaign(path)
    said = str(caught.value)
    # a string ended in a TypeError traceback (the range compared it with floats)
    assert f"fixed.module_params.{module}.{param}" in said and (
        "not a whole number" in said or "is not a number" in said), said
