"""`make bench BENCH=startup`: the CPU a `cellab` start takes for the commands a person types most (`--help`,
`validate`, `plan`, `schema`), against a bare `python -c pass` and the libraries every command needs (typer,
pydantic, PyYAML, rich) measured in the same run. Target: under 0.3 s of CPU each."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = ROOT / "runs" / "demo" / "cc-shootout.yaml"
TARGET_CPU_S = 0.3
TRIES = 5


def child_cpu_s(argv: list[str]) -> float:
    """User + system CPU of one child process run to its end."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped above
    return usage.ru_utime + usage.ru_stime


def median_cpu_s(argv: list[str]) -> float:
    child_cpu_s(argv)  # one start to warm the file cache and the bytecode cache
    return statistics.median(child_cpu_s(argv) for _ in range(TRIES))


def main() -> None:
    python = sys.executable
    cellab = [python, "-m", "cellab"]
    bare = median_cpu_s([python, "-c", "pass"])
    libs = median_cpu_s([python, "-c", "import typer, pydantic, yaml, rich.console"])
    print(f"baseline: python -c pass {bare:.3f} s CPU; typer+pydantic+yaml+rich {libs:.3f} s")
    for name, args in (("--help", ["--help"]), ("validate", ["validate", str(CAMPAIGN)]),
                       ("plan", ["plan", str(CAMPAIGN)]), ("schema", ["schema", "campaign"])):
        cpu = median_cpu_s(cellab + args)
        verdict = "ok" if cpu < TARGET_CPU_S else f"over the {TARGET_CPU_S} s target"
        print(f"cellab {name:9s} {cpu:.3f} s CPU  {cpu / bare:5.1f}x bare python, {cpu / libs:4.1f}x its libraries"
              f"  ({verdict})")


if __name__ == "__main__":
    main()
