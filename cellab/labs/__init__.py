"""Embedded labs: namespaces on this host that stand in for a real lab (wired, virtual)."""
