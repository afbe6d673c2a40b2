"""The rehearsal stack's clock folders stay within the labs' log bound: a new folder past N/2 of the current one's
downlink file, the latest two kept, a new radio start beginning its own; no bound, no new folder."""

from __future__ import annotations

from pathlib import Path

from cellab.ran.zmq_stack_clock import ClockFolders

BOUND_BYTES = 64 * 1024


class Broker:
    """Records its clock_start calls; the test grows the current folder's files as the real broker's TTIs would."""

    def __init__(self):
        self.started: list[tuple[str, Path]] = []

    def clock_start(self, run_id: str, folder: Path) -> None:
        self.started.append((run_id, folder))
        for direction in ("dl", "ul"):
            (folder / f"stack-clock-{direction}.bin").write_bytes(b"\0" * 64)


def _grow(folder: Path, size: int) -> None:
    for direction in ("dl", "ul"):
        with open(folder / f"stack-clock-{direction}.bin", "ab") as out:
            out.write(b"\0" * size)


def _on_disk(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("stack-clock-dl.bin"))


def test_a_stack_left_up_keeps_its_latest_two_clock_folders_within_the_bound(tmp_path):
    broker, clock = Broker(), ClockFolders(tmp_path / "clock")
    clock.begin(broker, 1)
    largest = 0
    for _ in range(40):  # 40 x 4 KiB a direction: 2.5 times the bound
        _grow(clock.folders[-1], 4096)
        clock.bound(broker, BOUND_BYTES)
        largest = max(largest, _on_disk(tmp_path))
    names = [f.name for f in clock.folders]
    assert [run_id for run_id, _ in broker.started][:3] == ["rehearsal-1", "rehearsal-1-2", "rehearsal-1-3"]
    # 8 blocks pass N/2 (32 KiB and the 64-byte start): folders of 8 blocks each, the 40th opening the sixth
    assert names == ["1-5", "1-6"], names
    assert sorted(p.name for p in (tmp_path / "clock").iterdir()) == sorted(names)  # the older ones removed
    assert largest <= BOUND_BYTES + 4096 + 64  # at most the bound, plus the one block written past it
    assert (clock.folders[-2] / "stack-clock-dl.bin").stat().st_size > BOUND_BYTES // 2  # the latest N/2 kept

    clock.begin(broker, 2)  # srsenb restarted: a new start records into its own folder
    assert broker.started[-1] == ("rehearsal-2", tmp_path / "clock" / "2") and len(clock.folders) == 2


def test_no_bound_keeps_one_folder_a_start(tmp_path):
    broker, clock = Broker(), ClockFolders(tmp_path / "clock")
    clock.begin(broker, 1)
    _grow(clock.folders[-1], BOUND_BYTES * 4)
    clock.bound(broker, 0)
    assert [f.name for f in clock.folders] == ["1"] and len(broker.started) == 1
