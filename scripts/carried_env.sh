# Sourced on the GPU machine (bash, from the repository root): the carried build
# (scripts/device_carried.sh) unpacked under /tmp/nngraph-carried and put on the path, with
# .device/'s wheels in /tmp/site and the cuDNN and cuBLAS of the machine's torch. Used by
# `scripts/gpu_check.sh --carried`, and by a call's own benchmarks, with or after it.
PY=${PYTHON:-python3}
[ -d /tmp/site/scipy_openblas32 ] ||
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .device/*.whl ||
  return 1
mkdir -p /tmp/nngraph-carried && tar -C /tmp/nngraph-carried -xJf .device/nngraph-cuda.tar.xz || return 1
torch_site=$("$PY" -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
libs=$(find "$torch_site/nvidia" /tmp/site/scipy_openblas32 -name "libcudnn.so.9" -o -name "libcublas.so.*" \
  -o -name "libscipy_openblas.so" | xargs -r -n1 dirname | sort -u | tr '\n' :)
export LD_LIBRARY_PATH=$libs${LD_LIBRARY_PATH:-} PYTHONPATH=/tmp/nngraph-carried:/tmp/site PYTHONUNBUFFERED=1
[ -d .device/fashion-mnist ] && export NNGRAPH_FASHION_MNIST=$PWD/.device/fashion-mnist
echo "carried build of $(cat /tmp/nngraph-carried/nngraph/CARRIED_FROM)"
