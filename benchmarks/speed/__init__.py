"""Benchmark entries that measure time, memory and cost per data point as N, D, M or the rank grow (the ALS
engine, the Kalman filters, HilbertGP's marginal likelihood, out-of-core and data-parallel fits)."""
