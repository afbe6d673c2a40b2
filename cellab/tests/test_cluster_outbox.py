"""Run folders travel from worker to controller in bounded chunks: a folder of several chunks arrives whole and
byte for byte, the worker's outbox is emptied; a folder above the per-run limit fails that run naming its size
and the limit while the campaign goes on; a result declaring more than the limit, a path out of the run folder,
a file twice, or bytes its file does not hold, fails that run. Stand-in run tasks on an in-process Dask
cluster (no lab). The controller's flat memory is measured in the scale bench (`make bench BENCH=scale`)."""

from __future__ import annotations

import functools
import hashlib
import textwrap

import pytest

from cellab.cluster import dispatch, outbox
from cellab.cluster.standins import folder_run
from cellab.cluster.result import BadResult, check_outbox
from cellab.run.runner import Runner

MIB = 1 << 20


def _runner(tmp_path, repeat: int = 2) -> Runner:
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(f"""
        name: folders
        lab: wired
        repeat: {repeat}
    """))
    return Runner.new(path, tmp_path / "out")


def _campaign(runner: Runner, task) -> dict[str, int]:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      resources={"vlab": 1}, silence_logs=40) as cluster, Client(cluster) as client:
        return dispatch.run_distributed(runner, client=client, task=task)


def _expected_digest(size: int) -> str:
    block = bytes(range(256)) * 4096
    return hashlib.sha256((block * (size // len(block) + 1))[:size]).hexdigest()


class _Counting:
    """The controller's client, counting the chunks it receives and their sizes."""

    def __init__(self, client, chunks: list[int]):
        self.client, self.chunks = client, chunks

    def run(self, function, *args, **kw):
        answers = self.client.run(function, *args, **kw)
        self.chunks += [len(a) for a in answers.values() if isinstance(a, bytes)]
        return answers


def test_a_folder_of_many_chunks_arrives_whole_and_the_outbox_is_emptied(tmp_path, monkeypatch):
    size = 3 * outbox.CHUNK_BYTES + 12345
    chunks: list[int] = []
    monkeypatch.setattr(dispatch, "fetch", lambda client, box, folder: outbox.fetch(_Counting(client, chunks), box,
                                                                                   folder))
    runner = _runner(tmp_path)
    counts = _campaign(runner, functools.partial(folder_run, size_bytes=size))
    assert counts["ok"] == 2, counts
    for row in runner.store.rows():
        folder = runner.store.run_dir(row["run_id"])
        assert (folder / "manifest.json").read_text() == "{}\n"
        assert hashlib.sha256((folder / "capture.pcap").read_bytes()).hexdigest() == _expected_digest(size)
        assert not [p for p in folder.rglob("*.part")]
    assert len(chunks) == 2 * 4 and max(chunks) == outbox.CHUNK_BYTES  # four chunks a run, none larger
    assert not any(outbox.outbox_root().iterdir())  # every box dropped once fetched


def test_a_folder_above_the_limit_fails_its_run_and_the_campaign_goes_on(tmp_path, monkeypatch):
    monkeypatch.setenv(outbox.LIMIT_ENV, "2")
    runner = _runner(tmp_path, repeat=1)
    counts = _campaign(runner, functools.partial(folder_run, size_bytes=3 * MIB))
    assert counts == {"ok": 0, "failed": 1, "aborted": 0, "invalid": 0}, counts
    (row,) = runner.store.rows()
    assert "3.0 MiB, more than the limit of 2 MiB per run" in row["error"] and outbox.LIMIT_ENV in row["error"]


def test_a_bad_limit_is_named(monkeypatch):
    monkeypatch.setenv(outbox.LIMIT_ENV, "lots")
    with pytest.raises(Exception, match=outbox.LIMIT_ENV):
        outbox.limit_bytes()


BOX = "0" * 32
HOSTILE = {
    "box name": {"worker": "tcp://w", "box": "../../etc", "files": [["a", 1]]},
    "path up": {"worker": "tcp://w", "box": BOX, "files": [["../a", 1]]},
    "absolute path": {"worker": "tcp://w", "box": BOX, "files": [["/etc/passwd", 1]]},
    "twice": {"worker": "tcp://w", "box": BOX, "files": [["a", 1], ["a", 2]]},
    "inline too": {"worker": "tcp://w", "box": BOX, "files": [["manifest.json", 1]]},
    "over the limit": {"worker": "tcp://w", "box": BOX, "files": [["a", 3 * MIB]]},
    "negative size": {"worker": "tcp://w", "box": BOX, "files": [["a", -1]]},
    "extra key": {"worker": "tcp://w", "box": BOX, "files": [["a", 1]], "more": 1},
    "no files": {"worker": "tcp://w", "box": BOX, "files": []},
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_outbox_is_refused(case):
    with pytest.raises(BadResult):
        check_outbox({"outbox": HOSTILE[case]}, {("manifest.json",): b"{}"}, 2 * MIB)


def _lying_run(job):
    """A task whose outbox declares more bytes than its file holds."""
    result = folder_run(job, size_bytes=outbox.INLINE_TOTAL_BYTES + 10)
    result["outbox"]["files"][0][1] += 1000
    return result


def test_a_file_shorter_than_declared_fails_its_run(tmp_path):
    runner = _runner(tmp_path, repeat=1)
    counts = _campaign(runner, _lying_run)
    assert counts["failed"] == 1, counts
    (row,) = runner.store.rows()
    assert "does not hold the" in row["error"] and "capture.pcap" in row["error"], row["error"]
    assert not any(runner.store.run_dir(row["run_id"]).iterdir())  # nothing half-written kept
