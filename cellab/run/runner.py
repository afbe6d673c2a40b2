"""The campaign runner: the controller's side of a campaign. It plans, hands each run to a lab instance, and is
the only writer of the result folder (`results.sqlite` and `runs/<run_id>/`).

In process (the default), one lab instance runs the runs one after another through `cellab.run.step`. With
`--slots N` or `--cluster ADDRESS`, the runs go to Dask workers (`cellab.cluster.dispatch`), each run a task that
returns its record and its folder's files. One failed run does not stop the campaign (the retry policy
decides); Ctrl-C stops the devices, marks the run aborted and keeps everything already stored; `--resume DIR`
continues where it stopped.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cellab.campaign.load import load_campaign, on_lab, plan
from cellab.campaign.model import LAB_FACTOR, Campaign
from cellab.records import PlannedRun
from cellab.errors import CellabError
from cellab.results.comparisons import store_comparisons
from cellab.results.stopping import after_run
from cellab.results.holder import hold
from cellab.results.store import ResultStore
from cellab.run.agent_loss import CampaignStopped, loss_message, wait_until_back
from cellab.run.connect_lines import ConnectLines
from cellab.run.live import LiveView
from cellab.inventory.lab import InventoryLab
from cellab.run.session import LabSession
from cellab.run.step import RunRecord, check_module_params, execute_run, ue_count


class Runner:
    def __init__(self, campaign: Campaign, store: ResultStore, console: Console | None = None,
                 prefix: str | None = None, on_run_done: Callable[[PlannedRun, str], None] | None = None):
        self.campaign = campaign
        self.store = store
        self.console = console or Console(stderr=True)
        self.prefix = prefix
        self.on_run_done = on_run_done
        self.hold = hold(store.root)  # a second run or resume of this folder is refused naming this process
        # each run's line and the ETA as runs are stored; in process also the running run's last seconds (entered)
        self.view = LiveView(self.console, store.rows,
                             campaign.model_dump(mode="json", include={"factors", "faults", "workload"}))

    @classmethod
    def new(cls, campaign_path: Path, out_dir: Path, lab: str | None = None, **kwargs: Any) -> Runner:
        campaign = load_campaign(campaign_path, lab)
        runs = plan(campaign, campaign_path)
        text = Path(campaign_path).read_text()
        as_run = campaign.model_dump(mode="json", exclude_unset=True)
        if yaml.safe_load(text) != as_run:
            # Store the campaign as run: the lab it ran on (--lab), files it names made absolute (a resumed
            # campaign reads this copy from the result folder).
            text = yaml.safe_dump(as_run, sort_keys=False)
        store = ResultStore.create(out_dir, campaign.name, text, runs)
        return cls(campaign, store, **kwargs)

    @classmethod
    def resume(cls, result_dir: Path, retry_failed: bool = False, **kwargs: Any) -> Runner:
        store = ResultStore.open(result_dir)
        store.retry_failed = retry_failed
        campaign = load_campaign(store.campaign_path())
        return cls(campaign, store, **kwargs)

    def _progress(self) -> Progress:
        return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=self.console, transient=False)

    def stored(self, run: PlannedRun, record: RunRecord, counts: dict[str, int]) -> None:
        """A finished run's record is in the store: count it and tell whoever watches."""
        counts[record.status] += 1
        self.view.finished(run.run_id)
        if self.on_run_done:
            self.on_run_done(run, record.status)

    def run(self) -> dict[str, int]:
        """Every pending run, here on one lab instance per lab (`cellab.cluster.dispatch.run_campaign` hands them to
        Dask workers instead)."""
        try:
            return self._run_here()
        finally:
            self.keep_comparisons()
            self.store.settle()

    def keep_comparisons(self) -> None:
        """The campaign's comparisons into results.sqlite (table comparisons), from the runs stored so far."""
        try:
            store_comparisons(self.store, self.campaign.model_dump(mode="json", include={"factors", "comparisons"}))
        except (CellabError, sqlite3.Error) as exc:  # the runs are stored; the report computes them again
            self.console.print(f"[yellow]comparisons not stored[/]: {exc}", highlight=False)

    def _run_here(self) -> dict[str, int]:
        todo = list(self.store.pending())
        total = len(self.store.planned())
        counts = {"ok": 0, "failed": 0, "aborted": 0, "invalid": 0}
        if not todo:
            return counts
        by_lab: dict[str, list[PlannedRun]] = {}  # a `lab` factor: each lab's runs on its own instance
        for run in todo:
            by_lab.setdefault(run.params.get(LAB_FACTOR, self.campaign.lab), []).append(run)
        self.console.print(f"{self.campaign.name}: {total - len(todo)} of {total} runs done before, {len(todo)} to "
                           "run", highlight=False)
        with self.view:
            for lab, runs in by_lab.items():
                campaign = on_lab(self.campaign, lab) if LAB_FACTOR in self.campaign.factors else self.campaign
                self._run_on(lab, campaign, runs, counts)
        return counts

    def _run_on(self, lab: str, campaign: Campaign, runs: list[PlannedRun], counts: dict[str, int]) -> None:
        most_ues = max(ue_count(run.params.get("ues")) for run in runs)
        purpose = f"campaign {self.campaign.name} ({self.store.root})"
        # each agent's connection said as it comes (and again after a loss)
        with ConnectLines(self.view.say), LabSession(lab, prefix=self.prefix, ue_count=most_ues,
                                                     purpose=purpose) as session:
            check_module_params(session, runs, self.store.campaign_path())
            for run in runs:
                self._agents_back(session)
                run_dir = self.store.start(run)
                self.view.running(run.run_id, run.factors, run_dir)
                try:
                    record = execute_run(session, campaign, run, run_dir, self.store.root, log=self.console.print)
                except KeyboardInterrupt:
                    self.store.finish(run, "aborted", error="interrupted by the user (Ctrl-C)")
                    raise
                self.store.save_record(run, record)
                self.stored(run, record, counts)
                runs.extend(after_run(self.campaign, self.store, run, self.console.print))  # a stopping rule's more

    def _agents_back(self, session: LabSession) -> None:
        """An inventory's agent lost before a run: say which, where and how to start it again, then wait until it
        is back (on_agent_loss: pause) or stop the campaign (stop)."""
        lost = session.lost_agents()
        if not lost:
            return
        assert isinstance(session.lab, InventoryLab)
        action = self.campaign.on_agent_loss
        seen = session.controller.agents()  # a lost agent's last hello: the host-only options it was started with
        said = {name: seen[name].start_options if name in seen else None for name in lost}
        message = loss_message(session.lab.inventory, lost, action, self.store.root, said)
        if action == "stop":
            raise CampaignStopped(message)
        self.console.print(message, highlight=False, markup=False, soft_wrap=True)
        wait_until_back(session.lost_agents, self.view.say)
