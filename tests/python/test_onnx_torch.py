"""ONNX import against a producer nngraph did not write: PyTorch's exporters (TorchScript and
dynamo) on the digit network, ResNet-18, Inception-v3 and an LSTM classifier with random
weights, and on the layers FIXED lists (exported for one batch size, imported, then saved again
for onnxruntime); the imported graph's outputs equal torch's. Skipped where torch is not
installed."""

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from conftest import GPUS  # noqa: E402

import nngraph as ng  # noqa: E402
import nngraph.onnx as ngx  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import torch_models  # noqa: E402

# The exporters' own deprecation and export notices.
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning", "ignore::DeprecationWarning")


class LSTMClassifier(torch.nn.Module):
    """Sequences (N, T, F), batch first → a two-layer LSTM → the last step's output → logits."""

    def __init__(self, features=8, hidden=16, classes=4):
        super().__init__()
        self.lstm = torch.nn.LSTM(features, hidden, num_layers=2, batch_first=True)
        self.fc = torch.nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y[:, -1])


class SequenceTransformer(torch.nn.Module):
    """Sequences (N, T, F) → a linear embedding → nn.TransformerEncoder (two layers, post- or
    pre-norm, relu or gelu; causal: each step attends to those before it, a mask of −∞) → the
    mean over the steps → logits."""

    def __init__(self, norm_first=False, activation="relu", causal=False, features=6, width=16, classes=4, length=7):
        super().__init__()
        self.embed = torch.nn.Linear(features, width)
        layer = torch.nn.TransformerEncoderLayer(width, 4, 32, dropout=0.0, activation=activation, batch_first=True,
                                                 norm_first=norm_first)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = torch.nn.Linear(width, classes)
        self.causal = causal
        self.register_buffer("mask", torch.nn.Transformer.generate_square_subsequent_mask(length) if causal else None)

    def forward(self, x):
        y = self.encoder(self.embed(x), mask=self.mask, is_causal=self.causal)
        return self.head(y.mean(1))


class CausalAttention(torch.nn.Module):
    """Causal self-attention on sequences (N, T, E) twice: scaled_dot_product_attention with
    is_causal, and written out with masked_fill(−∞) of a lower-triangular buffer; summed."""

    def __init__(self, width=16, heads=4, length=7, classes=3):
        super().__init__()
        self.heads = heads
        self.qkv, self.head = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, classes)
        self.register_buffer("tri", torch.tril(torch.ones(length, length)))

    def forward(self, x):
        n, t, e = x.shape
        q, k, v = self.qkv(x).reshape(n, t, 3, self.heads, e // self.heads).permute(2, 0, 3, 1, 4)
        fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        scores = (q @ k.transpose(-2, -1) * (e // self.heads) ** -0.5).masked_fill(self.tri == 0, float("-inf"))
        y = fused + scores.softmax(-1) @ v
        return self.head(y.transpose(1, 2).reshape(n, t, e))


class SelfAttention(torch.nn.Module):
    """nn.MultiheadAttention over a convolution's pixels, written out by hand beside it
    (q·kᵀ scaled, softmax, ·v), mean-pooled."""

    def __init__(self, width=16, heads=4, classes=5):
        super().__init__()
        self.heads = heads
        self.stem = torch.nn.Conv2d(3, width, 3, stride=2, padding=1)
        self.attention = torch.nn.MultiheadAttention(width, heads, batch_first=True)
        self.q, self.k = torch.nn.Linear(width, width), torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, classes)

    def forward(self, x):
        t = self.stem(x).flatten(2).transpose(1, 2)
        t = t + self.attention(t, t, t, need_weights=False)[0]
        n, length, c = t.shape
        q, k = (f(t).reshape(n, length, self.heads, -1).transpose(1, 2) for f in (self.q, self.k))
        scores = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        v = t.reshape(n, length, self.heads, -1).transpose(1, 2)
        t = t + (scores.softmax(-1) @ v).transpose(1, 2).reshape(n, length, c)
        return self.head(t.mean(1))


def digit_network():
    f = torch.nn
    return f.Sequential(f.Conv2d(1, 32, 5, padding=2), f.ReLU(), f.MaxPool2d(2), f.Conv2d(32, 64, 5, padding=2),
                        f.ReLU(), f.MaxPool2d(2), f.Flatten(), f.Linear(3136, 1024), f.ReLU(), f.Dropout(0.5),
                        f.Linear(1024, 10), f.Softmax(1))


NETWORKS = {
    "digits": (digit_network, (3, 1, 28, 28)),
    "resnet18": (lambda: torch_models.ResNet(False, (2, 2, 2, 2), classes=10), (3, 3, 64, 64)),
    "inception_v3": (lambda: torch_models.InceptionV3(classes=20), (2, 3, 299, 299)),
    "lstm": (LSTMClassifier, (3, 5, 8)),
    "vit": (torch_models.ViT, (3, 3, 16, 16)),
    "self_attention": (SelfAttention, (3, 3, 8, 10)),
    "transformer_encoder": (SequenceTransformer, (3, 7, 6)),
    "transformer_encoder_pre_norm": (lambda: SequenceTransformer(True, "gelu"), (3, 7, 6)),
    "causal_transformer_encoder": (lambda: SequenceTransformer(causal=True), (3, 7, 6)),
    "causal_attention": (CausalAttention, (3, 7, 16)),
}


def randomized(net):
    """Eval mode with batch-norm statistics and affine terms that are not the defaults."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5, generator=gen)
                m.running_var.uniform_(0.5, 2.0, generator=gen)
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.uniform_(-0.5, 0.5, generator=gen)
    return net.eval()


def export(net, x, path, dynamo: bool, opset=None):
    if dynamo:
        pytest.importorskip("onnxscript")
        torch.onnx.export(net, (x,), path, dynamo=True, input_names=["x"], opset_version=opset,
                          dynamic_shapes=({0: torch.export.Dim("N", min=2)},))
    else:
        torch.onnx.export(net, (x,), path, dynamo=False, input_names=["x"], opset_version=opset,
                          dynamic_axes={"x": {0: "N"}})


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("name", list(NETWORKS))
def test_pytorch_exports_import_to_the_same_outputs(name, dynamo, device, tmp_path):
    build, shape = NETWORKS[name]
    torch.manual_seed(0)
    net = randomized(build())
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = net(x).numpy()
    export(net, x, tmp_path / "model.onnx", dynamo)
    graph = ngx.load(tmp_path / "model.onnx", device=device)
    assert graph.source_image_handles[0].label == "x"
    out = ngx.run(graph, {"x": x.numpy()})[0]
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
    # Another batch size than the one exported with: the graph takes any.
    x2 = torch.randn(shape[0] + 2, *shape[1:])
    with torch.no_grad():
        expected2 = net(x2).numpy()
    np.testing.assert_allclose(ngx.run(graph, [x2.numpy()])[0], expected2, rtol=1e-4,
                               atol=1e-5 * np.abs(expected2).max())


class SqueezeExcite(torch.nn.Module):
    """A convolution whose channels are scaled by a squeeze-and-excitation block written as
    SENet's code writes it: pooled, two linear layers, `.view` and `expand_as`."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.fc1, self.fc2 = torch.nn.Linear(8, 2), torch.nn.Linear(2, 8)

    def forward(self, x):
        x = self.conv(x)
        b, c = x.shape[:2]
        y = torch.nn.functional.adaptive_avg_pool2d(x, 1).view(b, c)
        y = torch.sigmoid(self.fc2(torch.relu(self.fc1(y)))).view(b, c, 1, 1)
        return x * y.expand_as(x)


class GRULast(torch.nn.Module):
    """Sequences (T, N, F) → a GRU → its last hidden state (`h[-1]`) → logits."""

    def __init__(self):
        super().__init__()
        self.gru, self.fc = torch.nn.GRU(6, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(self.gru(x)[1][-1])


class Flattened(torch.nn.Module):
    """`x.view(x.size(0), -1)` before the classifier, as older networks flatten."""

    def __init__(self):
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 4, 3), torch.nn.Linear(4 * 7 * 7, 5)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        return self.fc(x.view(x.size(0), -1))


class ChannelsFirstNorm(torch.nn.Module):
    """A convolution, then ConvNeXt's layer norm over the channels of (N, C, H, W), written out
    with means over axis 1."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.weight, self.bias = torch.nn.Parameter(torch.rand(8) + 0.5), torch.nn.Parameter(torch.rand(8))

    def forward(self, x):
        x = self.conv(x)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + 1e-6)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class SpatialAttention(torch.nn.Module):
    """CBAM's spatial attention: the channels' mean and maximum, concatenated, a 7×7 convolution,
    a sigmoid scaling every channel."""

    def __init__(self):
        super().__init__()
        self.conv, self.attend = torch.nn.Conv2d(3, 8, 3), torch.nn.Conv2d(2, 1, 7, padding=3)

    def forward(self, x):
        x = self.conv(x)
        a = torch.cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)
        return x * torch.sigmoid(self.attend(a))


def local_response_norms():
    """Convolutions, each followed by PyTorch's LocalResponseNorm (an odd and an even window),
    which it exports through (N, 1, C, H, W): the channels padded, then averaged in windows."""
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.LocalResponseNorm(3, alpha=0.5, k=1.5),
                               torch.nn.Conv2d(8, 6, 1), torch.nn.LocalResponseNorm(4, alpha=0.3, beta=0.6))


def sub_pixel():
    """ESPCN's upscaling (PyTorch's super-resolution tutorial): a convolution to r² channels a
    pixel, then PixelShuffle(r)."""
    return torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.Tanh(),
                               torch.nn.Conv2d(8, 9, 3, padding=1), torch.nn.PixelShuffle(3))


class NormalizedEmbedding(torch.nn.Module):
    """Features normalized over the channels (F.normalize), a linear layer, the embedding normalized
    again (face and retrieval models), with activations PyTorch exports as operators of their own
    or as compositions: SELU, CELU, Mish, Hardtanh, clamp, minimum."""

    def __init__(self):
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 8, 3), torch.nn.Linear(8 * 7 * 7, 16)

    def forward(self, x):
        F = torch.nn.functional
        x = F.normalize(F.selu(self.conv(x)), dim=1)
        x = torch.minimum(F.mish(x), F.celu(x, 0.5)).clamp(min=-0.2)
        return F.normalize(F.hardtanh(self.fc(F.normalize(x.flatten(1), dim=1))), dim=1)


class WrittenOutShuffles(torch.nn.Module):
    """Pixel shuffles written with view and permute (as code before PixelShuffle and TensorFlow's
    depth_to_space write them, CRD and DCR), and PixelUnshuffle, which PyTorch exports so."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        x = self.conv(x)
        n, c, h, w = x.shape
        crd = x.view(n, c // 4, 2, 2, h, w).permute(0, 1, 4, 2, 5, 3).reshape(n, c // 4, 2 * h, 2 * w)
        dcr = x.view(n, 2, 2, c // 4, h, w).permute(0, 3, 4, 1, 5, 2).reshape(n, c // 4, 2 * h, 2 * w)
        return torch.nn.functional.pixel_unshuffle(crd * torch.sigmoid(dcr), 2)


class Resampled(torch.nn.Module):
    """interpolate to sizes no integer factor reaches (bilinear, bicubic, nearest), by 1/2, and
    torch.flip."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        F = torch.nn.functional
        x = F.interpolate(self.conv(x), size=(11, 6), mode="bilinear")
        x = F.interpolate(torch.flip(x, [3]), scale_factor=0.5) + F.interpolate(x, size=(5, 3), mode="bicubic")
        return torch.flip(F.interpolate(x, size=(7, 4), mode="nearest"), [2, 3])


@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("device", GPUS)
def test_causal_masks_in_half_graphs(fmt, device, tmp_path):
    """A causal mask's −∞ imported as a finite weight (±65504, what float16 holds): half graphs
    on a GPU give finite outputs near torch's, the masked scores' weights 0."""
    torch.manual_seed(0)
    net = CausalAttention().eval()
    x = torch.randn(3, 7, 16)
    with torch.no_grad():
        expected = net(x).numpy()
    export(net, x, tmp_path / "m.onnx", dynamo=False)
    out = ngx.run(ngx.load(tmp_path / "m.onnx", device=device, format=fmt), [x.numpy()])[0]
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, expected, rtol=0.05, atol=0.05 * np.abs(expected).max())


class SegmentationHead(torch.nn.Module):
    """DeepLab's ASPP (dilated branches, an image-pooling branch upsampled to the feature map)
    and its logits resized to the input's odd size with align_corners, beside an FPN-style sum
    of a feature map and a coarser one resized to it by nearest."""

    def __init__(self):
        super().__init__()
        self.stem, self.coarse = torch.nn.Conv2d(3, 16, 3, stride=4, padding=1), torch.nn.Conv2d(16, 8, 3, 2, 1)
        self.a1, self.a2 = torch.nn.Conv2d(16, 8, 1), torch.nn.Conv2d(16, 8, 3, padding=2, dilation=2)
        self.pool = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(1), torch.nn.Conv2d(16, 8, 1))
        self.head = torch.nn.Conv2d(24, 5, 1)

    def forward(self, x):
        F = torch.nn.functional
        f = F.relu(self.stem(x))
        pooled = F.interpolate(self.pool(f), size=f.shape[-2:], mode="bilinear", align_corners=False)
        lateral = self.a1(f) + F.interpolate(self.coarse(f), size=f.shape[-2:], mode="nearest")
        y = self.head(torch.cat([lateral, self.a2(f), pooled], 1))
        return F.interpolate(y, size=x.shape[-2:], mode="bilinear", align_corners=True)


FIXED = {"squeeze_excite": (SqueezeExcite, (2, 3, 9, 9)), "gru_last": (GRULast, (5, 2, 6)),
         "lstm": (LSTMClassifier, (3, 5, 8)), "flattened": (Flattened, (2, 3, 9, 9)),
         "channels_first_norm": (ChannelsFirstNorm, (2, 3, 9, 9)),
         "spatial_attention": (SpatialAttention, (2, 3, 9, 9)),
         "local_response_norms": (local_response_norms, (2, 3, 9, 9)), "sub_pixel": (sub_pixel, (2, 1, 7, 8)),
         "normalized_embedding": (NormalizedEmbedding, (2, 3, 9, 9)), "shuffles": (WrittenOutShuffles, (2, 3, 6, 4)),
         "resampled": (Resampled, (2, 3, 9, 9)), "segmentation_head": (SegmentationHead, (2, 3, 33, 45))}


@pytest.mark.parametrize("dynamo", [False, True], ids=["torchscript", "dynamo"])
@pytest.mark.parametrize("name", list(FIXED))
def test_exports_for_one_batch_size_import(name, dynamo, tmp_path):
    """Exported without dynamic axes: the batch size is a constant in the shape arithmetic
    (zero initial states, flattening) and the import reads it as the batch. An image model
    imported is saved again, and onnxruntime runs that as the import ran."""
    build, shape = FIXED[name]
    torch.manual_seed(0)
    net = build().eval()
    x = torch.randn(*shape)
    with torch.no_grad():
        expected = net(x).numpy()
    torch.onnx.export(net, (x,), tmp_path / "m.onnx", dynamo=dynamo, **({} if dynamo else {"opset_version": 17}))
    graph = ngx.load(tmp_path / "m.onnx")
    out = ngx.run(graph, [x.numpy()])[0]
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())
    if len(shape) == 4:
        ngx.save(graph, tmp_path / "back.onnx")
        s = ort.InferenceSession(str(tmp_path / "back.onnx"), providers=["CPUExecutionProvider"])
        again = s.run(None, {s.get_inputs()[0].name: x.numpy()})[0]
        np.testing.assert_allclose(again.reshape(out.shape), out, rtol=1e-5, atol=1e-6 * np.abs(out).max())


def test_weights_keep_their_module_names(tmp_path):
    net = randomized(torch_models.ResNet(False, (2, 2, 2, 2), classes=10))
    export(net, torch.randn(2, 3, 32, 32), tmp_path / "r.onnx", dynamo=True)
    labels = {ds.label() for ds in ngx.load(tmp_path / "r.onnx").data_sources}
    assert {"conv1", "layer1.0.conv1", "layer4.1.conv2", "fc"} <= labels
    fc = next(ds for ds in ngx.load(tmp_path / "r.onnx").data_sources if ds.label() == "fc")
    np.testing.assert_array_equal(fc.tensors()["weights"].reshape(10, 512), net.fc.weight.detach().numpy())


def test_linear_layers_on_tokens_keep_their_module_names(tmp_path):
    """The dynamo exporter writes a Linear on tokens as MatMul by an anonymous transposed copy of
    its weights and an Add of its named bias: the layer takes the bias's module name."""
    torch.manual_seed(0)
    export(torch_models.ViT().eval(), torch.randn(2, 3, 16, 16), tmp_path / "v.onnx", dynamo=True)
    labels = {ds.label() for ds in ngx.load(tmp_path / "v.onnx").data_sources}
    assert {"patch", "cls", "pos", "blocks.0.qkv", "blocks.1.proj", "blocks.1.mlp.2", "head"} <= labels


@pytest.mark.parametrize("opset", [11, 13, 17, 20])
def test_older_and_newer_opsets(opset, tmp_path):
    net = torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.GELU(),
                              torch.nn.Upsample(scale_factor=2), torch.nn.AvgPool2d(3, 2, ceil_mode=True),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 81, 6), torch.nn.LogSoftmax(1))
    net = randomized(net)
    x = torch.randn(3, 2, 9, 9)
    export(net, x, tmp_path / "m.onnx", dynamo=False, opset=opset)
    with torch.no_grad():
        expected = net(x).numpy()
    np.testing.assert_allclose(ngx.run(ngx.load(tmp_path / "m.onnx"), [x.numpy()])[0], expected, rtol=1e-4,
                               atol=1e-5)


def test_an_imported_model_fine_tunes(tmp_path):
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images[:, None] / 16.0).astype(np.float32)
    y = d.target
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Flatten(), torch.nn.Linear(128, 10)).eval()
    export(net, torch.from_numpy(x[:4]), tmp_path / "d.onnx", dynamo=False)
    graph = ngx.load(tmp_path / "d.onnx")
    before = ng.evaluate(graph, x, y)["accuracy"]
    loss = ng.Loss(graph.result_images[0], ng.LossDescriptor("softmax_cross_entropy", "mean"))
    train = loss.training_graph(optimizer=ng.Adam(1e-2))
    history = ng.fit(train, (x[:1500], y[:1500]), epochs=5, batch_size=64, progress=False)
    assert history["loss"][-1] < history["loss"][0]
    after = ng.evaluate(train, x[1500:], y[1500:])["accuracy"]
    assert before < 0.3 < 0.9 < after
    # The graph imported reads the trained weights in place.
    assert ng.evaluate(graph, x[1500:], y[1500:])["accuracy"] == after


def test_an_imported_transformer_trains_as_torch_does(tmp_path):
    """One SGD step of the imported ViT moves its attention's weights and its position embedding
    by torch's gradients of the same loss."""
    torch.manual_seed(0)
    net = torch_models.ViT().eval()
    x, y = torch.randn(4, 3, 16, 16), torch.tensor([1, 7, 3, 0])
    torch.nn.functional.cross_entropy(net(x), y).backward()
    export(net, x, tmp_path / "vit.onnx", dynamo=False)
    graph = ngx.load(tmp_path / "vit.onnx")
    loss = ng.Loss(graph.result_images[0], ng.LossDescriptor("softmax_cross_entropy", "mean"))
    lr = 0.01
    train = loss.training_graph(optimizer=ng.SGD(learning_rate=lr))
    before = train.parameters()
    ng.fit(train, (x.numpy(), y.numpy()), epochs=1, batch_size=4, shuffle=False, progress=False)
    after = train.parameters()

    def step(label, tensor="weights"):
        return (before[label][tensor] - after[label][tensor]) / lr

    # Each Linear on tokens (MatMul, then Add of its bias) is one product with its bias.
    assert not [label for label in before if label.endswith("Add")]

    # The first block's projection: its gradient passes through both blocks.
    qkv = net.blocks[0]["qkv"].weight.grad.numpy()
    np.testing.assert_allclose(step("blocks.0.qkv").reshape(qkv.shape), qkv, rtol=2e-3, atol=2e-5)
    np.testing.assert_allclose(step("blocks.0.qkv", "biases"), net.blocks[0]["qkv"].bias.grad.numpy(), rtol=2e-3,
                               atol=2e-5)
    pos = net.pos.grad.numpy()[0]  # (T, C); the embedding's image is (C, 1, T)
    np.testing.assert_allclose(step("pos").reshape(pos.shape[1], pos.shape[0]).T, pos, rtol=2e-3, atol=2e-5)


@pytest.mark.parametrize("name", ["vit", "self_attention", "causal_attention", "causal_transformer_encoder"])
def test_an_imported_transformer_saves_and_imports_back(name, tmp_path):
    """The import saved again: onnxruntime runs it as the import ran, and it imports back the same
    (the tokens' (C, 1, L) rows made from (C, H, W) images are copies the reading operators take;
    a causal mask's frozen constants are written as they were read). The saved model takes and
    gives the graph's images: a sequence (N, T, F) as (N, F, 1, T)."""
    build, shape = NETWORKS[name]
    torch.manual_seed(0)
    net = build().eval()
    x = torch.randn(*shape)
    export(net, x, tmp_path / "m.onnx", dynamo=False)
    graph = ngx.load(tmp_path / "m.onnx")
    image = x.numpy() if x.ndim == 4 else np.ascontiguousarray(x.numpy().transpose(0, 2, 1)[:, :, None, :])
    ours = graph.run(image)
    ngx.save(graph, tmp_path / "back.onnx")
    s = ort.InferenceSession(str(tmp_path / "back.onnx"), providers=["CPUExecutionProvider"])
    again = s.run(None, {s.get_inputs()[0].name: image})[0]
    np.testing.assert_allclose(again.reshape(ours.shape), ours, rtol=1e-5, atol=1e-6 * np.abs(ours).max())
    back = ngx.load(tmp_path / "back.onnx").run(image)
    np.testing.assert_allclose(back.reshape(ours.shape), ours, rtol=1e-5, atol=1e-6 * np.abs(ours).max())
