"""`make bench BENCH=extended`: the tests `make test` leaves out (marker `extended`).

Whole sweeps of the papers' claims (every SR period, every fading seed, the C2TCP traces, the end-to-end
shoot-outs) and the long real-stack scenarios: minutes of lab time each, which would take `make test` past its
15 minutes on 2 cores (a virtual cell needs a core of its own, so lab tests cannot share the two). `make test`
keeps one representative case of each sweep and one test of each capability; this runs the rest alone on the
host (no xdist) and prints each test's measured lines and outcome.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-m", "extended", "-p", "no:xdist", "-s", "-q",
                           "-rA", "--durations=0"], cwd=ROOT, check=False)
    print(f"extended: the tests took {time.monotonic() - started:.0f} s (pytest exit {done.returncode})")
    if done.returncode not in (0, 5):  # 5: none selected
        raise RuntimeError(f"some extended tests failed (pytest exit {done.returncode}): see above")


if __name__ == "__main__":
    main()
