"""Runs on Dask distributed: dispatch from the controller, workers offering slots or benches, TLS, the scale bench."""
