"""An agent host's lean install (`make setup-agent ROLE=...`: the base package, no `controller` extra): every
agent starts without the controller's packages. The test hides them from the import system, as a host that
never installed them, and starts each registered agent kind's class and `cellab agent --help`."""

from __future__ import annotations

import pytest
import re
import subprocess
import sys
import textwrap
import tomllib

from cellab.paths import PROJECT_ROOT

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

PYPROJECT = PROJECT_ROOT / "pyproject.toml"
IMPORT_NAMES = {"numpy": "numpy", "scipy": "scipy", "matplotlib": "matplotlib", "distributed": "distributed",
                "cryptography": "cryptography", "pandas": "pandas", "pyarrow": "pyarrow"}


def controller_only() -> list[str]:
    extra = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]["controller"]
    return [re.split(r"[<>=\[ ]", requirement)[0] for requirement in extra]


def test_the_base_package_leaves_the_controllers_packages_out():
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    base = {re.split(r"[<>=\[ ]", requirement)[0].lower() for requirement in project["dependencies"]}
    hidden = controller_only()
    assert set(hidden) == set(IMPORT_NAMES), hidden  # a new controller package: name its import here
    assert not base & {name.lower() for name in hidden}, base


def test_every_agent_starts_where_the_controller_packages_are_not_installed():
    hidden = [IMPORT_NAMES[name] for name in controller_only()] + ["dask"]  # distributed brings dask
    script = textwrap.dedent(f"""
        import sys

        HIDDEN = {hidden!r}

        class NotInstalled:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in HIDDEN:
                    raise ModuleNotFoundError(f"No module named {{name!r}} (a lean install)")
                return None

        sys.meta_path.insert(0, NotInstalled())
        sys.argv = ["cellab", "agent", "--help"]
        from cellab.contracts.registry import agent_class, registered

        kinds = sorted(registered("cellab.agents"))
        for kind in kinds:
            role, _, name = kind.partition(".")
            agent_class(role, name)
        print("agents:", " ".join(kinds))
        from cellab.cli import main
        main()
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=PROJECT_ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    kinds = proc.stdout.split("agents:", 1)[1].splitlines()[0].split()
    assert {"server.linux", "ue.virtual", "ue.android", "attenuator.any", "enb.srsran", "core.epc"} <= set(kinds)
    assert "--role" in proc.stdout  # the agent command's own help
