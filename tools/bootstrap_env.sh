#!/usr/bin/env bash
# Create (if needed) the project's virtual environment and install tnbayes into it.
#
#   tools/bootstrap_env.sh VENV_DIR EXTRAS
#
# torch: if the environment already has one, it is kept. Otherwise, when pip's configured
# find-links folder holds a local torch wheel (as on our CI machines), that exact version is
# installed from it, so no multi-GB download happens; anywhere else plain `torch` is installed
# (set TORCH_SPEC to choose, e.g. TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu").
set -euo pipefail
venv=${1:-.venv}
extras=${2:-test}
python=${PYTHON:-python3}

if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip="$venv/bin/python -m pip"

if ! "$venv/bin/python" -c "import torch" >/dev/null 2>&1; then
  if [ -z "${TORCH_SPEC:-}" ]; then
    links="${PIP_FIND_LINKS:-$($venv/bin/python -m pip config get global.find-links 2>/dev/null || true)}"
    wheel=""
    for dir in $links; do
      dir=${dir#file://}
      cand=$(ls "$dir"/torch-*.whl 2>/dev/null | head -n 1 || true)
      [ -n "$cand" ] && wheel=$cand && break
    done
    if [ -n "$wheel" ]; then
      version=$(basename "$wheel" | cut -d- -f2 | cut -d+ -f1)
      TORCH_SPEC="torch==$version"
      echo "bootstrap: using the local torch wheel $wheel ($TORCH_SPEC)"
    else
      TORCH_SPEC="torch"
    fi
  fi
  # shellcheck disable=SC2086
  $pip install -q $TORCH_SPEC
fi
$pip install -q -e ".[$extras]"
