#include "ops/patch_moments.h"

#include "nngraph/statistics.h"
#include "ops/cast.h"

namespace nngraph {

std::vector<double> patch_moments(const Image& images, int kh, int kw, int count) {
  const char* what = "[patch_moments]";
  if (images.empty() || images.batch() < 1) fail(what, " no images");
  const ImageShape& s = images.shape();
  if (count < 0) count = images.batch();
  if (count < 1 || count > images.batch())
    fail(what, " count must be 1 to ", images.batch(), " (the images held), got ", count);
  if (kh < 1 || kw < 1 || kh > s.h || kw > s.w)
    fail(what, " a ", kh, "×", kw, " patch does not fit ", s.h, "×", s.w, " images");
  if (s.c * kh * kw > kMaxPatchValues)
    fail(what, " patches of ", s.c, "×", kh, "×", kw, " values are more than ", kMaxPatchValues);
  Backend& b = backend_for(images.device());
  const Tensor first(images.data(), count, s, images.dtype());
  if (images.dtype() == DType::Float32) return dispatch<PatchMomentsKernel>(b, first, kh, kw);
  const Image wide = Image::allocate({count, s, DType::Float32}, images.device());
  dispatch<CastKernel>(b, first, wide);
  return dispatch<PatchMomentsKernel>(b, Tensor(wide), kh, kw);
}

}  // namespace nngraph
