#pragma once
// What a loss node compares its source with, per encode (MPSCNNLossLabels). The node itself
// is in src/ops/loss.h.
#include "nngraph/image.h"

namespace nngraph {

// Labels (same shape as the predictions) and per-image weights (N×1×1×1) for one encode.
struct LossLabels {
  Image labels;
  Image weights;  // one per image; empty: every image weighs 1
};

}  // namespace nngraph
