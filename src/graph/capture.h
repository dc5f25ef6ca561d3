#pragma once
// The step-capture cache: a step recorded once per plan, batch, arena, parameters, tf32
// setting and sources (each one's batch and dtype), then replayed (backends that capture),
// with fixed buffers for its sources and losses; and the unit label weights most steps share.
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "graph/parameters.h"
#include "graph/plan.h"
#include "nngraph/image.h"

namespace nngraph {

struct Replay {
  std::vector<Image> sources, losses;
  std::vector<bool> holds_unit;  // per source: filled from the unit weights, which never change
  std::shared_ptr<void> captured;
  int eager_runs = 0;
  bool failed = false;
};

class CaptureCache {
 public:
  explicit CaptureCache(Device device) : device_(device) {}
  // The replay of a step with these sources and `losses` loss nodes, made (uncaptured) on first use.
  Replay& replay_for(const Plan& plan, int n, const void* arena, const Parameters& wm, bool tf32,
                     const std::vector<Image>& sources, size_t losses);
  // Every replay points at an arena that is about to go.
  void clear() { replays_.clear(); }
  // Label weights of 1 for a batch of n, made once. Kept for the last few batch sizes (a
  // replay that holds them copied them; it needs them no more).
  const Image& ones(int n);
  // ones(n) where it was made, else null.
  const Image* made_ones(int n) const;

 private:
  Device device_;
  using Sources = std::vector<std::pair<int, DType>>;  // batch and dtype of each
  std::map<std::tuple<const Plan*, int, const void*, const Parameters*, bool, Sources>, Replay> replays_;
  std::map<int, Image> unit_weights_;
};

}  // namespace nngraph
