"""Fashion-MNIST: the IDX loader on files written here, and both Fashion-MNIST examples
(classifier and denoising autoencoder) on a part of the real data set."""

import gzip

import numpy as np
import pytest

from nngraph import datasets


def write_idx(path, array, compress):
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with (gzip.open if compress else open)(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def idx_folder(tmp_path, rng):
    arrays = {"train": (rng.integers(0, 256, (7, 28, 28)), rng.integers(0, 10, 7)),
              "test": (rng.integers(0, 256, (3, 28, 28)), rng.integers(0, 10, 3))}
    for split, (images, labels) in arrays.items():
        stems = datasets._IDX[split]
        write_idx(tmp_path / (stems[0] + ".gz"), images, True)  # Debian's files are gzipped
        write_idx(tmp_path / stems[1], labels, False)
    return tmp_path, arrays


def test_the_loader_reads_idx_files(idx_folder):
    folder, arrays = idx_folder
    x_train, y_train, x_test, y_test = datasets.load_fashion_mnist(folder)
    for x, y, (images, labels) in ((x_train, y_train, arrays["train"]), (x_test, y_test, arrays["test"])):
        assert x.dtype == np.float32 and x.shape == (len(images), 1, 28, 28)
        np.testing.assert_allclose(x[:, 0], images / 255.0, rtol=1e-6)
        assert y.dtype == np.int32
        np.testing.assert_array_equal(y, labels)


def test_the_loader_names_what_is_wrong(idx_folder, tmp_path, monkeypatch):
    folder, _ = idx_folder
    (folder / (datasets._IDX["test"][1])).write_bytes(b"\x00\x00\x0d\x01\x00\x00\x00\x03abc")
    with pytest.raises(ValueError, match=r"\[fashion-mnist\] .* is not an unsigned-byte IDX file"):
        datasets.load_fashion_mnist(folder)
    (folder / (datasets._IDX["test"][1])).unlink()
    with pytest.raises(FileNotFoundError, match=r"\[fashion-mnist\] no t10k-labels-idx1-ubyte\[.gz\]"):
        datasets.load_fashion_mnist(folder)
    monkeypatch.setenv("NNGRAPH_FASHION_MNIST", str(tmp_path / "absent"))
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        datasets.load_fashion_mnist()


def test_the_real_data_set():
    x_train, y_train, x_test, y_test = datasets.load_fashion_mnist()
    assert x_train.shape == (60000, 1, 28, 28) and x_test.shape == (10000, 1, 28, 28)
    assert np.bincount(y_train).tolist() == [6000] * 10 and np.bincount(y_test).tolist() == [1000] * 10
    assert 0.28 < x_train.mean() < 0.29  # the data set's published mean, 0.2860


def test_the_classifier_example_learns(device, capsys):
    from nngraph.examples import fashion

    result = fashion.main(["--device", device, "--limit", "4000", "--epochs", "2", "--target", "0.75", "--quiet"])
    assert result["accuracy"] >= 0.75
    out = capsys.readouterr().out
    assert "epoch 2: loss" in out and "wall time" in out


def test_the_speedrun_example_learns(device, capsys):
    from nngraph.examples import speedrun

    result = speedrun.main(["--device", device, "--limit", "2048", "--test-limit", "1000", "--epochs", "6",
                            "--batch-size", "128", "--widths", "16", "32", "32", "--seeds", "2", "--target", "0.65"])
    assert len(result["accuracies"]) == 2 and min(result["accuracies"]) >= 0.65
    out = capsys.readouterr().out
    assert "seed 1: test accuracy" in out and "reached 65.0%" in out


def test_the_denoising_example_removes_noise(device, capsys):
    from nngraph.examples import denoise

    result = denoise.main(["--device", device, "--limit", "3000", "--epochs", "2"])
    assert result["error"] < 0.5 * result["noisy_error"]
    assert result["history"][1] < result["history"][0]
    assert "epoch 2: training loss" in capsys.readouterr().out
