"""A campaign's results: the store and its checks, each run's metrics and provenance, the stopping rules."""
