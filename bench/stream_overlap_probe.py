"""Whether a convolution's weight gradient gains from running beside batch norm's gradient.

In a training step the weight gradient of a convolution (compute-bound) is off the critical
path, while the batch norm + relu gradient of the layer before it (memory-bound) is on it. This
probe times both, for ResNet-18's (32×32 stem, batch 512) and ResNet-50's (batch 256) shapes,
each captured as a CUDA graph: alone, one after the other on one stream, and on two streams
at once (PyTorch's cuDNN kernels, channels-last).

    python bench/stream_overlap_probe.py bf16|tf32 r18 [r50]
"""
import statistics
import sys

import torch

CASES = {  # batch, then (input channels, output channels, side, window) per convolution
    "r18": (512, [(64, 64, 32, 3), (128, 128, 16, 3), (256, 256, 8, 3), (512, 512, 4, 3)]),
    "r50": (256, [(64, 64, 56, 3), (256, 64, 56, 1), (64, 256, 56, 1), (128, 128, 28, 3), (512, 128, 28, 1),
                  (256, 256, 14, 3), (1024, 256, 14, 1), (512, 512, 7, 3)]),
}


def replay_us(graph, runs=30):
    """Median µs of one replay of `graph`."""
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000)
    return statistics.median(times)


def time_shape(n, cin, cout, hw, k, dtype, side):
    """µs of the weight gradient, the norm gradient, both serial, and both beside each other."""
    def image(c):
        return torch.randn(n, c, hw, hw, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    x, dy, dz, y = image(cin), image(cout), image(cin), image(cin)
    w = torch.randn(cout, cin, k, k, device="cuda", dtype=dtype).to(memory_format=torch.channels_last)
    gamma, mean = torch.rand(cin, device="cuda") + 0.5, torch.randn(cin, device="cuda")
    inv_std = torch.rand(cin, device="cuda") + 0.5

    def weight_gradient():
        torch.ops.aten.convolution_backward(dy, x, w, None, [1, 1], [k // 2] * 2, [1, 1], False, [0, 0], 1,
                                            [False, True, False])

    def norm_gradient():
        g = torch.ops.aten.threshold_backward(dz, x, 0)
        torch.ops.aten.native_batch_norm_backward(g, y, gamma, None, None, mean, inv_std, True, 1e-5,
                                                  [True, True, True])

    def serial():
        weight_gradient()
        norm_gradient()

    def beside():
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        with torch.cuda.stream(side):
            weight_gradient()
        norm_gradient()
        main.wait_stream(side)

    for _ in range(3):
        serial()
    torch.cuda.synchronize()
    times = []
    for work in (weight_gradient, norm_gradient, serial, beside):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            work()
        times.append(replay_us(graph))
    return times


def probe(net, dtype, side):
    """Prints each shape's times and the network's totals."""
    n, shapes = CASES[net]
    total = [0.0] * 4
    for cin, cout, hw, k in shapes:
        times = time_shape(n, cin, cout, hw, k, dtype, side)
        total = [a + b for a, b in zip(total, times)]
        print(f"{net} {cin}->{cout} {hw}^2 {k}x{k}: weight gradient {times[0]:.1f}, norm gradient {times[1]:.1f}, "
              f"serial {times[2]:.1f}, beside {times[3]:.1f} us", flush=True)
    saved = total[2] - total[3]
    print(f"{net} all: weight gradients {total[0]:.0f}, norm gradients {total[1]:.0f}, serial {total[2]:.0f}, "
          f"beside {total[3]:.0f} us; saved {saved:.0f} us ({saved / total[2]:.1%})", flush=True)


def main():
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = True
    dtype = torch.bfloat16 if sys.argv[1] == "bf16" else torch.float32
    side = torch.cuda.Stream()
    for net in sys.argv[2:]:
        probe(net, dtype, side)


if __name__ == "__main__":
    main()
