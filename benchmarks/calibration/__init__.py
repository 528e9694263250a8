"""Benchmark entries that measure predictive accuracy and calibration (RMSE, NLPD, coverage, CRPS) against
ExactGP on fixed splits: the ExactGP reference itself, per-model tables, the calibration and defaults studies."""
