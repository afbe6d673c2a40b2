"""Running a campaign: one run as a step on a lab session, the runner that stores each record, workloads, schedules, telemetry, reruns."""
