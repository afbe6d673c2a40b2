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
