"""``python -m benchmarks NAME [args]``: run one benchmark entry (``--list`` lists them)."""

from __future__ import annotations

import importlib
import sys

from benchmarks._common import default_data_dir

#: entry name -> module in this package with a ``main(argv) -> int`` function
ENTRIES = {
    "cpd_airline": "benchmarks.cpd_airline",
    "cpd_speed": "benchmarks.cpd_speed",
    "cpd_uci_calibration": "benchmarks.cpd_uci_calibration",
    "exact_gp_uci": "benchmarks.exact_gp_uci",
    "tkrr_table1": "benchmarks.tkrr_table1",
    "qtkm_uci": "benchmarks.qtkm_uci",
    "qtkm_spectrum": "benchmarks.qtkm_spectrum",
    "qtkm_airline": "benchmarks.qtkm_airline",
    "fl_table2": "benchmarks.fl_table2",
    "engine_grouping": "benchmarks.engine_grouping",
    "rffnet_table2": "benchmarks.rffnet_table2",
    "tnkf_sinc": "benchmarks.tnkf_sinc",
    "tt_kalman_uci": "benchmarks.tt_kalman_uci",
    "tt_kalman_cost": "benchmarks.tt_kalman_cost",
    "tt_kalman_airline": "benchmarks.tt_kalman_airline",
    "tnkf_speed": "benchmarks.tnkf_speed",
    "tnkf_classification": "benchmarks.tnkf_classification",
    "hilbert_gp_scaling": "benchmarks.hilbert_gp_scaling",
    "hilbert_kernel_error": "benchmarks.hilbert_kernel_error",
    "scale_out": "benchmarks.scale_out",
    "calibration_study": "benchmarks.calibration_study",
    "defaults_study": "benchmarks.defaults_study",
    "suite": "benchmarks.suite",
}


def main(argv: list[str]) -> int:
    """Dispatch to one benchmark entry."""
    if not argv or argv[0] in ("-h", "--help", "--list"):
        print("usage: python -m benchmarks NAME [--full] [...]\n\nentries:\n  " + "\n  ".join(sorted(ENTRIES)))
        return 0
    name, rest = argv[0], argv[1:]
    if name not in ENTRIES:
        print(f"unknown benchmark {name!r}; known: {', '.join(sorted(ENTRIES))}", file=sys.stderr)
        return 2
    default_data_dir()
    return importlib.import_module(ENTRIES[name]).main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
