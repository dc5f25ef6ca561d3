#!/usr/bin/env bash
# Regenerates python/nngraph/_core.pyi from the installed extension (after a binding change).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q pybind11-stubgen
out=$(mktemp -d)
python3 -m pybind11_stubgen nngraph._core -o "$out"
cp "$out/nngraph/_core.pyi" python/nngraph/_core.pyi
