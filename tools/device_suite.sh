#!/usr/bin/env bash
# The test suite on a lent GPU machine (the device tool of this workplace), in the machine's own Python/torch.
#
# Here, once per session:   tools/device_suite.sh prepare
#   copies ../shared/data to .devdata/ and the pure-Python packages the machine lacks (arviz-base, pooch,
#   platformdirs, properscoring, xarray) from .venv to .devpkgs/; both are git-ignored through .git/info/exclude.
# There (run's command, carry [".devdata", ".devpkgs"]):   bash tools/device_suite.sh run 1 2   (then 2 2)
#   runs half K of N of the suite (tests/test_docs.py left out: no mkdocs there) with 8 pytest-xdist workers,
#   every result named in $OUT/suite_K_of_N.log as it happens (-v), failures summarised (-rf); the versions in
#   $OUT/env.txt. Each half ends well inside one call's 10-minute limit on a 16-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  prepare)
    grep -qx '/.devdata/' .git/info/exclude 2>/dev/null || echo '/.devdata/' >> .git/info/exclude
    grep -qx '/.devpkgs/' .git/info/exclude 2>/dev/null || echo '/.devpkgs/' >> .git/info/exclude
    rm -rf .devdata .devpkgs && mkdir -p .devdata .devpkgs
    cp -r ../shared/data/. .devdata/
    site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    for name in arviz_base pooch platformdirs properscoring xarray; do
      cp -r "$site/$name" "$site"/"$name"-*.dist-info .devpkgs/
    done
    find .devpkgs -name __pycache__ -prune -exec rm -rf {} +
    du -sh .devdata .devpkgs ;;
  run)
    half=${2:?half K}; halves=${3:?of N}
    export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/.devpkgs:$PWD"
    [ -e ../shared/data ] || { mkdir -p ../shared && ln -s "$PWD/.devdata" ../shared/data; }  # the tests' data
    python3 -c "import sys, torch, numpy, scipy, sklearn, gpytorch, pandas; print(sys.version.split()[0], torch.__version__, numpy.__version__, scipy.__version__, sklearn.__version__, gpytorch.__version__, pandas.__version__, torch.cuda.is_available())" | tee "$OUT/env.txt"
    mapfile -t files < <(find tests -name 'test_*.py' ! -name test_docs.py | sort | awk -v k="$half" -v n="$halves" 'NR % n == k % n')
    timeout 540 python3 -m pytest -v -rf -n 8 -p no:cacheprovider "${files[@]}" > "$OUT/suite_${half}_of_${halves}.log" 2>&1 || true
    grep -E "FAILED|ERROR|passed|failed" "$OUT/suite_${half}_of_${halves}.log" | tail -40 ;;
  *)
    echo "usage: tools/device_suite.sh prepare | run K N" >&2; exit 2 ;;
esac
