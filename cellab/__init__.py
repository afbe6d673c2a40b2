"""cellab: hardware-in-the-loop LTE lab toolkit (shared core: bus, campaigns, runner, store, CLI)."""

__version__ = "0.1.0"
