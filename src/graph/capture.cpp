#include "graph/capture.h"

#include <algorithm>

namespace nngraph {

Replay& CaptureCache::replay_for(const Plan& plan, int n, const void* arena, const Parameters& wm, bool tf32,
                                 const std::vector<Image>& sources, size_t losses) {
  Sources held;
  for (const auto& img : sources) held.emplace_back(img.batch(), img.dtype());
  auto key = std::make_tuple(&plan, n, arena, &wm, tf32, std::move(held));
  auto found = replays_.find(key);
  if (found != replays_.end()) return found->second;
  // Made whole before it is kept: a failed allocation leaves no replay without its buffers.
  Replay r;
  for (const auto& img : sources) r.sources.push_back(Image::allocate(img.descriptor(), device_));
  r.holds_unit.assign(sources.size(), false);
  for (size_t i = 0; i < losses; ++i) r.losses.push_back(Image::allocate({n, {1, 1, 1}, DType::Float32}, device_));
  if (replays_.size() > 16) replays_.clear();  // stale arenas or weights: start over
  return replays_.emplace(key, std::move(r)).first->second;
}

const Image& CaptureCache::ones(int n) {
  if (!unit_weights_.count(n) && unit_weights_.size() >= 4) unit_weights_.clear();
  Image& w = unit_weights_[n];
  if (w.empty())
    w = Image::from_host({n, {1, 1, 1}, DType::Float32}, device_,
                         [n](void* p) { std::fill_n(static_cast<float*>(p), n, 1.f); });
  return w;
}

const Image* CaptureCache::made_ones(int n) const {
  const auto unit = unit_weights_.find(n);
  return unit == unit_weights_.end() ? nullptr : &unit->second;
}

}  // namespace nngraph
