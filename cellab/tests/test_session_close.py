"""A session's close: an inventory lab's `down` (the eNB to its safe state, the core stopped, both through the
controller) runs while the controller is still open. Before, the controller closed first, so the eNB and core
agents never heard it and srsenb and the core stayed up after a campaign."""

from __future__ import annotations

import pytest

from cellab.run.session import LabSession

pytestmark = pytest.mark.background  # no lab, no clock (conftest.py)


class _Controller:
    def __init__(self) -> None:
        self.open = True

    def close(self) -> None:
        self.open = False


class _Lab:
    def __init__(self, controller: _Controller, fail: bool = False) -> None:
        self.controller, self.fail = controller, fail
        self.controller_open_at_down: bool | None = None

    def down(self) -> None:
        self.controller_open_at_down = self.controller.open
        if self.fail:
            raise RuntimeError("a lab whose teardown failed")


def test_the_lab_goes_down_before_the_controller_closes() -> None:
    session = LabSession("lab.yaml")
    controller = _Controller()
    session.controller, session.lab = controller, _Lab(controller)  # type: ignore[assignment]
    session.close()
    assert session.lab.controller_open_at_down is True  # type: ignore[union-attr]
    assert not controller.open and session.controller is None


def test_a_failed_lab_teardown_still_closes_the_controller() -> None:
    session = LabSession("lab.yaml")
    controller = _Controller()
    session.controller, session.lab = controller, _Lab(controller, fail=True)  # type: ignore[assignment]
    with pytest.raises(RuntimeError):
        session.close()
    assert not controller.open
