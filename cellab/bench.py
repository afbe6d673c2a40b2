"""`make bench`: every room's benchmark, each printing its measurement beside a baseline from the same run.

    python -m cellab.bench            # all
    python -m cellab.bench bus cell   # some
"""

from __future__ import annotations

import importlib
import sys
import time

BENCHMARKS = {
    "bus": "cellab.bus.bench",
    "cell": "cellab.emulator.bench",
    "attenuator": "cellab.attenuator.bench",
    "modules": "cellab.server.bench",
    "probe": "cellab.ue.probe_bench",
    "pcap": "cellab.results.pcap_bench",
    "srsran": "cellab.ran.bench",
    "orchestration": "cellab.testkit.orchestration_bench",
    "fidelity": "cellab.fidelity.bench",
    "report": "cellab.report.bench",
    "scale": "cellab.cluster.bench",
    "sr": "cellab.ran.sr_bench",
    "startup": "cellab.testkit.startup_bench",
    "extended": "cellab.testkit.extended_bench",
}


def main(argv: list[str]) -> int:
    chosen = argv or list(BENCHMARKS)
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        print(f"unknown benchmark(s) {', '.join(unknown)} (allowed: {', '.join(BENCHMARKS)})", file=sys.stderr)
        return 2
    failures = 0
    for name in chosen:
        print(f"=== {name}", flush=True)
        started = time.monotonic()
        try:
            module = importlib.import_module(BENCHMARKS[name])
        except ImportError as exc:
            print(f"{name}: not available in this installation ({exc})")
            continue
        try:
            module.main()
        except Exception as exc:  # one broken benchmark must not hide the others' numbers
            failures += 1
            print(f"{name}: FAILED: {type(exc).__name__}: {exc}")
        print(f"=== {name} took {time.monotonic() - started:.0f} s", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
