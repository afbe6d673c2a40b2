"""Faults inside a run: the plans a campaign names, their playing on the run's timeline, the recovery measured from the lab's events."""
