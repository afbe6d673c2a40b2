"""A diagnostic agent with a few harmless operations: checks a bus link end to end, and drives the
benchmark and the bus tests (echo, a bounded sleep, a counter of executed operations)."""

from __future__ import annotations

import collections
import threading
import time

from pydantic import BaseModel, ConfigDict, Field

from cellab.bus.agent import Agent
from cellab.bus.errors import OperationFailed
from cellab.bus.operation import operation


class EchoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=65536)
    count: int = Field(1, ge=1, le=1000)


class SleepParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    duration_s: float = Field(gt=0, le=60)


class FailParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = Field(max_length=1000)
    fatal: bool = False


_EXECUTED_KEPT = 1000


class DemoOps:
    """Operations mixed into DemoAgent (the pattern every room follows)."""

    executed: collections.deque[str]

    @operation
    def echo(self, params: EchoParams) -> dict:
        self.executed.append("echo")
        return {"text": params.text * params.count}

    @operation
    def sleep(self, params: SleepParams) -> dict:
        self.executed.append("sleep")
        start = time.monotonic()
        time.sleep(params.duration_s)
        return {"slept_s": time.monotonic() - start}

    @operation(concurrent=True)
    def sleep_concurrent(self, params: SleepParams) -> dict:
        self.executed.append("sleep_concurrent")
        start = time.monotonic()
        time.sleep(params.duration_s)
        return {"slept_s": time.monotonic() - start, "thread": threading.current_thread().name}

    @operation
    def fail(self, params: FailParams) -> dict:
        self.executed.append("fail")
        raise OperationFailed(params.message, fatal=params.fatal)

    @operation
    def executed_ops(self) -> dict:
        return {"executed": list(self.executed)}


class DemoAgent(DemoOps, Agent):
    role = "demo"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self.executed = collections.deque(maxlen=_EXECUTED_KEPT)  # the benchmark sends thousands
        self.safe_states = 0
        super().__init__(*args, **kwargs)

    def safe_state(self) -> None:
        self.safe_states += 1
