"""Benchmarks that reproduce paper tables and measure calibration and speed.

Run one entry with ``python -m benchmarks NAME [--full] [...]``; ``python -m benchmarks --list`` lists
them. Every entry writes a Markdown table and a CSV under ``benchmarks/results/`` headed by the
protocol, the command, the machine, the package version and the date.
"""
