// cpu_window_ops.h against window_ops.h's per-element functions (what the CUDA kernels run):
// equal bit for bit for every window shape below, with ties in the max poolings' windows.
#include "worker/compute/cpu_window_ops.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "worker/compute/window_ops.h"

namespace ps {
namespace {

using window_ops::ImageSize;
using window_ops::PooledSize;

Window2D MakeWindow(int height, int width, int channels, int kernel_h, int kernel_w, int stride,
                    int padding) {
  Window2D w;
  w.height = height;
  w.width = width;
  w.channels = channels;
  w.kernel_h = kernel_h;
  w.kernel_w = kernel_w;
  w.stride = stride;
  w.padding = padding;
  return w;
}

std::string Describe(const Window2D& w) {
  return std::to_string(w.height) + "x" + std::to_string(w.width) + "x" +
         std::to_string(w.channels) + " kernel " + std::to_string(w.kernel_h) + "x" +
         std::to_string(w.kernel_w) + " stride " + std::to_string(w.stride) + " padding " +
         std::to_string(w.padding);
}

// Values from a few levels only, so max-pooling windows hold ties.
std::vector<float> Random(size_t count, std::mt19937* random, bool coarse) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::uniform_int_distribution<int> level(-2, 2);
  std::vector<float> values(count);
  for (float& v : values) v = coarse ? 0.5f * level(*random) : uniform(*random);
  return values;
}

void ExpectBitwiseEqual(const std::vector<float>& expected, const std::vector<float>& actual,
                        const std::string& what) {
  ASSERT_EQ(expected.size(), actual.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(0, std::memcmp(&expected[i], &actual[i], sizeof(float)))
        << what << " element " << i << ": " << expected[i] << " against " << actual[i];
  }
}

constexpr int kBatch = 3;

TEST(CpuWindowOpsTest, ConvolutionMatchesTheElementFunctions) {
  std::mt19937 random(7);
  for (const Window2D& w :
       {MakeWindow(6, 5, 2, 3, 3, 1, 1), MakeWindow(7, 7, 3, 3, 2, 2, 1),
        MakeWindow(8, 8, 1, 5, 5, 1, 2), MakeWindow(5, 6, 4, 1, 1, 1, 0),
        MakeWindow(4, 4, 2, 4, 4, 1, 3), MakeWindow(9, 7, 2, 3, 3, 3, 0),
        // Padding past the kernel: some windows lie wholly in the padding.
        MakeWindow(3, 3, 1, 2, 2, 1, 3), MakeWindow(4, 5, 2, 3, 2, 2, 4)}) {
    const size_t rows = static_cast<size_t>(kBatch) * w.out_height() * w.out_width();
    const size_t columns = rows * w.patch();
    const std::vector<float> images = Random(ImageSize(w, kBatch), &random, false);
    std::vector<float> expected(columns), actual(columns, -7.0f);
    for (size_t i = 0; i < columns; ++i) expected[i] = window_ops::Im2ColAt(w, images.data(), i);
    cpu_window_ops::Im2Col(w, kBatch, images.data(), actual.data());
    ExpectBitwiseEqual(expected, actual, "Im2Col " + Describe(w));

    const std::vector<float> gradient = Random(columns, &random, false);
    std::vector<float> expected_images(ImageSize(w, kBatch)), images_out(ImageSize(w, kBatch), 9);
    for (size_t i = 0; i < expected_images.size(); ++i) {
      expected_images[i] = window_ops::Col2ImAt(w, gradient.data(), i);
    }
    cpu_window_ops::Col2Im(w, kBatch, gradient.data(), images_out.data());
    ExpectBitwiseEqual(expected_images, images_out, "Col2Im " + Describe(w));
  }
}

TEST(CpuWindowOpsTest, PoolingMatchesTheElementFunctions) {
  std::mt19937 random(11);
  for (const Window2D& w :
       {MakeWindow(6, 6, 3, 2, 2, 2, 0), MakeWindow(7, 5, 2, 3, 3, 2, 0),
        MakeWindow(5, 5, 1, 3, 3, 1, 0), MakeWindow(8, 6, 4, 2, 3, 1, 0),
        // Stride past the kernel: pixels no window covers.
        MakeWindow(7, 7, 2, 2, 2, 3, 0)}) {
    for (const bool coarse : {false, true}) {
      const std::string what = Describe(w) + (coarse ? " with ties" : "");
      const std::vector<float> x = Random(ImageSize(w, kBatch), &random, coarse);
      const size_t pooled = PooledSize(w, kBatch);
      std::vector<float> max_expected(pooled), max_actual(pooled, 5.0f);
      std::vector<float> avg_expected(pooled), avg_actual(pooled, 5.0f);
      for (size_t i = 0; i < pooled; ++i) {
        max_expected[i] = window_ops::MaxPoolAt(w, x.data(), i);
        avg_expected[i] = window_ops::AvgPoolAt(w, x.data(), i);
      }
      cpu_window_ops::MaxPoolForward(w, kBatch, x.data(), max_actual.data());
      cpu_window_ops::AvgPoolForward(w, kBatch, x.data(), avg_actual.data());
      ExpectBitwiseEqual(max_expected, max_actual, "MaxPoolForward " + what);
      ExpectBitwiseEqual(avg_expected, avg_actual, "AvgPoolForward " + what);

      const std::vector<float> dy = Random(pooled, &random, false);
      std::vector<float> max_dx_expected(x.size()), max_dx(x.size(), 3.0f);
      std::vector<float> avg_dx_expected(x.size()), avg_dx(x.size(), 3.0f);
      for (size_t i = 0; i < x.size(); ++i) {
        max_dx_expected[i] = window_ops::PoolGradientAt(w, /*max=*/true, x.data(),
                                                        max_expected.data(), dy.data(), i);
        avg_dx_expected[i] =
            window_ops::PoolGradientAt(w, /*max=*/false, nullptr, nullptr, dy.data(), i);
      }
      cpu_window_ops::MaxPoolBackward(w, kBatch, x.data(), max_expected.data(), dy.data(),
                                      max_dx.data());
      cpu_window_ops::AvgPoolBackward(w, kBatch, dy.data(), avg_dx.data());
      ExpectBitwiseEqual(max_dx_expected, max_dx, "MaxPoolBackward " + what);
      ExpectBitwiseEqual(avg_dx_expected, avg_dx, "AvgPoolBackward " + what);
    }
  }
}

}  // namespace
}  // namespace ps
