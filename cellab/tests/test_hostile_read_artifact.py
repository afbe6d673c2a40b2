"""Issue 42, hostile class "read_artifact": a symbolic-link loop and absurd offsets (negative, past 2**63, past the
file's end) are answered with a validation error naming the parameter, never an internal error: the agent's
safe state is not triggered and the agent goes on serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from cellab.bus import OperationError
from cellab.bus.demo import DemoAgent
from cellab.bus.testing import lab_bus

pytestmark = pytest.mark.background  # no clock, no root


@pytest.fixture
def bus(tmp_path: Path):
    art = tmp_path / "artifacts" / "ue1"
    art.mkdir(parents=True)
    (art / "data.bin").write_bytes(b"0123456789")
    (art / "loop_a").symlink_to(art / "loop_b")
    (art / "loop_b").symlink_to(art / "loop_a")
    (art / "self").symlink_to(art / "self")
    (art / "sub").mkdir()
    (art / "sub" / "up").symlink_to(art / "sub" / "up" / "deeper")
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        yield controller


@pytest.mark.parametrize("name", ["loop_a", "self", "sub/up", "loop_a/x", "self/self/self"])
def test_a_symlink_loop_is_a_validation_error(bus, name):
    with pytest.raises(OperationError) as err:
        bus.request("ue1", "read_artifact", {"name": name})
    assert err.value.kind == "validation" and err.value.field == "params.name", err.value
    assert "link" in str(err.value)
    assert bus.request("ue1", "ping") is not None  # still serving


@pytest.mark.parametrize("offset", [-1, -(2**63), 2**63, 2**64, 10**30])
def test_an_absurd_offset_is_a_validation_error(bus, offset):
    with pytest.raises(OperationError) as err:
        bus.request("ue1", "read_artifact", {"name": "data.bin", "offset_bytes": offset})
    assert err.value.kind == "validation" and err.value.field == "params.offset_bytes", err.value


def test_offsets_within_the_file_and_past_its_end_still_read(bus, tmp_path):
    for past_the_end in (10, 10**6, 2**63 - 1):  # no data, eof
        bus.request("ue1", "read_artifact", {"name": "data.bin", "offset_bytes": past_the_end})
    assert bus.fetch_artifact("ue1", "data.bin", tmp_path / "copy.bin").read_bytes() == b"0123456789"
