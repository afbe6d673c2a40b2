"""The uplink queue policies under an upload the uplink cannot carry (UDP at 30 Mbit/s against ~9 Mbit/s of
PUSCH): srsue's queue (256 packets not yet started, tail drop: srsRAN's rlc_um_base::write_sdu refuses an SDU at a
full tx_sdu_queue) holds at most 256 packets, and the byte-limited queue (`ul_queue: N`) fills to its N."""

from __future__ import annotations

from cellab.emulator.ttilog import read_ttilog
from netlab import finish, start_iperf3_download

DATAGRAM_BYTES = 1400
IP_PACKET_BYTES = DATAGRAM_BYTES + 28  # + UDP and IPv4 headers
SRSUE_QUEUE_SDUS = 256
BYTE_LIMIT = 2 << 20


def _overloaded_upload(vlab, tmp_path, ul_queue) -> tuple[int, dict]:
    lab = vlab(n_prb=25, ul_queue=ul_queue)
    topo = lab.topology()
    server, client = start_iperf3_download(lab.srv_ns, topo.server.address, topo.ues[0].netns, 2,
                                           udp_bps=30_000_000, length=DATAGRAM_BYTES, upload=True)
    finish(client, server)
    with lab.control() as ctl:
        ue = ctl.stats()["ues"][0]
    rec = read_ttilog(lab.collect(tmp_path / str(ul_queue))["cell_tti_log"]).ue(0)
    lab.down()
    return int(rec["ul_buffer_bytes"].max()), ue


def test_srsue_queue_holds_256_packets_and_a_byte_limit_its_bytes(vlab, tmp_path):
    srsue_max, srsue_ue = _overloaded_upload(vlab, tmp_path, "srsue")
    bytes_max, bytes_ue = _overloaded_upload(vlab, tmp_path, BYTE_LIMIT)
    summary = f"srsue: max {srsue_max} B, {srsue_ue}; bytes: max {bytes_max} B, {bytes_ue}"
    # 256 packets not yet started, plus at most the one whose transmission began
    assert srsue_max <= (SRSUE_QUEUE_SDUS + 1) * IP_PACKET_BYTES, summary
    assert srsue_max >= (SRSUE_QUEUE_SDUS - 2) * IP_PACKET_BYTES, summary  # it did fill
    assert srsue_ue["ul_drop_pkts"] > 0, summary
    assert bytes_max > 3 * (SRSUE_QUEUE_SDUS + 1) * IP_PACKET_BYTES and bytes_max <= BYTE_LIMIT, summary
    assert bytes_ue["ul_drop_pkts"] > 0, summary
