#!/usr/bin/env bash
# Regenerates python/nngraph/_core.pyi from the installed extension (after a binding change);
# with --check, fails showing the difference where the checked-in stubs are stale (CI).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
"$PY" -m pip install -q --disable-pip-version-check pybind11-stubgen==3.0.0
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# From the tests folder, so the installed package is the one described.
# --exit-code: a signature with a raw C++ type (a class bound after its first use) fails.
(cd tests && "$PY" -m pybind11_stubgen --exit-code nngraph._core -o "$out" >/dev/null)
if [ "${1:-}" = "--check" ]; then
  if ! diff -u python/nngraph/_core.pyi "$out/nngraph/_core.pyi"; then
    echo "python/nngraph/_core.pyi is stale: run bash scripts/stubs.sh and commit it" >&2
    exit 1
  fi
  echo "_core.pyi matches the built module"
else
  cp "$out/nngraph/_core.pyi" python/nngraph/_core.pyi
fi
