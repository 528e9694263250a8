"""The whole benchmark suite from one command: every entry in its small configuration (or its full one).

Each entry's default arguments are its *full* configuration (the paper's protocol or the complete study; the
committed results under ``benchmarks/results/<entry>/`` come from those, see ``benchmarks/README.md`` and
``docs/benchmarks.md``). The *small* configuration below runs every entry at reduced size — all of them together
in under 30 minutes on a 2-core machine — and writes to ``benchmarks/results/small/<entry>/`` so the committed
full results are not overwritten. The *smoke* configuration (tiny sizes) is what the test suite runs for every
entry.

    python -m benchmarks suite                  # small configuration of every entry → results/small/<entry>/
    python -m benchmarks suite --full           # every entry with its defaults → results/<entry>/ (many hours)
    python -m benchmarks suite --only tnkf_sinc cpd_speed
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
import traceback

from benchmarks._common import RESULTS_DIR, RESULTS_ENV, default_data_dir, header, output_path

DATASETS_CALIBRATION = ["yacht", "boston", "concrete", "energy", "wine-red", "protein", "wilson/elevators",
                        "wilson/bike", "wilson/kin40k", "wilson/keggdirected"]
#: six sets of the defaults study's small run, D = 1, 5, 8, 9, 18, 40
DATASETS_DEFAULTS = ["lidar", "wilson/airfoil", "wilson/concrete", "wilson/pendulum", "wilson/elevators", "ailerons"]
#: entry -> (small arguments, smoke arguments). Every entry of benchmarks.__main__.ENTRIES must be listed.
CONFIGS: dict[str, tuple[list[str], list[str]]] = {
    "hilbert_kernel_error": ([], []),
    "hilbert_gp_scaling": (["--sizes", "2000", "--exact-fit-max", "1000", "--exact-step-max", "2000"], ["--sizes", "500", "--exact-fit-max", "500", "--exact-step-max", "500"]),
    "exact_gp_uci": (["--datasets", "yacht", "energy", "--splits", "0:2"], ["--datasets", "yacht", "--splits", "0:1"]),
    "tkrr_table1": (["--only", "yacht", "energy", "--splits", "1"], ["--only", "yacht", "--splits", "1"]),
    "cpd_speed": (["--quick"], ["--tiny"]),
    "engine_grouping": (["--n", "20000"], ["--n", "2000"]),
    "cpd_uci_calibration": (["--datasets", "yacht", "energy", "--splits", "0:2"],
                            ["--datasets", "yacht", "--splits", "0:1"]),
    "cpd_airline": (["--ranks", "5", "--sweeps", "2", "--n-train", "50000"],
                    ["--ranks", "2", "--sweeps", "1", "--n-train", "2000", "--n-test", "2000",
                     "--hyper-max-points", "200"]),
    "tnkf_sinc": (["--n-train", "1024", "--n-test", "512", "--configs", "paper"], ["--n-train", "256", "--n-test", "128", "--configs", "default"]),
    "tnkf_classification": (["--tasks", "spiral", "--spiral-n", "1024", "--configs", "paper"],
                            ["--tasks", "spiral", "--spiral-n", "256", "--configs", "default"]),
    "tnkf_speed": (["--quick"], ["--sizes", "256", "512", "--rows", "10", "--ranks", "4", "--rank-size", "256",
                                 "--dense-max", "512"]),
    "qtkm_uci": (["--only", "yacht", "--splits", "1"], ["--only", "yacht", "--splits", "1", "--tkm-ranks", "2"]),
    "qtkm_spectrum": (["--quick"], ["--quick"]),
    "qtkm_airline": (["--qtkm-ranks", "10", "--tkm-ranks", "2", "--sweeps", "3", "--n-train", "20000"],
                     ["--qtkm-ranks", "4", "--tkm-ranks", "2", "--sweeps", "1", "--n-train", "2000"]),
    "fl_table2": (["--only", "yacht", "--splits", "1"], ["--only", "yacht", "--splits", "1", "--epochs", "2"]),
    "rffnet_table2": (["--only", "se1", "--sizes", "1000", "--table-n", "5000"],
                      ["--only", "se1", "--sizes", "--table-n", "500"]),
    "tnkf_cost": (["--sizes", "512", "2000", "--caps", "32:24", "8:4", "--fit"],
                  ["--sizes", "256", "--caps", "8:4", "--blocks", "1", "--rows", "12", "--warm-rows", "4", "--fit"]),
    "tt_kalman_cost": (["--dims", "2", "4", "8", "--ranks", "5", "10", "--rows", "32"],
                       ["--dims", "2", "4", "--ranks", "4", "--rows", "8"]),
    "kalman_speedup": (["--workloads", "sinc", "--before-rows", "256", "--quick", "--defaults-rows", "1024"],
                       ["--workloads", "sinc", "--before-rows", "32", "--quick", "--defaults-rows", "128", "--full",
                        "--defaults-models", "TNKF"]),
    "budget_under_load": (["--models", "TNKF", "--dataset", "wilson/concrete", "--rows", "600", "--test-rows", "200"],
                          ["--models", "TNKF", "--dataset", "wilson/concrete", "--rows", "200", "--test-rows", "50",
                           "--load", "0"]),
    # skipped pair by pair where the reference checkouts are absent (CI): only our rows run then
    "reference_code": (["--repeats", "1", "--rffnet-epochs", "10", "--rffnet-configs", "32:1e-2:1e-4",
                        "--fl-epochs", "10:10"],
                       ["--repeats", "1", "--rffnet-n", "500", "--rffnet-epochs", "2", "--rffnet-configs",
                        "32:1e-2:1e-4", "--fl-epochs", "1:1"]),
    # CPU rows only where no CUDA device is visible (CI); on a GPU machine the same rows run on both devices
    "device_speed": (["--quick", "--sinc-rows", "256", "--adult-rows", "50", "--tt-rows", "512", "--svgp-steps", "100"],
                     ["--quick", "--workloads", "sinc", "airline_svgp", "--sinc-rows", "16", "--svgp-steps", "5"]),
    "tt_kalman_uci": (["--datasets", "yacht", "--splits", "0:1"], ["--datasets", "yacht", "--splits", "0:1"]),
    "tnkf_block_check": (["--datasets", "wilson/bike", "synthetic", "--max-train", "512", "--max-test", "500"],
                         ["--datasets", "synthetic", "--max-train", "128", "--max-test", "64"]),
    "odd_data_sweep": (["--cases", "integer_lookup", "noiseless", "constant_column"],
                       ["--cases", "tiny_1d", "--models", "ExactGP", "HilbertGP"]),
    "tt_kalman_airline": (["--n-train", "1000", "--n-test", "2000", "--models", "tt", "hilbert", "cpd"],
                          ["--n-train", "300", "--n-test", "200", "--models", "tt", "--num-basis", "3", "--rank", "3"]),
    "scale_out": (["--max-rows", "100000", "--rank", "5", "--num-basis", "20", "--sweeps", "1",
                   "--throughput-rows", "20000"],
                  ["--max-rows", "5000", "--rank", "2", "--num-basis", "4", "--sweeps", "1", "--throughput-rows", "2000",
                   "--skip-throughput"]),
    "calibration_study": (["--splits", "0:1", "--max-train", "200", "--max-test", "500",
                           "--datasets", *DATASETS_CALIBRATION],
                          ["--datasets", "yacht", "--models", "exact_gp", "hilbert_gp", "--splits", "0:1",
                           "--max-train", "100"]),
    "defaults_study": (["--datasets", *DATASETS_DEFAULTS, "--splits", "0:1", "--max-train", "500", "--max-test", "500"],
                       ["--datasets", "wilson/yacht", "--models", "exact_gp", "exact_gp_ml", "hilbert_gp", "sklearn_gpr",
                        "--splits", "0:1", "--max-train", "100"]),
    "airline_peers": (["--n-train", "100000", "--n-test", "20000", "--sweeps", "2", "--qtkm-sweeps", "3",
                       "--svgp-steps", "1500"],
                      ["--n-train", "2000", "--n-test", "1000", "--sweeps", "1", "--qtkm-sweeps", "1", "--svgp-steps",
                       "50", "--svgp-inducing", "50", "100", "--hyper-max-points", "200"]),
}


def run_entry(name: str, args: list[str]) -> float:
    """Run one entry as ``python -m benchmarks NAME ARGS`` would (its results header records that command);
    returns the seconds it took."""
    from benchmarks.__main__ import ENTRIES

    default_data_dir()
    saved = sys.argv
    sys.argv = ["benchmarks", name, *args]
    try:
        start = time.perf_counter()
        code = importlib.import_module(ENTRIES[name]).main(list(args))
        if code not in (0, None):
            raise RuntimeError(f"{name} returned {code}")
        return time.perf_counter() - start
    finally:
        sys.argv = saved


def main(argv: list[str]) -> int:
    """Run the suite; returns 0 when every entry succeeded, 1 otherwise."""
    from benchmarks.__main__ import ENTRIES

    parser = argparse.ArgumentParser(prog="python -m benchmarks suite")
    parser.add_argument("--full", action="store_true", help="every entry with its defaults, into results/")
    parser.add_argument("--smoke", action="store_true", help="the tiny configuration (what the tests run)")
    parser.add_argument("--only", nargs="+", default=None, choices=sorted(CONFIGS))
    args = parser.parse_args(argv)
    missing = sorted(set(ENTRIES) - set(CONFIGS) - {"suite"})
    if missing:
        raise RuntimeError(f"entries without a suite configuration: {missing}")
    label = "full" if args.full else ("smoke" if args.smoke else "small")
    if not args.full and not os.environ.get(RESULTS_ENV):
        os.environ[RESULTS_ENV] = str(RESULTS_DIR / label)
    names = args.only or list(CONFIGS)
    lines = ["| entry | arguments | seconds | status |", "|---|---|---|---|"]
    total, failed = 0.0, 0
    for name in names:
        entry_args = [] if args.full else CONFIGS[name][0 if label == "small" else 1]
        print(f"== {name} {' '.join(entry_args)}", flush=True)
        try:
            seconds = run_entry(name, entry_args)
            status = "ok"
        except Exception as err:  # keep going: one broken entry must not hide the others' results
            traceback.print_exc()
            seconds, status, failed = float("nan"), f"failed: {type(err).__name__}: {str(err)[:120]}", failed + 1
        total += 0.0 if seconds != seconds else seconds
        lines.append(f"| {name} | `{' '.join(entry_args)}` | {seconds:.0f} | {status} |")
        text = (header(f"Benchmark suite ({label} configuration)",
                       f"every entry run in turn by benchmarks/suite.py; results in {os.environ.get(RESULTS_ENV, RESULTS_DIR)}")
                + "\n".join(lines) + f"\n\nTotal: {total:.0f} s ({total / 60:.1f} min).\n")
        output_path("suite", ".md").write_text(text)
    print(f"suite ({label}): {total:.0f} s, {failed} failed", flush=True)
    return 1 if failed else 0
