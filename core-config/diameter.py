"""A minimal S6a Diameter client: asks an HSS for an authentication vector as an MME would (AIR/AIA).

Used to check that an HSS sees a subscriber we provisioned without a radio: a known IMSI gets an
E-UTRAN vector (RAND, XRES, AUTN, KASME), an unknown one DIAMETER_ERROR_USER_UNKNOWN (5001).
Formats: RFC 6733 (header, AVPs, CER/CEA), 3GPP TS 29.272 (S6a AIR/AIA AVP codes).

    python -m cellab.epc.diameter --hss 127.0.0.4 --imsi 001010123456780 --plmn 00101
prints one JSON object (never the vector's values: KASME is key material)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import struct
import sys
from dataclasses import dataclass

VENDOR_3GPP = 10415
APP_S6A = 16777251
CMD_CER, CMD_DWR, CMD_DPR, CMD_AIR = 257, 280, 282, 318
DISCONNECT_CAUSE, DO_NOT_WANT_TO_TALK_TO_YOU = 273, 2
FLAG_REQUEST, FLAG_PROXIABLE = 0x80, 0x40
AVP_VENDOR, AVP_MANDATORY = 0x80, 0x40
# RFC 6733 AVP codes
USER_NAME, HOST_IP, AUTH_APP_ID, VENDOR_SPECIFIC_APP_ID, SESSION_ID = 1, 257, 258, 260, 263
ORIGIN_HOST, SUPPORTED_VENDOR_ID, VENDOR_ID, PRODUCT_NAME, RESULT_CODE = 264, 265, 266, 269, 268
AUTH_SESSION_STATE, DESTINATION_REALM, DESTINATION_HOST, ORIGIN_REALM = 277, 283, 293, 296
EXPERIMENTAL_RESULT, EXPERIMENTAL_RESULT_CODE = 297, 298
# TS 29.272 AVP codes (vendor 10415)
VISITED_PLMN_ID, REQ_EUTRAN_AUTH_INFO, N_REQUESTED_VECTORS, IMMEDIATE_RESPONSE = 1407, 1408, 1410, 1412
AUTHENTICATION_INFO, EUTRAN_VECTOR, RAND, XRES, AUTN, KASME = 1413, 1414, 1447, 1448, 1449, 1450
USER_UNKNOWN = 5001


def avp(code: int, data: bytes, vendor: int | None = None, mandatory: bool = True) -> bytes:
    flags = (AVP_MANDATORY if mandatory else 0) | (AVP_VENDOR if vendor else 0)
    head = 12 if vendor else 8
    length = head + len(data)
    out = struct.pack("!IB", code, flags) + length.to_bytes(3, "big")
    if vendor:
        out += struct.pack("!I", vendor)
    return out + data + b"\0" * (-length % 4)


def u32(code: int, value: int, vendor: int | None = None, mandatory: bool = True) -> bytes:
    return avp(code, struct.pack("!I", value), vendor, mandatory)


def text(code: int, value: str, vendor: int | None = None, mandatory: bool = True) -> bytes:
    return avp(code, value.encode(), vendor, mandatory)


def message(cmd: int, app: int, flags: int, avps: list[bytes], hop: int, end: int) -> bytes:
    body = b"".join(avps)
    return (struct.pack("!B", 1) + (20 + len(body)).to_bytes(3, "big") + struct.pack("!B", flags)
            + cmd.to_bytes(3, "big") + struct.pack("!III", app, hop, end) + body)


def parse_avps(data: bytes) -> list[tuple[int, int | None, bytes]]:
    """(code, vendor, data) of each AVP in `data`."""
    found, offset = [], 0
    while offset + 8 <= len(data):
        code, flags = struct.unpack_from("!IB", data, offset)
        length = int.from_bytes(data[offset + 5:offset + 8], "big")
        head, vendor = 8, None
        if flags & AVP_VENDOR:
            vendor, head = struct.unpack_from("!I", data, offset + 8)[0], 12
        found.append((code, vendor, data[offset + head:offset + length]))
        offset += length + (-length % 4)
    return found


def find(avps: list[tuple[int, int | None, bytes]], code: int) -> bytes | None:
    return next((d for c, _, d in avps if c == code), None)


def plmn_bytes(plmn: str) -> bytes:
    """MCC+MNC digits as TS 24.008 encodes them (BCD, filler F for a 2-digit MNC)."""
    mcc, mnc = plmn[:3], plmn[3:]
    mnc3 = int(mnc[2]) if len(mnc) == 3 else 0xF
    return bytes([int(mcc[1]) << 4 | int(mcc[0]), mnc3 << 4 | int(mcc[2]), int(mnc[1]) << 4 | int(mnc[0])])


@dataclass
class AuthAnswer:
    result_code: int
    vectors: int
    rand_len: int = 0
    xres_len: int = 0
    autn_len: int = 0
    kasme_len: int = 0


class S6aClient:
    def __init__(self, hss_addr: str, *, origin_host: str = "mme.localdomain", realm: str = "localdomain",
                 bind_addr: str | None = None, port: int = 3868, timeout_s: float = 5.0):
        self.origin_host, self.realm = origin_host, realm
        self.sock = socket.create_connection((hss_addr, port), timeout=timeout_s,
                                             source_address=(bind_addr, 0) if bind_addr else None)
        self.local_ip = self.sock.getsockname()[0]
        self._seq = int.from_bytes(os.urandom(3), "big")

    def close(self) -> None:
        """DPR/DPA first: a peer that just vanishes stays 'closing' in the HSS for a while, and the next
        connection's answers are then discarded."""
        try:
            self.sock.sendall(message(CMD_DPR, 0, FLAG_REQUEST, [*self._origin(),
                                      u32(DISCONNECT_CAUSE, DO_NOT_WANT_TO_TALK_TO_YOU)], *self._ids()))
            self._recv()
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> S6aClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ids(self) -> tuple[int, int]:
        self._seq += 1
        return self._seq, self._seq

    def _recv(self) -> tuple[int, int, list]:
        """(command, flags, avps) of the next message that is not a watchdog (those are answered)."""
        while True:
            head = self._read(20)
            length = int.from_bytes(head[1:4], "big")
            flags, cmd = head[4], int.from_bytes(head[5:8], "big")
            body = self._read(length - 20)
            if cmd == CMD_DWR and flags & FLAG_REQUEST:
                hop, end = struct.unpack_from("!II", head, 12)
                self.sock.sendall(message(CMD_DWR, 0, 0, [u32(RESULT_CODE, 2001), *self._origin()], hop, end))
                continue
            return cmd, flags, parse_avps(body)

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the HSS closed the connection")
            data += chunk
        return data

    def _origin(self) -> list[bytes]:
        return [text(ORIGIN_HOST, self.origin_host), text(ORIGIN_REALM, self.realm)]

    def capabilities_exchange(self) -> int:
        """CER/CEA; the CEA's Result-Code (2001 = success)."""
        app = avp(VENDOR_SPECIFIC_APP_ID, u32(VENDOR_ID, VENDOR_3GPP) + u32(AUTH_APP_ID, APP_S6A))
        addr = avp(HOST_IP, struct.pack("!H", 1) + socket.inet_aton(self.local_ip))
        self.sock.sendall(message(CMD_CER, 0, FLAG_REQUEST, [
            *self._origin(), addr, u32(VENDOR_ID, 0), text(PRODUCT_NAME, "cellab", mandatory=False),
            u32(SUPPORTED_VENDOR_ID, VENDOR_3GPP), app], *self._ids()))
        cmd, _, avps = self._recv()
        code = find(avps, RESULT_CODE)
        if cmd != CMD_CER or code is None:
            raise ConnectionError(f"no CEA from the HSS (command {cmd})")
        return struct.unpack("!I", code)[0]

    def authentication_info(self, imsi: str, plmn: str) -> AuthAnswer:
        session = f"{self.origin_host};{self._seq};cellab"
        req = avp(REQ_EUTRAN_AUTH_INFO, u32(N_REQUESTED_VECTORS, 1, VENDOR_3GPP)
                  + u32(IMMEDIATE_RESPONSE, 0, VENDOR_3GPP), VENDOR_3GPP)
        self.sock.sendall(message(CMD_AIR, APP_S6A, FLAG_REQUEST | FLAG_PROXIABLE, [
            text(SESSION_ID, session), avp(VENDOR_SPECIFIC_APP_ID, u32(VENDOR_ID, VENDOR_3GPP)
                                           + u32(AUTH_APP_ID, APP_S6A)),
            u32(AUTH_SESSION_STATE, 1), *self._origin(), text(DESTINATION_REALM, self.realm),
            text(USER_NAME, imsi), req, avp(VISITED_PLMN_ID, plmn_bytes(plmn), VENDOR_3GPP)], *self._ids()))
        cmd, _, avps = self._recv()
        if cmd != CMD_AIR:
            raise ConnectionError(f"expected an AIA, got command {cmd}")
        code = find(avps, RESULT_CODE)
        if code is None:
            experimental = find(avps, EXPERIMENTAL_RESULT)
            inner = parse_avps(experimental) if experimental else []
            code = find(inner, EXPERIMENTAL_RESULT_CODE)
        result = struct.unpack("!I", code)[0] if code else 0
        info = find(avps, AUTHENTICATION_INFO)
        vectors = [d for c, _, d in parse_avps(info) if c == EUTRAN_VECTOR] if info else []
        answer = AuthAnswer(result, len(vectors))
        if vectors:
            parts = parse_avps(vectors[0])
            answer.rand_len, answer.xres_len, answer.autn_len, answer.kasme_len = (
                len(find(parts, c) or b"") for c in (RAND, XRES, AUTN, KASME))
        return answer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hss", required=True)
    parser.add_argument("--imsi", required=True, action="append", help="repeat for several AIRs on one link")
    parser.add_argument("--plmn", required=True, help="MCC+MNC digits")
    parser.add_argument("--bind", default=None, help="source address (the MME's diameter address)")
    parser.add_argument("--origin-host", default="mme.localdomain")
    parser.add_argument("--timeout-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    try:
        with S6aClient(args.hss, origin_host=args.origin_host, bind_addr=args.bind, timeout_s=args.timeout_s) as c:
            cea = c.capabilities_exchange()
            answers = [c.authentication_info(imsi, args.plmn).__dict__ for imsi in args.imsi] if cea == 2001 else []
    except OSError as exc:
        print(json.dumps({"error": f"{args.hss}: {exc}"}))
        return 1
    print(json.dumps({"cea": cea, "answers": answers}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
