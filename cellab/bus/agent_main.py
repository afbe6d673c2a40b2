"""Run one agent as a process: `python -m cellab.bus.agent_main --name ue1 --controller tcp://HOST:PORT`.

--class picks the Agent subclass (module:Class, default the diagnostic DemoAgent). Logs are JSON lines
on stderr. SIGTERM/SIGINT stop the agent (its devices go to their safe state first).
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from cellab.bus.agent import Agent
from cellab.errors import CellabError, InputError

_RECORD_KEYS = set(vars(logging.makeLogRecord({})))


class JsonLines(logging.Formatter):
    """One JSON object per record: time, level, logger, message and the record's extras."""

    def format(self, record: logging.LogRecord) -> str:
        out = {"t_s": round(record.created, 6), "level": record.levelname, "logger": record.name,
               "msg": record.getMessage()}
        out.update({k: v for k, v in vars(record).items() if k not in _RECORD_KEYS and k != "message"})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def load_agent_class(spec: str) -> type[Agent]:
    module_name, _, class_name = spec.partition(":")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise InputError("agent_main", "--class", f"cannot load {spec!r}: {exc}", ["module.path:ClassName"]) from None
    if not (isinstance(cls, type) and issubclass(cls, Agent)):
        raise InputError("agent_main", "--class", f"{spec!r} is not an Agent subclass")
    return cls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="cellab.bus.agent_main", description=__doc__.splitlines()[0])
    ap.add_argument("--name", required=True)
    ap.add_argument("--controller", required=True, help="controller endpoint, e.g. tcp://10.0.0.1:5555")
    ap.add_argument("--telemetry", default=None, help="controller telemetry endpoint")
    ap.add_argument("--class", dest="agent_class", default="cellab.bus.demo:DemoAgent")
    ap.add_argument("--secret-key", type=Path, default=None, help="this agent's NAME.key_secret")
    ap.add_argument("--controller-key", type=Path, action="append", default=None,
                    help="an allowed controller public key (repeatable)")
    ap.add_argument("--artifact-dir", type=Path, default=None)
    ap.add_argument("--insecure", action="store_true", help="no CURVE (benchmark baselines only)")
    ap.add_argument("--heartbeat-s", type=float, default=1.0)
    ap.add_argument("--controller-lost-s", type=float, default=5.0)
    ap.add_argument("--clock-skew-s", type=float, default=0.0, help="add this to the agent's clock (tests)")
    args = ap.parse_args(argv)

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLines())
    logging.basicConfig(level=logging.INFO, handlers=[handler])
    try:
        cls = load_agent_class(args.agent_class)
        skew_s = args.clock_skew_s
        agent = cls(args.name, args.controller, telemetry_endpoint=args.telemetry, secret_key_file=args.secret_key,
                    controller_public_keys=args.controller_key, artifact_dir=args.artifact_dir,
                    insecure=args.insecure, heartbeat_s=args.heartbeat_s, controller_lost_s=args.controller_lost_s,
                    clock=(lambda: time.time() + skew_s))
    except CellabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    def on_signal(signum: int, frame: FrameType | None) -> None:
        agent.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(agent.start_line(), file=sys.stderr, flush=True)  # the controller logs the same when it connects
    agent.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
