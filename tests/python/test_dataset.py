"""DeviceDataset: batches gathered and augmented on the device, against numpy; fit and
evaluate (with test-time augmentation) taking it."""

import numpy as np
import pytest
from conftest import DEVICES, GPUS

import nngraph as ng

PADS = {"reflect": "reflect", "zero": "constant", "edge": "edge"}


def moved(image, flip, dy, dx, pad):
    """numpy: out(y, x) = in(y + dy, x + dx) of the image mirrored first, padded by `pad`."""
    if flip:
        image = image[..., ::-1]
    h, w = image.shape[-2:]
    t = max(abs(dy), abs(dx), 1)
    padded = np.pad(image, ((0, 0), (t, t), (t, t)), mode=PADS[pad])
    return padded[:, t + dy:t + dy + h, t + dx:t + dx + w]


def the_move(out, image, translate, pad):
    """The (flip, dy, dx) within reach that makes `out` from `image` (None where none does)."""
    for flip in (False, True):
        for dy in range(-translate, translate + 1):
            for dx in range(-translate, translate + 1):
                if np.array_equal(out, moved(image, flip, dy, dx, pad)):
                    return flip, dy, dx
    return None


@pytest.fixture
def data(rng):
    x = rng.standard_normal((37, 3, 6, 7)).astype(np.float32)
    y = rng.integers(0, 5, 37)
    return x, y


def test_order_is_a_permutation_per_epoch(device, data):
    x, y = data
    ds = ng.DeviceDataset(x, y, device, seed=3)
    first, again, second = ds.order(0), ds.order(0), ds.order(1)
    assert sorted(first) == list(range(37)) and sorted(second) == list(range(37))
    assert np.array_equal(first, again) and not np.array_equal(first, second)
    assert np.array_equal(ds.order(4, shuffle=False), np.arange(37))
    assert not np.array_equal(ng.DeviceDataset(x, y, device, seed=4).order(0), first)


@pytest.mark.parametrize("pad", ["reflect", "zero", "edge"])
@pytest.mark.parametrize("flip", [None, "random"])
def test_batches_are_gathered_and_moved(device, data, pad, flip):
    x, y = data
    ds = ng.DeviceDataset(x, y, device, translate=2, pad=pad, flip=flip, seed=7)
    assert len(ds) == 37 and ds.shape == (3, 6, 7) and ds.labels.shape == (37, 5)
    moves = []
    for epoch in range(3):
        order = ds.order(epoch)
        for start in range(0, 37, 16):
            count = min(16, 37 - start)
            images, labels = ds.batch(epoch, start, count)
            images, labels = images.numpy(), labels.numpy().reshape(count, 5)
            idx = order[start:start + count]
            np.testing.assert_array_equal(labels, np.eye(5, dtype=np.float32)[y[idx]])
            for out, i in zip(images, idx):
                move = the_move(out, x[i], 2, pad)
                assert move is not None, f"image {i} was not moved by any shift within 2 pixels"
                moves.append(move)
    flips, shifts = {m[0] for m in moves}, {m[1:] for m in moves}
    assert flips == ({False, True} if flip else {False})
    assert len(shifts) > 15  # of the 25 shifts within reach


def test_alternating_flip_turns_each_image_over_every_epoch(device, data):
    x, y = data
    ds = ng.DeviceDataset(x, y, device, flip="alternating", seed=2)
    flipped = []
    for epoch in range(3):
        images = ds.batch(epoch, 0, 37, shuffle=False)[0].numpy()
        flipped.append([the_move(out, img, 0, "reflect")[0] for out, img in zip(images, x)])
    flipped = np.array(flipped)
    assert 8 < flipped[0].sum() < 29  # a random half
    assert np.all(flipped[0] != flipped[1]) and np.all(flipped[0] == flipped[2])


@pytest.mark.parametrize("pad", ["reflect", "zero"])
@pytest.mark.parametrize("flip,shift", [(False, (0, 0)), (True, (0, 0)), (False, (-1, 1)), (True, (2, -1))])
def test_views_against_numpy(device, data, pad, flip, shift):
    x, y = data
    ds = ng.DeviceDataset(x, y, device, pad=pad)
    out = ds.view(5, 20, flip=flip, shift=shift).numpy()
    expected = np.stack([moved(img, flip, *shift, pad) for img in x[5:25]])
    np.testing.assert_array_equal(out, expected)


@pytest.mark.skipif(not GPUS, reason="no GPU present")
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_gpu_batches_equal_cpu_batches(data, dtype):
    x, y = data
    kw = {"translate": 3, "flip": "random", "seed": 11, "dtype": dtype, "pad": "zero"}
    cpu = ng.DeviceDataset(x, y, "cpu", **{**kw, "dtype": "float32"})
    gpu = ng.DeviceDataset(x, y, GPUS[0], **kw)
    assert gpu.dtype == dtype
    for epoch in range(2):
        a, la = cpu.batch(epoch, 3, 30)
        b, lb = gpu.batch(epoch, 3, 30)
        expected = ng.Image(a.numpy(), device="cpu").astype(dtype).numpy() if dtype != "float32" else a.numpy()
        np.testing.assert_array_equal(b.numpy(), expected)
        np.testing.assert_array_equal(lb.numpy(), la.numpy())


def classifier(device, seed=0, classes=10):
    """A small convolutional classifier for 1×8×8 digits."""
    src = ng.ImageNode((1, 8, 8))
    conv = ng.Convolution(src, ng.ArrayDataSource(ng.ConvolutionDescriptor(3, 1, 8, neuron="relu"), seed=seed,
                                                  label="conv", optimizer=ng.SGD(0.05, momentum=0.9)),
                          padding="same")
    pool = ng.Pooling(conv, "max", 2)
    fc = ng.FullyConnected(pool, ng.ArrayDataSource(ng.ConvolutionDescriptor(4, 8, classes), seed=seed + 1,
                                                    label="fc", optimizer=ng.SGD(0.05, momentum=0.9)))
    return ng.Loss(fc, ng.LossDescriptor("softmax_cross_entropy", "mean")).training_graph(device=device)


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.images[:, None] / 16.0).astype(np.float32), d.target


def test_fit_on_a_device_dataset_equals_fit_on_arrays(device, digits):
    x, y = digits[0][:300], digits[1][:300]
    on_host, on_device = classifier(device), classifier(device)
    a = ng.fit(on_host, (x, y), epochs=2, batch_size=64, shuffle=False, progress=False)
    b = ng.fit(on_device, ng.DeviceDataset(x, y, device, classes=10), epochs=2, batch_size=64, shuffle=False,
               progress=False)
    np.testing.assert_allclose(b["loss"], a["loss"], rtol=1e-5)
    np.testing.assert_allclose(b["accuracy"], a["accuracy"])
    for (la, pa), (lb, pb) in zip(on_host.parameters().items(), on_device.parameters().items()):
        assert la == lb
        np.testing.assert_allclose(pb["weights"], pa["weights"], rtol=1e-4, atol=1e-6)


def test_fit_learns_from_augmented_batches_and_evaluates_with_tta(device, digits):
    x, y = digits
    train = ng.DeviceDataset(x[:1400], y[:1400], device, translate=1, pad="zero", seed=5)
    test = ng.DeviceDataset(x[1400:], y[1400:], device, classes=10)
    g = classifier(device)
    history = ng.fit(g, train, epochs=8, batch_size=128, validation=test, drop_last=True, progress=False)
    assert history["val_accuracy"][-1] > 0.85
    plain = ng.evaluate(g, test)
    assert plain["accuracy"] == pytest.approx(history["val_accuracy"][-1])
    arrays = ng.evaluate(g, x[1400:], y[1400:])
    assert plain["accuracy"] == arrays["accuracy"] and plain["loss"] == pytest.approx(arrays["loss"], rel=1e-6)


@pytest.mark.parametrize("tta", ["flip", "flip_shift"])
def test_tta_averages_the_views_results(device, digits, tta):
    x, y = digits[0][:300], digits[1][:300]
    g = classifier(device)
    ng.fit(g, (x, y), epochs=1, batch_size=64, progress=False)
    inference = g.evaluation()
    expected = sum(w * inference.run(np.stack([moved(img, f, *s, "reflect") for img in x]), labels=y)
                   for f, s, w in ng.training.TTA_VIEWS[tta])
    accuracy = (expected.reshape(300, 10).argmax(1) == y).mean()
    result = ng.evaluate(g, x, y, batch_size=128, tta=tta)
    assert result["accuracy"] == pytest.approx(accuracy)
    assert result["loss"] == pytest.approx(ng.evaluate(g, x, y)["loss"], rel=1e-6)
    assert ng.evaluate(g, ng.DeviceDataset(x, y, device, classes=10), batch_size=128, tta=tta) == result


def test_dataset_errors_name_the_problem(data):
    x, y = data
    with pytest.raises(ValueError, match=r"\[dataset\] 37 images but 36"):
        ng.DeviceDataset(x, y[:36])
    with pytest.raises(ValueError, match="smaller than the images"):
        ng.DeviceDataset(x, y, translate=6)
    with pytest.raises(ValueError, match="flip must be"):
        ng.DeviceDataset(x, y, flip="vertical")
    with pytest.raises(ValueError, match="pad must be"):
        ng.DeviceDataset(x, y, pad="wrap")
    with pytest.raises(ValueError, match="out of range"):
        ng.DeviceDataset(x, y, classes=3)
    with pytest.raises(ValueError, match="would have to move"):
        ng.DeviceDataset(x, x, translate=1)
    ds = ng.DeviceDataset(x, y)
    with pytest.raises(ValueError, match=r"images \[30, 40\) are not within its 37"):
        ds.batch(0, 30, 10)
    with pytest.raises(ValueError, match="shift must be smaller"):
        ds.view(0, 4, shift=(6, 0))
    g = classifier("cpu")
    with pytest.raises(ValueError, match="holds its labels"):
        ng.evaluate(g, ds, y)
    with pytest.raises(ValueError, match="tta must be"):
        ng.evaluate(g, x, y, tta="rotate")
    with pytest.raises(ValueError, match="3 feature channels"):
        ng.fit(g, ds, progress=False)


@pytest.mark.parametrize("device_name", DEVICES)
def test_a_failed_step_leaves_the_epoch_order_usable(device_name, digits):
    """A batch that fails in the graph changes nothing of the dataset: the next fit runs."""
    x, y = digits[0][:200], digits[1][:200]
    bad = ng.DeviceDataset(x, y, device_name, classes=11)  # labels one class too wide
    g = classifier(device_name)
    with pytest.raises(ValueError, match="labels must be"):
        ng.fit(g, bad, progress=False)
    history = ng.fit(g, ng.DeviceDataset(x, y, device_name, classes=10), epochs=1, progress=False)
    assert np.isfinite(history["loss"][0])
