#!/usr/bin/env bash
# Builds the cuda extension here for the GPU machine's Python (3.12) and packs it into
# .device/nngraph-cuda.tar.xz (about 7 MB) with the C++ suite's binary, so that
# `scripts/gpu_check.sh --carried` runs both suites there without building (a build takes about
# 330 s of that machine's time). Needs nvcc, GoogleTest (Debian's libgtest-dev), and PYTHON312
# (default python3.12) with numpy, pybind11, scikit-build-core, cmake and ninja; cuDNN's and
# cuBLAS's headers come from their wheels (pip's registry). The cpu code is
# built without -march=native (that machine's processor is another) and the CUDA code for sm_90
# alone, so carried builds are for Hopper GPUs and never for cpu timings.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON312:-python3.12}
WORK=${WORK:-/tmp/nngraph-carried}
mkdir -p "$WORK" .device
[ -d "$WORK/wheels/nvidia/cudnn" ] || "$PY" -m pip install -q --target "$WORK/wheels" nvidia-cudnn-cu13 nvidia-cublas
rm -rf "$WORK/site"
PYTHONPATH="$WORK/wheels" "$PY" -m pip install -q --no-build-isolation --no-deps --target "$WORK/site" \
  -C build-dir="$WORK/build" -C cmake.define.NNGRAPH_CUDA=ON -C cmake.define.NNGRAPH_NATIVE=OFF \
  -C cmake.define.CMAKE_CUDA_ARCHITECTURES=90-real -C cmake.define.NNGRAPH_TESTS=ON \
  -C cmake.define.CMAKE_GTEST_DISCOVER_TESTS_DISCOVERY_MODE=PRE_TEST .
cp "$WORK/build/nngraph_tests" "$WORK/site/"
git describe --always --dirty > "$WORK/site/nngraph/CARRIED_FROM"
# A 64 MiB window: the two binaries share most of their code.
tar -C "$WORK/site" --exclude=__pycache__ -cf - nngraph nngraph_tests | xz -9e > .device/nngraph-cuda.tar.xz
echo "$(du -h .device/nngraph-cuda.tar.xz | cut -f1) from $(cat "$WORK/site/nngraph/CARRIED_FROM")"
