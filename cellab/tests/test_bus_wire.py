"""The envelope on the wire: the controller's fast read of the agent's reply header, and framing of
messages it must drop, against a raw DEALER peer holding an allowed agent key."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import zmq

from cellab.bus import OperationError, operation, wire
from cellab.bus.demo import DemoAgent
from cellab.bus.keys import load_public_key, load_secret_key
from cellab.bus.testing import lab_bus, make_controller, make_keys


def test_reply_header_fast_read_matches_json() -> None:
    for rid in (0, 7, 123456789012):
        header = wire.reply_header(rid)
        assert json.loads(header) == {"version": wire.VERSION, "kind": "reply", "id": rid}
        assert wire.reply_id(header) == rid
    # Anything else is left to the JSON parse (None), never misread.
    for other in (b'{"version":1,"kind":"reply","id":-3}', b'{"version":1,"kind":"reply","id":12x}',
                  b'{"version":1,"kind":"reply","id":}', b'{"version":1, "kind":"reply","id":5}',
                  b'{"version":1,"kind":"reply","id":5,"raw":true}', b'{"version":1,"kind":"error","id":5}',
                  b'{"version":2,"kind":"reply","id":5}', b""):
        assert wire.reply_id(other) is None


def test_recv_message_keeps_message_boundaries() -> None:
    ctx = zmq.Context()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        a.bind("inproc://wire-test")
        b.connect("inproc://wire-test")
        assert wire.recv_message(b) is None
        a.send_multipart([b"1", b"2", b"3", b"4"])
        a.send_multipart([b"only"])
        b.poll(1000)
        first = wire.recv_message(b)
        second = wire.recv_message(b)
        assert first is not None and first[0] == [b"1", b"2", b"3", b"4"]
        assert second is not None and second[0] == [b"only"]
        assert wire.recv_message(b) is None
    finally:
        a.close(linger=0)
        b.close(linger=0)
        ctx.term()


def _raw_agent(keys_dir: Path, controller_public: Path, secret: Path, endpoint: str, answers: list[list[bytes]],
               ctx: zmq.Context) -> threading.Thread:
    """A DEALER named ue1 with ue1's key: says hello, then answers each request with the next frames of
    `answers` (a b"{id}" in a frame is replaced by the request's id)."""
    sock = ctx.socket(zmq.DEALER)
    sock.linger = 0
    sock.routing_id = b"ue1"
    sock.curve_publickey, sock.curve_secretkey = load_secret_key(secret)
    sock.curve_serverkey = load_public_key(controller_public)
    sock.connect(endpoint)
    sock.send_multipart([wire.encode_header({"version": 1, "kind": "hello", "role": "raw"}), b""])

    def serve() -> None:
        try:
            for answer in answers:
                while True:
                    if not sock.poll(10_000):
                        return
                    header = json.loads(sock.recv_multipart()[0])
                    if header.get("kind") == "request":
                        break
                rid = str(header["id"]).encode()
                for frames in answer:
                    sock.send_multipart([f.replace(b"{id}", rid) for f in frames])  # noqa: B023 - used at once
        finally:
            sock.close(linger=0)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_controller_reads_any_json_reply_and_drops_bad_framing(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", ["ue1"])
    controller = make_controller(keys)
    ctx = zmq.Context()
    answers = [
        # keys in another order and spaces: not the fast form, read as JSON all the same
        [[b'{"id": {id}, "kind": "reply", "version": 1}', b'{"n": 1}']],
        # a 3-frame message is dropped whole; the reply after it is read (boundaries kept)
        [[b'{"version":1,"kind":"reply","id":{id}}', b'{"n": 99}', b"extra"],
         [b'{"version":1,"kind":"reply","id":{id}}', b'{"n": 2}']],
        # a malformed id is not misread as a reply: the request's error reply comes next
        [[b'{"version":1,"kind":"reply","id":{id}x}', b'{"n": 98}'],
         [b'{"version":1,"kind":"error","id":{id}}', b'{"kind": "failed", "message": "no"}']],
    ]
    thread = _raw_agent(keys.directory, keys.controller_public, keys.agents["ue1"][1], controller.endpoint, answers,
                        ctx)
    try:
        controller.wait_for_agents(["ue1"], timeout_s=10)
        assert controller.request("ue1", "echo", {"text": "a"}, timeout_s=10) == {"n": 1}
        assert controller.request("ue1", "echo", {"text": "b"}, timeout_s=10) == {"n": 2}
        with pytest.raises(OperationError, match="no"):
            controller.request("ue1", "echo", {"text": "c"}, timeout_s=10)
    finally:
        thread.join(timeout=15)
        controller.close()
        ctx.term()


class _BadResultAgent(DemoAgent):
    @operation
    def bad_result(self) -> dict:
        return {"handle": object()}


def test_result_json_cannot_carry_is_an_error_reply(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": _BadResultAgent}) as (controller, agents):
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "bad_result", timeout_s=10)
        assert err.value.kind == "internal" and "bad_result" in str(err.value)
        # the agent still serves, and its devices were not sent to their safe state
        assert controller.request("ue1", "echo", {"text": "é ok"}) == {"text": "é ok"}
        assert agents["ue1"].safe_states == 0
