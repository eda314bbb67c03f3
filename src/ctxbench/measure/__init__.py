"""Measures derived from the client's records: per-request metrics, statistics, steady state, arrivals,
decode stalls, answer fidelity, the SLO search and the GPU telemetry beside a run."""
