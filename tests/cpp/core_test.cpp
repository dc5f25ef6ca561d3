// dtypes, descriptors, padding rules, images and matrices.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "nngraph/data_source.h"
#include "nngraph/descriptors.h"
#include "nngraph/dtype.h"
#include "nngraph/error.h"
#include "nngraph/image.h"

using namespace nngraph;

TEST(DType, HalfKnownValues) {
  EXPECT_EQ(float_to_half(1.f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.f), 0xc000);
  EXPECT_EQ(float_to_half(65504.f), 0x7bff);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);                     // overflow → inf
  EXPECT_EQ(float_to_half(std::ldexp(1.f, -24)), 0x0001);     // smallest subnormal
  EXPECT_EQ(float_to_half(1.f + std::ldexp(1.f, -11)), 0x3c00);  // tie → even
  EXPECT_EQ(float_to_half(1.f + 3 * std::ldexp(1.f, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_FLOAT_EQ(half_to_float(0x3555), 0.333251953125f);
  EXPECT_FLOAT_EQ(half_to_float(0x0001), std::ldexp(1.f, -24));
}

// Every finite 16-bit value of both half types survives the trip through float.
TEST(DType, HalvesRoundTripEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto v = static_cast<uint16_t>(h);
    if (((v >> 10) & 0x1f) != 0x1f) ASSERT_EQ(float_to_half(half_to_float(v)), v) << h;
    if (((v >> 7) & 0xff) != 0xff) ASSERT_EQ(float_to_bfloat16(bfloat16_to_float(v)), v) << h;
  }
}

TEST(DType, BFloat16KnownValues) {
  EXPECT_EQ(float_to_bfloat16(1.f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16(-2.f), 0xc000);
  EXPECT_EQ(float_to_bfloat16(1.f + std::ldexp(1.f, -8)), 0x3f80);      // tie → even (down)
  EXPECT_EQ(float_to_bfloat16(1.f + 3 * std::ldexp(1.f, -8)), 0x3f82);  // tie → even (up)
  EXPECT_EQ(float_to_bfloat16(1.f + 5 * std::ldexp(1.f, -9)), 0x3f81);  // above the tie
  EXPECT_EQ(float_to_bfloat16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
  EXPECT_TRUE(std::isnan(bfloat16_to_float(float_to_bfloat16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_FLOAT_EQ(bfloat16_to_float(0x3eab), 0.333984375f);
  EXPECT_EQ(dtype_named("bfloat16", "t"), DType::BFloat16);
  EXPECT_THROW(dtype_named("float64", "t"), InvalidInput);
}

TEST(DType, ConvertsBetweenEveryPair) {
  const std::vector<float> v{0.1f, -3.5f, 1000.25f, 1e-3f};
  for (DType a : {DType::Float32, DType::Float16, DType::BFloat16})
    for (DType b : {DType::Float32, DType::Float16, DType::BFloat16}) {
      std::vector<unsigned char> x(v.size() * dtype_size(a)), y(v.size() * dtype_size(b));
      std::vector<float> back(v.size());
      convert_host(v.data(), DType::Float32, x.data(), a, v.size());
      convert_host(x.data(), a, y.data(), b, v.size());
      convert_host(y.data(), b, back.data(), DType::Float32, v.size());
      const bool bf16 = a == DType::BFloat16 || b == DType::BFloat16, exact = a == b && a == DType::Float32;
      const float tolerance = bf16 ? 1.f / 128 : exact ? 0.f : 1.f / 1024;
      for (size_t i = 0; i < v.size(); ++i)
        EXPECT_NEAR(back[i], v[i], std::fabs(v[i]) * tolerance) << dtype_name(a) << "→" << dtype_name(b);
    }
}

TEST(Descriptors, PaddingRules) {
  Axis a = resolve_axis(28, 5, 1, 1, PaddingMode::Same, 0, 0);
  EXPECT_EQ(a.out, 28);
  EXPECT_EQ(a.pad_before, 2);
  EXPECT_EQ(a.pad_after, 2);
  a = resolve_axis(7, 3, 2, 1, PaddingMode::Same, 0, 0);  // out = ceil(7/2)
  EXPECT_EQ(a.out, 4);
  EXPECT_EQ(a.pad_before + a.pad_after, 2);
  a = resolve_axis(6, 3, 2, 1, PaddingMode::Same, 0, 0);  // extra padding goes after
  EXPECT_EQ(a.out, 3);
  EXPECT_EQ(a.pad_before, 0);
  EXPECT_EQ(a.pad_after, 1);
  a = resolve_axis(10, 3, 1, 2, PaddingMode::Valid, 0, 0);  // span 5
  EXPECT_EQ(a.out, 6);
  a = resolve_axis(4, 3, 1, 1, PaddingMode::Full, 0, 0);
  EXPECT_EQ(a.out, 6);
  EXPECT_EQ(a.pad_before, 2);
  a = resolve_axis(5, 3, 2, 1, PaddingMode::Explicit, 1, 0);
  EXPECT_EQ(a.out, 2);
  EXPECT_LE(resolve_axis(2, 5, 1, 1, PaddingMode::Valid, 0, 0).out, 0);
}

TEST(Descriptors, NeuronValuesAndDefaults) {
  auto n = NeuronDescriptor::make(NeuronType::HardSigmoid);
  EXPECT_FLOAT_EQ(n.a, 0.2f);
  EXPECT_FLOAT_EQ(n.apply(1.f), 0.7f);
  EXPECT_FLOAT_EQ(n.apply(10.f), 1.f);
  EXPECT_FLOAT_EQ(NeuronDescriptor::make(NeuronType::LeakyReLU, 0.1f).apply(-2.f), -0.2f);
  EXPECT_FLOAT_EQ(NeuronDescriptor::make(NeuronType::TanH, 2.f, 0.5f).apply(1.f), 2.f * std::tanh(0.5f));
  EXPECT_FLOAT_EQ(NeuronDescriptor::make(NeuronType::ELU).apply(-1.f), std::expm1(-1.f));
  EXPECT_NEAR(NeuronDescriptor::make(NeuronType::SoftPlus).apply(100.f), 100.f, 1e-4);
  EXPECT_NEAR(NeuronDescriptor::make(NeuronType::SoftPlus).apply(0.f), std::log(2.f), 1e-6);
  EXPECT_FLOAT_EQ(NeuronDescriptor::make(NeuronType::Absolute).apply(-3.f), 3.f);
  EXPECT_EQ(NeuronDescriptor::parse("sigmoid"), NeuronType::Sigmoid);
  EXPECT_THROW(NeuronDescriptor::parse("swishy"), InvalidInput);
}

TEST(Descriptors, ConvolutionValidation) {
  ConvolutionDescriptor d;
  d.input_feature_channels = 6;
  d.output_feature_channels = 4;
  d.groups = 4;
  EXPECT_THROW(d.validate("c"), InvalidInput);
  d.groups = 2;
  d.kernel_height = d.kernel_width = 3;
  EXPECT_NO_THROW(d.validate("c"));
  EXPECT_EQ(d.weight_count(), 4u * 3 * 3 * 3);
  try {
    d.stride_x = 0;
    d.validate("conv7");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("[conv7]"), std::string::npos);
  }
}

TEST(Parameters, EachKindNamesItsTensors) {
  ConvolutionDescriptor c;
  c.kernel_height = 3;
  c.kernel_width = 2;
  c.input_feature_channels = 4;
  c.output_feature_channels = 6;
  c.groups = 2;
  const auto conv = tensor_specs(ParameterDescriptor(c));
  ASSERT_EQ(conv.size(), 2u);
  EXPECT_EQ(conv[0].shape, (std::vector<int64_t>{6, 2, 3, 2}));
  EXPECT_EQ(conv[0].count(), c.weight_count());
  EXPECT_TRUE(conv[1].optional);
  const auto norm = tensor_specs(ParameterDescriptor(NormalizationDescriptor{5}));
  ASSERT_EQ(norm.size(), 4u);
  EXPECT_EQ(norm[3].name, "variance");
  EXPECT_FALSE(norm[2].trained);
  EXPECT_EQ(norm[0].fill, 1.f);
  // (O, I, 1, 1) fits an O × I matrix and the reverse; (rows, rest) and flat arrays fit too.
  const TensorSpec m = tensor_specs(MatrixDescriptor{8, 5, false})[0];
  EXPECT_TRUE(shape_fits({8, 5, 1, 1}, m));
  EXPECT_TRUE(shape_fits({40}, m));
  EXPECT_FALSE(shape_fits({5, 8}, m));
  EXPECT_TRUE(shape_fits({6, 12}, conv[0]));
  EXPECT_FALSE(shape_fits({6, 3, 2, 2}, conv[0]));
}

TEST(Parameters, ArraySourceFillsAndChecksEachTensor) {
  ArrayDataSource bn(NormalizationDescriptor{3}, {{1.f, 2.f, 3.f}, {}, {}, {}}, "bn");
  const WeightsView variance = bn.tensor("variance");
  ASSERT_EQ(variance.count, 3u);
  EXPECT_EQ(static_cast<const float*>(variance.data)[2], 1.f);
  EXPECT_EQ(static_cast<const float*>(bn.tensor("gamma").data)[1], 2.f);
  EXPECT_THROW(bn.tensor("weights"), InvalidInput);
  EXPECT_THROW(bn.set_values({{1.f, 2.f, 3.f}, {0.f, 0.f, 0.f}, {0.f, 0.f, 0.f}, {1.f, NAN, 1.f}}), InvalidInput);
  EXPECT_EQ(static_cast<const float*>(bn.tensor("variance").data)[1], 1.f);  // unchanged
  try {
    descriptor_as<ConvolutionDescriptor>(bn, "conv1");
    FAIL();
  } catch (const InvalidInput& e) {
    EXPECT_STREQ(e.what(), "[conv1] data source 'bn' describes normalization parameters (3 channels), not convolution ones");
  }
  // Biases are optional: an empty vector leaves them out.
  ArrayDataSource gate(MatrixDescriptor{2, 3, false}, {{1, 2, 3, 4, 5, 6}, {}}, "gate");
  EXPECT_EQ(gate.tensor("biases").count, 0u);
  EXPECT_FALSE(gate.has(1));
  EXPECT_THROW(ArrayDataSource(MatrixDescriptor{2, 3, false}, {{1, 2, 3}, {}}, "short"), InvalidInput);
}

// He values: a block's worth (16384) come from the seed's own stream, as one stream always drew
// them; past it, each block from its own.
TEST(Parameters, InitialWeightsFirstBlockIsTheSeedsStream) {
  ConvolutionDescriptor d;
  d.kernel_height = d.kernel_width = 3;
  d.input_feature_channels = 64;
  d.output_feature_channels = 64;  // 36864 values: two blocks and part of a third
  const std::vector<float> w = ArrayDataSource::initial_weights(d, Initializer::He, 3);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, std::sqrt(2.0 / (64 * 9)));
  std::vector<float> one(w.size());
  for (auto& v : one) v = static_cast<float>(normal(rng));
  ASSERT_EQ(w.size(), 36864u);
  EXPECT_TRUE(std::equal(w.begin(), w.begin() + 16384, one.begin()));
  EXPECT_FALSE(std::equal(w.begin() + 16384, w.begin() + 32768, one.begin() + 16384));
  EXPECT_FALSE(std::equal(w.begin() + 16384, w.begin() + 32768, w.begin()));
}

TEST(Image, AllocateCopyConvert) {
  Image img = Image::allocate({2, {3, 4, 5}, DType::Float32}, Device());
  std::vector<float> v(img.descriptor().count());
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i) - 7.f;
  img.copy_from_host(v.data());
  Image half = img.converted(DType::Float16);
  EXPECT_EQ(half.dtype(), DType::Float16);
  EXPECT_EQ(half.descriptor().bytes(), v.size() * 2);
  std::vector<float> back(v.size());
  half.converted(DType::Float32).copy_to_host(back.data());
  EXPECT_EQ(back, v);  // quarter steps in [-7, 23] are exact in float16
}

TEST(Image, ViewMustFitBuffer) {
  auto buf = Buffer::allocate(100, Device());
  EXPECT_THROW(Image({1, {5, 5, 1}, DType::Float32}, buf, 4), InvalidInput);
  EXPECT_NO_THROW(Image({1, {5, 5, 1}, DType::Float32}, buf, 0));
}

TEST(Matrix, StridedRows) {
  auto buf = Buffer::allocate(3 * 8 * sizeof(float), Device());
  Matrix m(3, 5, 8, DType::Float32, buf);
  std::vector<float> v(15), back(15);
  for (int i = 0; i < 15; ++i) v[i] = static_cast<float>(i);
  m.copy_from_host(v.data());
  EXPECT_EQ(static_cast<float*>(buf->data())[8], 5.f);  // row 1 starts at the stride
  m.copy_to_host(back.data());
  EXPECT_EQ(back, v);
  EXPECT_THROW(Matrix(3, 9, 8, DType::Float32, buf), InvalidInput);
}

TEST(DeviceTest, Parse) {
  EXPECT_EQ(Device::parse("cuda:1").index(), 1);
  EXPECT_EQ(Device::parse("cuda").str(), "cuda:0");
  EXPECT_THROW(Device::parse("tpu"), InvalidInput);
  EXPECT_THROW(Device::parse("cuda:x"), InvalidInput);
}
