"""Compare two benchmark result trees (the suite's small configuration before and after a refactoring).

Every Markdown table row and CSV row is read; a row's key is its entry, file kind and its non-numeric cells;
numeric cells are compared column by column, except columns that measure time or throughput (those change from
run to run). Prints, per entry, the number of compared values and the largest absolute and relative difference,
and lists every value whose relative difference exceeds --rtol (and absolute difference exceeds --atol).

    python -m benchmarks.compare_results BEFORE_DIR AFTER_DIR [--rtol 1e-6] [--atol 1e-9]
"""

from __future__ import annotations

import argparse
import csv
import math
import re
from pathlib import Path

TIME_WORDS = re.compile(r"(^|[^a-z])(s|sec|secs|seconds|time|ms|µs|us|rows/s|per row|throughput|speed|wall|date|"
                        r"minutes|min|hours|speedup|ratio to|× faster|faster|slower|it/s|s/row|ms/row)([^a-z]|$)",
                        re.IGNORECASE)
TEXT_COLUMNS = {"choices", "error", "notes", "command"}
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf", re.IGNORECASE)


def entry_of(path: Path, root: Path, entries: list[str]) -> str:
    parts = path.relative_to(root).parts
    if len(parts) > 1 and parts[0] in entries:
        return parts[0]
    name = parts[0]
    best = max((e for e in entries if name.startswith(e)), key=len, default=name)
    return best


def is_time_column(header: str) -> bool:
    h = header.strip().lower()
    return bool(TIME_WORDS.search(h)) or h.endswith(" s") or h.endswith("(s)") or "seconds" in h


def numbers(cell: str) -> list[float] | None:
    text = cell.strip().replace("−", "-").replace("`", "").replace("*", "")
    if not text:
        return None
    found = NUMBER.findall(text)
    rest = NUMBER.sub("", text)
    if not found or re.search(r"[A-Za-z]{2,}", rest.replace("nan", "")):
        return None
    return [float(x) for x in found]


def md_rows(path: Path):
    header = None
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]  # "\|" is a literal bar
        if header is None:
            header = cells
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue
        yield header, cells


def csv_rows(path: Path):
    with path.open(newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        for row in reader:
            if header:
                yield header, row


def collect(root: Path, entries: list[str]) -> dict[tuple, float]:
    values: dict[tuple, float] = {}
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".md", ".csv") or path.name == "suite.md":
            continue
        rows = md_rows(path) if path.suffix == ".md" else csv_rows(path)
        entry = entry_of(path, root, entries)
        counts: dict[tuple, int] = {}
        for header, cells in rows:
            # a row is named by its text cells, digits masked (labels such as "(M = 4, 8.1 ms/row)" carry timings);
            # free-text columns (a JSON of the choices made, an error message) name nothing
            label = tuple(re.sub(r"\d+(\.\d+)?", "#", c) for col, c in zip(header, cells)
                          if numbers(c) is None and col not in TEXT_COLUMNS)
            base = (entry, path.suffix, tuple(header), label)
            counts[base] = counts.get(base, 0) + 1
            for col, cell in zip(header, cells):
                if is_time_column(col):
                    continue
                parsed = numbers(cell)
                if parsed is None:
                    continue
                for k, value in enumerate(parsed):
                    values[base + (counts[base], col, k)] = value
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--rtol", type=float, default=1e-6)
    parser.add_argument("--atol", type=float, default=1e-9)
    parser.add_argument("--entries", nargs="*", default=None)
    args = parser.parse_args(argv)
    entries = args.entries
    if entries is None:
        from benchmarks.__main__ import ENTRIES

        entries = sorted(ENTRIES)
    before, after = collect(args.before, entries), collect(args.after, entries)
    keys = sorted(set(before) & set(after), key=str)
    per_entry: dict[str, list] = {}
    bad = []
    for key in keys:
        a, b = before[key], after[key]
        stats = per_entry.setdefault(key[0], [0, 0.0, 0.0])
        stats[0] += 1
        if math.isnan(a) and math.isnan(b) or a == b:
            continue
        diff = abs(a - b)
        rel = diff / max(abs(a), abs(b), 1e-300)
        stats[1], stats[2] = max(stats[1], diff), max(stats[2], rel)
        if rel > args.rtol and diff > args.atol:
            bad.append((key, a, b, rel))
    print("| entry | values compared | max abs diff | max rel diff |")
    print("|---|---|---|---|")
    for entry, (n, d, r) in sorted(per_entry.items()):
        print(f"| {entry} | {n} | {d:.3g} | {r:.3g} |")
    only_before = {k[0] for k in set(before) - set(after)}
    only_after = {k[0] for k in set(after) - set(before)}
    print(f"\n{len(keys)} values compared; {len(set(before) - set(after))} only before (entries "
          f"{sorted(only_before)}), {len(set(after) - set(before))} only after (entries {sorted(only_after)}).")
    print(f"{len(bad)} values differ by more than rtol={args.rtol:g} and atol={args.atol:g}:")
    for key, a, b, rel in bad[:200]:
        print(f"- {key}: {a!r} → {b!r} (rel {rel:.2g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
