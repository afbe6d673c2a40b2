"""Hypothesis strategies the readers' fuzz tests share (the core's and the rooms'): text that looks like the
formats mixed with anything at all, raw bytes, JSON-like values, and a check that only the project's own error
escapes. Tests only (hypothesis is a dev dependency)."""

from __future__ import annotations

import json
import string
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from cellab.errors import CellabError

FUZZ = settings(max_examples=200, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow], database=None)

# text that looks like the formats (keys, digits, separators, YAML syntax) mixed with anything at all
ALPHABET = string.ascii_letters + string.digits + " \n\t:,-[]{}&*!|>'\"#.%@`?~=_+/\\"
texty = st.text(alphabet=ALPHABET, max_size=400)
anything = st.one_of(texty, st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
raw = st.one_of(st.binary(max_size=300), anything.map(str.encode))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)


def yaml_line(key: str, value: object) -> str:
    return f"{key}: {json.dumps(value)}\n"


def write_file(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


def only_ours(call, *args: object) -> None:
    try:
        call(*args)
    except CellabError:
        pass

csv_cell = st.one_of(st.integers().map(str), st.floats().map(str), st.text(alphabet=ALPHABET, max_size=8))
csv_rows = st.lists(st.lists(csv_cell, max_size=5).map(",".join), max_size=12).map("\n".join)


# ---- the bus: frames of the ZeroMQ envelope (cellab/bus/wire.py) for the bus's fuzz tests
def _json_frame(value: object) -> bytes:
    return json.dumps(value).encode()  # NaN and Infinity stay in, as JSON's usual extension


# JSON nested deeper than any parser's limit, without a Python recursion to build it
deep_json = st.integers(min_value=1, max_value=3000).map(lambda n: b"[" * n + b"]" * n)
json_frames = st.one_of(json_values.map(_json_frame), deep_json, raw)


_DROP = object()


def _mutated(valid: dict, changes: dict, stray: dict) -> dict:
    header = {**stray, **valid}
    for name, value in changes.items():
        if value is _DROP:
            header.pop(name, None)
        else:
            header[name] = value
    return header


def bus_header(fields: dict[str, st.SearchStrategy]) -> st.SearchStrategy[dict]:
    """A header object: well-formed, with a field or two dropped or set to any JSON value at all, and
    a stray key now and then."""
    changes = st.dictionaries(st.sampled_from(sorted(fields)), st.one_of(json_values, st.just(_DROP)), max_size=2)
    stray = st.dictionaries(st.text(max_size=8), json_values, max_size=1)
    return st.builds(_mutated, st.fixed_dictionaries(fields), changes, stray)


def bus_frames(headers: st.SearchStrategy[dict], bodies: st.SearchStrategy[bytes]) -> st.SearchStrategy[list[bytes]]:
    """One message: mostly [header, body] (the bus's shape) with a header from `headers`, else a frame
    of anything for the header, 1 to 4 frames of anything, or one frame 3 to 50 times (cheaper to draw
    than 50 frames)."""
    header_frames = headers.map(_json_frame)
    return st.one_of(
        st.tuples(header_frames, bodies).map(list),
        st.tuples(header_frames, bodies).map(list),
        st.tuples(header_frames, bodies).map(list),
        st.tuples(json_frames, bodies).map(list),
        st.lists(st.one_of(header_frames, json_frames, bodies), min_size=1, max_size=4),
        st.tuples(st.one_of(header_frames, bodies), st.integers(min_value=3, max_value=50)).map(lambda t: [t[0]] * t[1]),
    )


rids = st.integers(min_value=0, max_value=2**63)
deadlines = st.one_of(st.floats(min_value=0.001, max_value=60), st.integers(min_value=1, max_value=60))
# what a controller sends an agent
request_headers = bus_header({"version": st.just(1), "kind": st.sampled_from(["request", "heartbeat"]),
                              "id": rids, "deadline": deadlines,
                              "op": st.sampled_from(["ping", "clock", "describe", "list_artifacts", "read_artifact",
                                                     "echo", "fail", "quick", "rm_rf", ""])})
request_bodies = st.one_of(
    st.fixed_dictionaries({}, optional={"text": st.one_of(st.text(max_size=20), json_values),
                                        "count": st.one_of(st.integers(), json_values),
                                        "name": st.one_of(st.text(max_size=20), json_values),
                                        "message": st.text(max_size=20), "fatal": st.booleans()}).map(_json_frame),
    json_frames, st.just(b""))
# what an agent sends the controller ("{id}" is replaced by a pending request's id)
agent_headers = bus_header({"version": st.just(1),
                            "kind": st.sampled_from(["reply", "error", "hello", "heartbeat", "bye", "telemetry"]),
                            "id": st.one_of(rids, st.just("{id}")), "role": st.text(max_size=20),
                            "agent_version": st.text(max_size=20), "raw": st.booleans(),
                            "meta": st.dictionaries(st.text(max_size=8), json_values, max_size=3)})
error_bodies = st.fixed_dictionaries({}, optional={"kind": st.text(max_size=12), "message": st.text(max_size=40),
                                                   "field": st.text(max_size=12), "allowed": json_values})
reply_bodies = st.one_of(error_bodies.map(_json_frame), json_frames, st.just(b""))
telemetry_headers = bus_header({"version": st.just(1), "kind": st.just("telemetry"),
                                "agent": st.sampled_from(["ue1", "ue2", "../x", ""]), "topic": st.text(max_size=12),
                                "t_s": st.floats()})
