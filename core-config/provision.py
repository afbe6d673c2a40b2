"""Provision subscribers into a core's database from inside the core's network namespace.

The core agent runs in the host's namespace and its daemons (and a db_local FerretDB on 127.0.0.1) in the
lab's: it runs `python -m cellab.epc.provision --db URL --flavour F` there with the subscribers as JSON on
stdin (K and OPc travel through the pipe only: never argv, a file or a log). Prints the counts; an error
is one line on stderr (the database's messages scrubbed of anything that looks like a key), exit 1."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from cellab.errors import CellabError, InputError, InputErrors

from .db import SubscriberDb
from .subscribers import Subscriber

RETRY_S = 15.0  # a FerretDB just started may answer its port before its first query


def provision(url: str, flavour: str, subscribers: list[Subscriber], timeout_s: float = RETRY_S) -> tuple[int, int]:
    """(inserted, updated), retried until timeout_s while the server does not answer yet."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with SubscriberDb(url, flavour, timeout_s=3.0) as db:
                return db.upsert(subscribers)
        except (InputError, InputErrors):
            raise  # the data, not a server still starting: no retry helps
        except CellabError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


def provision_in(netns: str | None, url: str, flavour: str, subscribers: list[Subscriber],
                 timeout_s: float = RETRY_S) -> str:
    """provision() in namespace `netns` (a subprocess there), else here; returns a one-line summary."""
    if not netns:
        inserted, updated = provision(url, flavour, subscribers, timeout_s)
        return f"{inserted} inserted, {updated} updated"
    from cellab.labs.netns import in_netns

    payload = json.dumps([s.model_dump() for s in subscribers])
    proc = subprocess.run(in_netns(netns, [sys.executable, "-m", "cellab.epc.provision", "--db", url, "--flavour",
                                           flavour, "--timeout-s", str(timeout_s)]),
                          input=payload, capture_output=True, text=True, timeout=timeout_s + 30)
    if proc.returncode != 0:
        lines = (proc.stderr.strip() or proc.stdout.strip() or f"exit code {proc.returncode}").splitlines()
        raise CellabError(f"provisioning {len(subscribers)} subscribers into {url}: {lines[-1][:400]}")
    return proc.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cellab.epc.provision")
    parser.add_argument("--db", required=True)
    parser.add_argument("--flavour", default="open5gs")
    parser.add_argument("--timeout-s", type=float, default=RETRY_S)
    args = parser.parse_args(argv)
    try:
        subscribers = [Subscriber.model_validate(row) for row in json.loads(sys.stdin.read())]
        inserted, updated = provision(args.db, args.flavour, subscribers, args.timeout_s)
    except CellabError as exc:
        print(str(exc).replace("\n", "; "), file=sys.stderr)
        return 1
    except (ValueError, TypeError):  # a validation error hides its inputs (hide_input_in_errors)
        print("the subscribers on stdin are not a JSON list of valid subscribers", file=sys.stderr)
        return 1
    print(f"{inserted} inserted, {updated} updated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
