"""``python -m benchmarks NAME [args]``: run one benchmark entry (``--list`` lists them)."""

from __future__ import annotations

import importlib
import sys

from benchmarks._common import default_data_dir

#: group -> its entries; each entry is the module ``benchmarks.<group>.<entry>`` with a ``main(argv) -> int``
#: (what goes where, and why: benchmarks/README.md)
GROUPS: dict[str, tuple[str, ...]] = {
    # a paper's table or figure, next to its published numbers
    "papers": ("tkrr_table1", "cpd_airline", "qtkm_uci", "qtkm_spectrum", "qtkm_airline", "fl_table2", "rffnet_table2",
               "tnkf_sinc", "tnkf_classification", "hilbert_kernel_error"),
    # time, memory and cost per data point as the problem grows
    "speed": ("cpd_speed", "engine_grouping", "tnkf_speed", "tnkf_cost", "tt_kalman_cost", "tt_kalman_airline", "kalman_speedup",
              "budget_under_load", "hilbert_gp_scaling", "scale_out", "reference_code", "device_speed"),
    # predictive accuracy and calibration (NLPD, coverage) against ExactGP on fixed splits
    "calibration": ("exact_gp_uci", "cpd_uci_calibration", "tt_kalman_uci", "calibration_study", "defaults_study",
                    "airline_peers", "tnkf_block_check", "odd_data_sweep"),
}
#: entry name -> module with a ``main(argv) -> int`` function (``suite`` runs all the others)
ENTRIES = {**{name: f"benchmarks.{group}.{name}" for group, names in GROUPS.items() for name in names},
           "suite": "benchmarks.suite"}


def main(argv: list[str]) -> int:
    """Dispatch to one benchmark entry."""
    if not argv or argv[0] in ("-h", "--help", "--list"):
        groups = "".join(f"\n{group}:\n  " + "\n  ".join(names) + "\n" for group, names in GROUPS.items())
        print("usage: python -m benchmarks NAME [...]   (python -m benchmarks suite [--only NAME ...] runs them all)\n"
              + groups)
        return 0
    name, rest = argv[0], argv[1:]
    if name not in ENTRIES:
        print(f"unknown benchmark {name!r}; known: {', '.join(sorted(ENTRIES))}", file=sys.stderr)
        return 2
    default_data_dir()
    return importlib.import_module(ENTRIES[name]).main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
