"""Benchmarks that reproduce paper tables and measure calibration and speed.

Entries are grouped by what they measure: ``benchmarks.papers`` (a paper's table next to its published
numbers), ``benchmarks.speed`` (time and memory as the problem grows) and ``benchmarks.calibration``
(accuracy and calibration against ExactGP); ``benchmarks/README.md`` lists them. Run one entry with
``python -m benchmarks NAME [...]`` (``--list`` lists them), all of them with ``python -m benchmarks suite``.
Every entry writes a Markdown table (and CSV or figures) under ``benchmarks/results/``, headed by the
protocol, the command, the machine, the package version and the date.
"""
