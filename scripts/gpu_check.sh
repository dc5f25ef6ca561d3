#!/usr/bin/env bash
# Verification on a GPU machine without network (the device tool): builds with the cuda
# backend, runs ctest and pytest (every test on cpu and cuda), then the benchmarks given as
# arguments (default: both digit-network benchmarks on cuda). Wheels, GoogleTest and a part of
# Fashion-MNIST come from .device/ (scripts/device_bundle.sh fills it; the test that counts the
# whole data set is left out). pytest runs to the end, so every failure is listed.
# --carried: no build and no cpu benchmark by default; the extension and the C++ suite's binary
# that scripts/device_carried.sh packed, with the cuDNN and cuBLAS of the machine's torch.
set -uo pipefail
cd "$(dirname "$0")/.."
CARRIED=0
[ "${1:-}" = --carried ] && { CARRIED=1; shift; }
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
"$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .device/*.whl || exit 1
export PYTHONPATH=/tmp/site
[ -d .device/fashion-mnist ] && export NNGRAPH_FASHION_MNIST=$PWD/.device/fashion-mnist
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
if [ $CARRIED = 1 ]; then
  . scripts/carried_env.sh || exit 1
  "$PY" -c "import nngraph as ng; assert ng.device_count('cuda') > 0" || exit 1
  /tmp/nngraph-carried/nngraph_tests >"$OUT/ctest.log" 2>&1
  tail -3 "$OUT/ctest.log"; grep -E "^\[  FAILED" "$OUT/ctest.log" | head -20
else
  mkdir -p /tmp/gtest && for d in .device/*.deb; do dpkg -x "$d" /tmp/gtest; done
  "$PY" -m pip install --no-build-isolation --no-deps -v -C build-dir=build/cuda -C cmake.define.NNGRAPH_CUDA=ON \
    -C cmake.define.NNGRAPH_TESTS=ON -C cmake.define.GTest_DIR=/tmp/gtest/usr/lib/x86_64-linux-gnu/cmake/GTest . \
    >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
  grep -E "nngraph:" "$OUT/build.log"
  ctest --test-dir build/cuda --output-on-failure >"$OUT/ctest.log" 2>&1
  tail -3 "$OUT/ctest.log"; grep -E "Failed|\*\*\*" "$OUT/ctest.log" | head -20
fi
"$PY" -m pytest -q -p no:cacheprovider tests/python --deselect tests/python/test_fashion.py::test_the_real_data_set \
  >"$OUT/pytest.log" 2>&1
grep -E "passed|failed|Error" "$OUT/pytest.log" | tail -15
# A carried build's cpu code is not tuned for this machine: no cpu benchmark by default.
if [ $# -eq 0 ] && [ $CARRIED = 1 ]; then set -- "bench/digits_training.py --device cuda"; fi
if [ $# -eq 0 ]; then set -- "bench/digits_training.py --device cuda" "bench/digits_inference.py"; fi
for b in "$@"; do echo "== $b"; "$PY" $b 2>&1 | tee -a "$OUT/bench.log" | tail -6; done
