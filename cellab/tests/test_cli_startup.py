"""`cellab --help`, `validate`, `plan` and `schema` start without the heavy libraries (numpy, pyroute2, pyzmq,
scipy, matplotlib, Dask, pymongo's bson, ...): they are imported where they are used (a lab brought up, a run's
metrics, a report). The CPU time itself is measured by `make bench BENCH=startup`, not here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.background

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = ROOT / "runs" / "demo" / "cc-shootout.yaml"
HEAVY = ("numpy", "pyroute2", "zmq", "scipy", "matplotlib", "distributed", "dask", "bson", "pymongo", "psutil",
         "jinja2", "serial", "pyvisa", "cryptography", "pandas", "pyarrow")
PROBE = """
import contextlib, io, json, sys
exec(sys.argv[2])
sys.argv = ["cellab", *json.loads(sys.argv[1])]
try:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from cellab.cli import main
        main()
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def loaded_by(args: list[str], before: str = "") -> set[str]:
    """The top-level packages a `cellab ARGS` process holds at its end (`before`: code run first)."""
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args), before], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("args", [["--help"], ["validate", str(CAMPAIGN)], ["plan", str(CAMPAIGN)],
                                  ["schema", "campaign"]], ids=["help", "validate", "plan", "schema"])
def test_the_everyday_commands_import_no_heavy_library(args):
    heavy = loaded_by(args) & set(HEAVY)
    assert not heavy, f"cellab {' '.join(args)} imported {sorted(heavy)}"


def test_the_probe_sees_a_heavy_import():
    # the check can fail: a process that did import numpy is seen holding it
    assert "numpy" in loaded_by(["schema", "campaign"], before="import numpy")
