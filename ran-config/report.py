"""srsENB's JSON report: a stream of concatenated, pretty-printed JSON objects (not JSON lines, not an
array), possibly after a one-line text banner; read incrementally with JSONDecoder.raw_decode.

From it: per-UE metrics (`type: metrics`, cell_list[].cell_container.ue_list[].ue_container) and the SR
configuration each UE was given (`type: event`, `event_name: rrc_log`, the RRCConnectionSetup's
sr-ConfigIndex, anchors.md §1.4)."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, UTC
from pathlib import Path
from typing import Any

from cellab.contracts.enb import SrGroundTruth, UeMetrics
from cellab.sr_config import sr_from_index

from .logbound import SegmentTail, free_read_part
from .s1_events import parse_s1_line

# a truncated or corrupt object is waited for until this much text is pending, then skipped
_MAX_PENDING_CHARS = 4 << 20


def _bytes_from(path: Path, offset: int) -> bytes:
    """What a growing file holds past `offset` (nothing while it does not exist yet)."""
    try:
        with open(path, "rb") as src:
            src.seek(offset)
            return src.read()
    except FileNotFoundError:
        return b""


class ReportTail:
    """New objects appended to the report since the last call (the file may not exist yet). With keep_bytes
    (the eNB agent's: half the lab's bound) what was read more than keep_bytes ago is freed on disk (srsRAN
    gives the report no split: logbound.free_read_part), so the file holds at most that and what is unread."""

    def __init__(self, path: Path, keep_bytes: int = 0):
        self.path, self.keep_bytes = path, keep_bytes
        self._offset, self._freed = 0, 0
        self._text = ""
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._json = json.JSONDecoder()

    def read_new(self) -> list[dict]:
        data = _bytes_from(self.path, self._offset)
        self._offset += len(data)
        self._text += self._utf8.decode(data)
        if self.keep_bytes and self._offset - self._freed > 2 * self.keep_bytes:
            if free_read_part(self.path, self._offset - self.keep_bytes):
                self._freed = self._offset - self.keep_bytes
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


# ----------------------------------------------------------------- the eNB's own SR receptions (PHY log)
# srsenb's PHY worker logs every PUCCH it decodes at info level (cc_worker.cc, "PUCCH: cc=%d; %s" with
# srsran_pucch_rx_info); on a TTI that is one of the UE's SR occasions the UCI text carries ", sr=yes|no"
# (srsran_uci_data_info). The line's context is the uplink TTI (0..10239), its stamp UTC wall time.
_PUCCH_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+) \[PHY[^\]]*\] \[[ID]\] \[\s*(\d+)\] PUCCH: cc=(\d+); "
                       r"rnti=0x([0-9a-fA-F]+),.*?, sr=(yes|no)")
TTI_WRAP = 10240


@dataclass(frozen=True)
class SrOccasion:
    """One SR occasion the eNB decoded: wall time (s, epoch), uplink TTI, RNTI, whether the UE sent SR."""

    t_s: float
    tti: int
    rnti: int
    sr: bool


def parse_pucch_line(line: str) -> SrOccasion | None:
    m = _PUCCH_RE.match(line)
    if not m or m.group(3) != "0":  # the primary cell carries the SR
        return None
    stamp = datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC).timestamp()
    return SrOccasion(t_s=stamp, tti=int(m.group(2)), rnti=int(m.group(4), 16), sr=m.group(5) == "yes")


class PhyLogTail:
    """The SR occasions srsenb's log gained since the last call (the file may not exist yet), and its S1 events
    on the way (`s1_events`: those read and not yet taken, cellab.ran.s1_events). The log is split within the
    lab's bound: read across its segments, each removed once read and older than the newest two (logbound)."""

    def __init__(self, path: Path):
        self.path, self._source, self._partial = path, SegmentTail(path), b""
        self.s1_events: list[dict[str, Any]] = []

    def read_new(self) -> list[SrOccasion]:
        data = self._source.read_new()
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()
        out = []
        for raw in lines:
            if b"PUCCH:" in raw and b", sr=" in raw:
                occ = parse_pucch_line(raw.decode(errors="replace"))
                if occ is not None:
                    out.append(occ)
            elif b"[S1AP" in raw and (event := parse_s1_line(raw.decode(errors="replace"))) is not None:
                self.s1_events.append(event)
        return out

    def take_s1_events(self) -> list[dict[str, Any]]:
        events, self.s1_events = self.s1_events, []
        return events


def read_occasions(path: Path, since_s: float = 0.0) -> dict[int, list[SrOccasion]]:
    """The eNB agent's sr_occasions.jsonl from `since_s` (wall clock) on, per RNTI."""
    by_rnti: dict[int, list[SrOccasion]] = {}
    for line in path.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
            occ = SrOccasion(float(row["t_s"]), int(row["tti"]), int(row["rnti"]), bool(row["sr"]))
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by the agent's append in progress
        if occ.t_s >= since_s:
            by_rnti.setdefault(occ.rnti, []).append(occ)
    return by_rnti


def _unwrap(occasions: list[SrOccasion]) -> list[int]:
    """Absolute TTIs: 10240 added at each wrap (the log's order; wall time tells a wrap from a reorder)."""
    out, base, last = [], 0, None
    for occ in occasions:
        if last is not None and occ.tti < last - TTI_WRAP // 2:
            base += TTI_WRAP
        last = occ.tti
        out.append(base + occ.tti)
    return out


def effective_sr(occasions: list[SrOccasion], configured_ms: int | None) -> dict[str, Any]:
    """The SR pattern one UE's SR receptions show (occasions of one RNTI, in log order).

    `period_ms`: the largest multiple of the smallest spacing between occasions (the configured period
    the eNB polled) that holds every SR reception on one phase, i.e. the spacing of the occasions the UE
    actually used; the configured period when the receptions fill every phase of a 2x grid. None with
    fewer than 3 receptions (8 to name a multiple). `unused`: occasions without SR that lie between two SRs at most 4 occasions
    apart (the UE still waiting for its grant, as the spacing shows: an SR not repeated at the next
    occasion). `tti_per_s`: the stack's TTI rate against wall time (1000 = real time)."""
    occasions = sorted(occasions, key=lambda o: o.t_s)
    ttis = _unwrap(occasions)
    out: dict[str, Any] = {"opportunities": len(occasions), "receptions": sum(o.sr for o in occasions),
                           "configured_ms": configured_ms, "period_ms": None}
    if len(ttis) >= 2 and occasions[-1].t_s > occasions[0].t_s:
        out["tti_per_s"] = round((ttis[-1] - ttis[0]) / (occasions[-1].t_s - occasions[0].t_s), 1)
    gaps = [b - a for a, b in zip(ttis, ttis[1:], strict=False) if b > a]
    polled = min(gaps) if gaps else configured_ms
    sr_ttis = [t for t, o in zip(ttis, occasions, strict=False) if o.sr]
    out["sr_ttis"] = sr_ttis[:2000]
    spacing: dict[int, int] = {}
    for a, b in zip(sr_ttis, sr_ttis[1:], strict=False):
        if polled and b - a <= 4 * polled:
            spacing[b - a] = spacing.get(b - a, 0) + 1
    out["spacing_ms"] = {str(k): v for k, v in sorted(spacing.items())}
    used = set(sr_ttis)
    unused = 0
    for a, b in zip(sr_ttis, sr_ttis[1:], strict=False):
        if polled and b - a <= 4 * polled:
            unused += sum(1 for t in ttis if a < t < b and t not in used)
    out["unused"] = unused
    if polled is None or len(sr_ttis) < 3:
        return out
    period = polled
    # 8 receptions on one phase of 2P happen by chance once in 128 when the UE uses every occasion
    while period * 2 <= 80 and len(sr_ttis) >= 8 and len({t % (period * 2) for t in sr_ttis}) == 1:
        period *= 2
    out["period_ms"] = period
    return out


def effective_per_ue(path: Path, since_s: float, configured_ms: int | None,
                     rntis: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
    """Each UE's effective SR pattern from the agent's sr_occasions.jsonl since `since_s`; `rntis`: UE name ->
    the hex C-RNTIs its console named (the last one is its current)."""
    by_rnti = read_occasions(path, since_s)
    out = {}
    for name, found in rntis.items():
        rnti = int(found[-1], 16) if found else None
        if rnti in by_rnti:
            out[name] = {"rnti": rnti} | effective_sr(by_rnti[rnti], configured_ms)
    return out
