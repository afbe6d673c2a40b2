"""For tests (and the virtual-android lab): a fake adb server with virtual phones, always torn down.

    with phone_farm(tmp_path) as farm:        # one phone per recorded Android version
        Adb(farm.port).devices()
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .fakeadb import FakeAdbServer
from .phones import VirtualPhone

# serial -> catalog model; serials shaped like real ones (Samsung R58..., Pixels hex)
DEFAULT_PHONES = {"R58M12ABCDE": "android9", "0A1B2C3D4E": "android11", "1C2D3E4F": "android13",
                  "3A4B5C6D": "android14"}


@contextlib.contextmanager
def phone_farm(directory: Path, phones: dict[str, str] | None = None, **phone_kwargs: object
               ) -> Iterator[FakeAdbServer]:
    server = FakeAdbServer(0)
    for serial, model in (phones or DEFAULT_PHONES).items():
        server.add_phone(VirtualPhone(serial, model, Path(directory) / "phones" / serial, **phone_kwargs))  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop()
        # the client would start a real adb server on this port if anything asked it now: make sure none runs
        subprocess.run(["adb", "-P", str(server.port), "kill-server"], capture_output=True, timeout=10, check=False)
