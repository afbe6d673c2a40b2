"""srsENB's JSON report: a stream of concatenated, pretty-printed JSON objects (not JSON lines, not an
array), possibly after a one-line text banner; read incrementally with JSONDecoder.raw_decode.

From it: per-UE metrics (`type: metrics`, cell_list[].cell_container.ue_list[].ue_container) and the SR
configuration each UE was given (`type: event`, `event_name: rrc_log`, the RRCConnectionSetup's
sr-ConfigIndex, anchors.md §1.4)."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path

from cellab.contracts.enb import SrGroundTruth, UeMetrics
from cellab.sr_config import sr_from_index

# a truncated or corrupt object is waited for until this much text is pending, then skipped
_MAX_PENDING_CHARS = 4 << 20


class ReportTail:
    """New objects appended to the report since the last call (the file may not exist yet)."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0
        self._text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._json = json.JSONDecoder()

    def read_new(self) -> list[dict]:
        try:
            with open(self.path, "rb") as src:
                src.seek(self._offset)
                data = src.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        self._text += self._utf8.decode(data)
        return list(self._drain())

    def _drain(self) -> Iterator[dict]:
        text, pos = self._text, 0
        while True:
            start = text.find("{", pos)  # skips whitespace and the banner line
            if start < 0:
                pos = len(text)
                break
            try:
                obj, end = self._json.raw_decode(text, start)
            except json.JSONDecodeError:
                if len(text) - start > _MAX_PENDING_CHARS:  # not an object being written: skip its first line
                    nl = text.find("\n", start)
                    pos = nl + 1 if nl >= 0 else len(text)
                    continue
                pos = start
                break
            pos = end
            if isinstance(obj, dict):
                yield obj
        self._text = text[pos:]


def read_report(path: Path) -> list[dict]:
    return ReportTail(path).read_new()


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def ue_metrics(obj: dict) -> list[UeMetrics]:
    """The per-UE samples of one `metrics` object (empty for events and cells without UEs)."""
    if obj.get("type") != "metrics":
        return []
    t_s = float(obj.get("timestamp", 0.0))
    out = []
    for cell in obj.get("cell_list", []):
        cc = cell.get("cell_container", {})
        for entry in cc.get("ue_list", []):
            ue = entry.get("ue_container", {})
            bearers = [b.get("bearer_container", {}) for b in ue.get("bearer_list", [])]
            bsr = ue.get("ul_bsr")
            out.append(UeMetrics(
                t_s=t_s, carrier_id=int(cc.get("carrier_id", 0)), pci=int(cc.get("pci", 0)), rnti=int(ue["ue_rnti"]),
                dl_cqi=_num(ue.get("dl_cqi")), dl_mcs=_num(ue.get("dl_mcs")), dl_bitrate_bps=_num(ue.get("dl_bitrate")),
                dl_bler=_num(ue.get("dl_bler")), ul_snr_db=_num(ue.get("ul_snr")), ul_mcs=_num(ue.get("ul_mcs")),
                ul_bitrate_bps=_num(ue.get("ul_bitrate")), ul_bler=_num(ue.get("ul_bler")),
                ul_phr_db=_num(ue.get("ul_phr")), ul_bsr_bytes=int(bsr) if isinstance(bsr, int | float) else None,
                ul_pusch_rssi_db=_num(ue.get("ul_pusch_rssi")), ul_pucch_rssi_db=_num(ue.get("ul_pucch_rssi")),
                dl_buffered_bytes=sum(int(b.get("dl_buffered_bytes", 0)) for b in bearers),
                ul_buffered_bytes=sum(int(b.get("ul_buffered_bytes", 0)) for b in bearers),
                dl_total_bytes=sum(int(b.get("dl_total_bytes", 0)) for b in bearers),
                ul_total_bytes=sum(int(b.get("ul_total_bytes", 0)) for b in bearers)))
    return out


def _find_key(node: object, key: str) -> object | None:
    if isinstance(node, dict):
        if key in node:
            return node[key]
        children = node.values()
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _find_key(child, key)
        if found is not None:
            return found
    return None


def sr_ground_truth(obj: dict) -> SrGroundTruth | None:
    """The SR config of an RRCConnectionSetup event (sr-ConfigIndex -> TS 36.213 Table 10.1.5-1), else None."""
    if obj.get("type") != "event" or obj.get("event_name") != "rrc_log":
        return None
    data = obj.get("event_data", {})
    text = data.get("asn1_message")
    if not isinstance(text, str) or "rrcConnectionSetup" not in text:
        return None
    try:
        message = json.loads(text)
    except json.JSONDecodeError:
        return None
    setup = _find_key(message, "rrcConnectionSetup")
    index = _find_key(setup, "sr-ConfigIndex")
    if not isinstance(index, int):
        return None
    cfg = sr_from_index(index)
    rnti = data.get("rnti")
    return SrGroundTruth(sr_period_ms=cfg.sr_period_ms, sr_offset_ms=cfg.sr_offset_ms,
                         sr_config_index=index, source="rrc", rnti=rnti if isinstance(rnti, int) else None)
