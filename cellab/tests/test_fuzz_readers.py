"""Property-based fuzzing of every reader: whatever the bytes, only the project's own error type escapes, and
each case ends within 5 s (hypothesis' deadline). The whole file stays well under a minute."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from cellab.errors import CellabError
from cellab.testkit.fuzzing import FUZZ, csv_rows, json_values, only_ours, raw, write_file, yaml_line

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# ------------------------------------------------------------------ YAML documents
CAMPAIGN_KEYS = ["name", "lab", "repeat", "order", "factors", "fixed", "schedules", "workload", "timeouts", "retry"]


@FUZZ
@given(data=raw)
def test_campaign_bytes(folder, data):
    from cellab.campaign.load import load_campaign

    only_ours(load_campaign, write_file(folder, "c.yaml", data))


@FUZZ
@given(doc=st.dictionaries(st.sampled_from(CAMPAIGN_KEYS), json_values, max_size=6))
def test_campaign_structure(folder, doc):
    from cellab.campaign.load import load_campaign, plan

    path = write_file(folder, "c.yaml", "".join(yaml_line(k, v) for k, v in doc.items()))
    try:
        plan(load_campaign(path), path)
    except CellabError:
        pass


@FUZZ
@given(data=raw, doc=st.dictionaries(st.sampled_from(["name", "controller", "hosts", "agents", "devices"]),
                                     json_values, max_size=5))
def test_inventory(folder, data, doc):
    from cellab.inventory.model import load_inventory

    only_ours(load_inventory, write_file(folder, "lab.yaml", data))
    only_ours(load_inventory, write_file(folder, "lab.yaml", "".join(yaml_line(k, v) for k, v in doc.items())))




@FUZZ
@given(data=raw, numbers=st.lists(st.integers(min_value=-5, max_value=10**25).map(str), max_size=20))
def test_trace(folder, data, numbers):
    from cellab.campaign.traces import read_mahimahi

    only_ours(read_mahimahi, write_file(folder, "t.down", data))
    try:
        trace = read_mahimahi(write_file(folder, "t.down", "\n".join(numbers)))
    except CellabError:
        return
    assert trace == sorted(trace) and trace[-1] > 0


@FUZZ
@given(data=raw, body=csv_rows, header=st.sampled_from(["ms,flow,bytes", "t_ns,flow,dir,seq,ack,len", "x,y"]))
def test_probe_log(folder, data, body, header):
    from cellab.campaign.traces import trace_from_probe_log

    only_ours(trace_from_probe_log, write_file(folder, "p.csv", data))
    only_ours(trace_from_probe_log, write_file(folder, "p.csv", header + "\n" + body))


@FUZZ
@given(data=raw, doc=json_values)
def test_manifest(folder, data, doc):
    from cellab.results.store_check import read_manifest

    only_ours(read_manifest, write_file(folder, "manifest.json", data))
    only_ours(read_manifest, write_file(folder, "manifest.json", json.dumps(doc)))


@FUZZ
@given(data=raw)
def test_key_certificate(folder, data):
    from cellab.bus.keys import load_public_key, load_secret_key

    only_ours(load_public_key, write_file(folder, "k.key", data))
    only_ours(load_secret_key, write_file(folder, "k.key", data))


# ------------------------------------------------------------------ the bus's operation parameters
def _operation_models() -> list[tuple[str, type[BaseModel]]]:
    """Every role contract's operation parameters (what each agent validates a request body with)."""
    from cellab.contracts import attenuator, core, enb, server, ue

    return [(f"{c.role}.{op.name}", op.params) for c in (attenuator.ATTENUATOR_CONTRACT, core.CORE_CONTRACT,
                                                         enb.ENB_CONTRACT, server.SERVER_CONTRACT, ue.UE_CONTRACT)
            for op in c.ops]


@FUZZ
@given(body=st.one_of(raw, json_values.map(lambda v: json.dumps(v).encode())), pick=st.integers(0, 1000))
def test_operation_parameters(body, pick):
    """What an agent does with a request body: validation errors become a reply, nothing else escapes."""
    models = _operation_models()
    assert models
    _, model = models[pick % len(models)]
    try:
        model.model_validate_json(body or b"{}")
    except ValidationError:
        pass


