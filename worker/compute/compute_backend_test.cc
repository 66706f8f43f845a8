// Backend conformance: every operation of every available backend against a straightforward
// double-precision reference, on random inputs of odd shapes, plus crafted cases whose answers
// are exact.
#include "worker/compute/compute_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/compute/available_backends.h"
#include "worker/compute/dropout_ops.h"

namespace ps {
namespace {

constexpr int kSizes[] = {1, 3, 17, 33, 129};
constexpr double kRelativeTolerance = 1e-5;

// |actual - expected| within kRelativeTolerance of the larger of |expected| and `magnitude`,
// the scale of the terms that produced it (the absolute floor for results that cancel).
::testing::AssertionResult Near(double actual, double expected, double magnitude) {
  const double tolerance = kRelativeTolerance * std::max(std::abs(expected), magnitude);
  if (std::abs(actual - expected) <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " vs expected " << expected
                                       << " (tolerance " << tolerance << ")";
}

class ComputeBackendTest : public ::testing::TestWithParam<BackendFactory> {
 protected:
  void SetUp() override {
    if (!GetParam().unavailable.empty()) GTEST_SKIP() << GetParam().unavailable;
    absl::StatusOr<std::unique_ptr<ComputeBackend>> backend = GetParam().create();
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    ASSERT_NE(backend_, nullptr);
  }

  std::vector<float> Random(size_t count, float low, float high) {
    std::uniform_real_distribution<float> distribution(low, high);
    std::vector<float> values(count);
    for (float& value : values) value = distribution(random_);
    return values;
  }

  std::vector<float> RandomClasses(int rows, int classes) {
    std::uniform_int_distribution<int> distribution(0, classes - 1);
    std::vector<float> labels(rows);
    for (float& label : labels) label = static_cast<float>(distribution(random_));
    return labels;
  }

  DeviceArray Upload(const std::vector<float>& host) {
    DeviceArray array(backend_.get(), host.size());
    backend_->CopyToDevice(host.data(), host.size(), array.data());
    return array;
  }

  std::vector<float> Download(const DeviceArray& array) {
    std::vector<float> host(array.size());
    backend_->CopyToHost(array.data(), array.size(), host.data());
    return host;
  }

  std::unique_ptr<ComputeBackend> backend_;
  std::mt19937 random_{20240601};
};

TEST_P(ComputeBackendTest, CopyRoundTrip) {
  EXPECT_EQ(backend_->Allocate(0), nullptr);
  for (size_t count : {size_t{1}, size_t{3}, size_t{17}, size_t{129}, size_t{100003}}) {
    const std::vector<float> host = Random(count, -1e6f, 1e6f);
    EXPECT_EQ(Download(Upload(host)), host) << count;
  }
}

TEST_P(ComputeBackendTest, Fill) {
  for (int count : kSizes) {
    DeviceArray array(backend_.get(), count);
    backend_->Fill(count, -2.5f, array.data());
    EXPECT_EQ(Download(array), std::vector<float>(count, -2.5f)) << count;
  }
}

TEST_P(ComputeBackendTest, GemmMatchesReferenceForEveryShapeAndTranspose) {
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      for (int m : kSizes) {
        for (int n : kSizes) {
          for (int k : kSizes) {
            SCOPED_TRACE(::testing::Message() << "transpose_a=" << transpose_a
                                              << " transpose_b=" << transpose_b << " m=" << m
                                              << " n=" << n << " k=" << k);
            const float alpha = 0.75f;
            const float beta = 0.5f;
            const std::vector<float> a = Random(static_cast<size_t>(m) * k, -1, 1);
            const std::vector<float> b = Random(static_cast<size_t>(k) * n, -1, 1);
            const std::vector<float> c = Random(static_cast<size_t>(m) * n, -1, 1);
            DeviceArray a_device = Upload(a);
            DeviceArray b_device = Upload(b);
            DeviceArray c_device = Upload(c);
            backend_->Gemm(transpose_a, transpose_b, m, n, k, alpha, a_device.data(),
                           b_device.data(), beta, c_device.data());
            const std::vector<float> actual = Download(c_device);

            for (int i = 0; i < m; ++i) {
              for (int j = 0; j < n; ++j) {
                double sum = 0;
                double magnitude = 0;
                for (int p = 0; p < k; ++p) {
                  const double a_ip = transpose_a ? a[p * m + i] : a[i * k + p];
                  const double b_pj = transpose_b ? b[j * k + p] : b[p * n + j];
                  sum += a_ip * b_pj;
                  magnitude += std::abs(a_ip * b_pj);
                }
                const double expected = alpha * sum + beta * double{c[i * n + j]};
                magnitude = alpha * magnitude + beta * std::abs(double{c[i * n + j]});
                ASSERT_TRUE(Near(actual[i * n + j], expected, magnitude)) << i << "," << j;
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(ComputeBackendTest, GemmWithZeroBetaIgnoresTheOldOutput) {
  const int m = 17, n = 3, k = 33;
  DeviceArray a = Upload(std::vector<float>(m * k, 1.0f));
  DeviceArray b = Upload(std::vector<float>(k * n, 2.0f));
  DeviceArray c = Upload(std::vector<float>(m * n, std::numeric_limits<float>::quiet_NaN()));
  backend_->Gemm(false, false, m, n, k, 1.0f, a.data(), b.data(), 0.0f, c.data());
  EXPECT_EQ(Download(c), std::vector<float>(m * n, 2.0f * k));
}

TEST_P(ComputeBackendTest, AddBiasAndColumnSums) {
  for (int rows : kSizes) {
    for (int cols : kSizes) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " cols=" << cols);
      const std::vector<float> x = Random(static_cast<size_t>(rows) * cols, -1, 1);
      const std::vector<float> bias = Random(cols, -1, 1);
      DeviceArray x_device = Upload(x);
      DeviceArray bias_device = Upload(bias);
      DeviceArray sums_device(backend_.get(), cols);

      backend_->ColumnSums(rows, cols, x_device.data(), sums_device.data());
      const std::vector<float> sums = Download(sums_device);
      for (int c = 0; c < cols; ++c) {
        double expected = 0;
        double magnitude = 0;
        for (int r = 0; r < rows; ++r) {
          expected += x[r * cols + c];
          magnitude += std::abs(x[r * cols + c]);
        }
        ASSERT_TRUE(Near(sums[c], expected, magnitude)) << c;
      }

      backend_->AddBias(rows, cols, bias_device.data(), x_device.data());
      const std::vector<float> biased = Download(x_device);
      for (int r = 0; r < rows; ++r) {
        for (int c = 0; c < cols; ++c) {
          const double expected = double{x[r * cols + c]} + bias[c];
          ASSERT_TRUE(Near(biased[r * cols + c], expected,
                           std::abs(x[r * cols + c]) + std::abs(bias[c])))
              << r << "," << c;
        }
      }
    }
  }
}

double ReferenceActivation(Activation f, double x) {
  switch (f) {
    case Activation::kRelu:
      return x > 0 ? x : 0;
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kSigmoid:
      return 1 / (1 + std::exp(-x));
  }
  return 0;
}

double ReferenceActivationDerivative(Activation f, double y) {
  switch (f) {
    case Activation::kRelu:
      return y > 0 ? 1 : 0;
    case Activation::kTanh:
      return 1 - y * y;
    case Activation::kSigmoid:
      return y * (1 - y);
  }
  return 0;
}

TEST_P(ComputeBackendTest, ActivationForwardOutOfPlaceAndInPlace) {
  for (Activation f : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid}) {
    for (int count : kSizes) {
      SCOPED_TRACE(::testing::Message() << "activation=" << static_cast<int>(f)
                                        << " count=" << count);
      const std::vector<float> x = Random(count, -6, 6);
      DeviceArray x_device = Upload(x);
      DeviceArray y_device(backend_.get(), count);
      backend_->ActivationForward(f, count, x_device.data(), y_device.data());
      const std::vector<float> y = Download(y_device);
      EXPECT_EQ(Download(x_device), x) << "the input changed";
      for (int i = 0; i < count; ++i) {
        ASSERT_TRUE(Near(y[i], ReferenceActivation(f, x[i]), 1e-6)) << x[i];
      }

      backend_->ActivationForward(f, count, x_device.data(), x_device.data());
      EXPECT_EQ(Download(x_device), y) << "in place differs from out of place";
    }
  }
}

TEST_P(ComputeBackendTest, ActivationBackwardOutOfPlaceAndInPlace) {
  for (Activation f : {Activation::kRelu, Activation::kTanh, Activation::kSigmoid}) {
    for (int count : kSizes) {
      SCOPED_TRACE(::testing::Message() << "activation=" << static_cast<int>(f)
                                        << " count=" << count);
      // Outputs of f: relu's include zeros and positives, tanh's lie in (-1, 1), sigmoid's in
      // (0, 1).
      std::vector<float> y = Random(count, f == Activation::kSigmoid ? 0 : -1, 1);
      if (f == Activation::kRelu) {
        for (float& value : y) value = std::max(value, 0.0f);
      }
      const std::vector<float> dy = Random(count, -2, 2);
      DeviceArray y_device = Upload(y);
      DeviceArray dy_device = Upload(dy);
      DeviceArray dx_device(backend_.get(), count);
      backend_->ActivationBackward(f, count, y_device.data(), dy_device.data(),
                                   dx_device.data());
      const std::vector<float> dx = Download(dx_device);
      for (int i = 0; i < count; ++i) {
        const double expected = dy[i] * ReferenceActivationDerivative(f, y[i]);
        ASSERT_TRUE(Near(dx[i], expected, std::abs(dy[i]))) << "y=" << y[i] << " dy=" << dy[i];
      }

      backend_->ActivationBackward(f, count, y_device.data(), dy_device.data(),
                                   dy_device.data());
      EXPECT_EQ(Download(dy_device), dx) << "in place differs from out of place";
    }
  }
}

TEST_P(ComputeBackendTest, Axpy) {
  for (int count : kSizes) {
    const std::vector<float> x = Random(count, -1, 1);
    const std::vector<float> y = Random(count, -1, 1);
    DeviceArray x_device = Upload(x);
    DeviceArray y_device = Upload(y);
    backend_->Axpy(count, -0.3f, x_device.data(), y_device.data());
    const std::vector<float> actual = Download(y_device);
    for (int i = 0; i < count; ++i) {
      const double expected = double{y[i]} + double{-0.3f} * x[i];
      ASSERT_TRUE(Near(actual[i], expected, std::abs(y[i]) + std::abs(0.3 * x[i]))) << i;
    }
  }
}

TEST_P(ComputeBackendTest, MultiplyOutOfPlaceAndInPlace) {
  for (int count : kSizes) {
    const std::vector<float> x = Random(count, -1, 1);
    const std::vector<float> y = Random(count, -1, 1);
    DeviceArray x_device = Upload(x);
    DeviceArray y_device = Upload(y);
    DeviceArray z_device(backend_.get(), count);
    backend_->Multiply(count, x_device.data(), y_device.data(), z_device.data());
    std::vector<float> expected(count);
    for (int i = 0; i < count; ++i) expected[i] = x[i] * y[i];
    EXPECT_EQ(Download(z_device), expected) << count;
    backend_->Multiply(count, x_device.data(), y_device.data(), y_device.data());
    EXPECT_EQ(Download(y_device), expected) << count << " in place";
  }
}

// Every backend draws dropout_ops.h's mask: the same elements kept, about 1 - rate of them.
TEST_P(ComputeBackendTest, DropoutMaskIsTheSharedMaskAndDropsAboutTheRate) {
  constexpr int kCount = 100000;
  for (const float rate : {0.0f, 0.25f, 0.5f, 0.9f}) {
    for (const uint64_t seed : {uint64_t{1}, uint64_t{0xfeedface}}) {
      DeviceArray mask(backend_.get(), kCount);
      backend_->DropoutMask(kCount, seed, rate, mask.data());
      const std::vector<float> actual = Download(mask);
      int dropped = 0;
      for (int i = 0; i < kCount; ++i) {
        ASSERT_EQ(actual[i], dropout_ops::MaskAt(seed, rate, i)) << i;
        ASSERT_TRUE(actual[i] == 0.0f || actual[i] == 1.0f / (1.0f - rate)) << actual[i];
        dropped += actual[i] == 0.0f;
      }
      // A binomial's standard deviation here is at most 158; 5 of them.
      EXPECT_NEAR(dropped, rate * kCount, 800) << "rate " << rate << " seed " << seed;
    }
  }
  // Another seed, another mask.
  DeviceArray a(backend_.get(), kCount), b(backend_.get(), kCount);
  backend_->DropoutMask(kCount, 1, 0.5f, a.data());
  backend_->DropoutMask(kCount, 2, 0.5f, b.data());
  EXPECT_NE(Download(a), Download(b));
}

// Window shapes for the convolution and pooling tests: odd sizes, strides, padding, channels.
std::vector<Window2D> Windows(bool pooling) {
  std::vector<Window2D> windows;
  for (const auto& [h, w, c, kh, kw, stride, padding] :
       std::vector<std::array<int, 7>>{{5, 5, 1, 3, 3, 1, 1}, {7, 6, 3, 3, 2, 2, 1},
                                       {8, 8, 2, 2, 2, 2, 0}, {6, 9, 4, 3, 3, 2, 2},
                                       {4, 4, 5, 1, 1, 1, 0}, {9, 7, 2, 3, 3, 3, 0}}) {
    if (pooling && padding > 0) continue;
    windows.push_back(Window2D{h, w, c, kh, kw, stride, padding});
  }
  return windows;
}

// The input index of image n's (ih, iw, c), or -1 in the padding.
int64_t Pixel(const Window2D& w, int n, int ih, int iw, int c) {
  if (ih < 0 || ih >= w.height || iw < 0 || iw >= w.width) return -1;
  return ((static_cast<int64_t>(n) * w.height + ih) * w.width + iw) * w.channels + c;
}

// A convolution is Im2Col and one Gemm: against the direct sum in double precision, for F
// filters of the window's size; and Col2Im is Im2Col's adjoint, against the direct scatter.
TEST_P(ComputeBackendTest, ConvolutionAsIm2ColAndGemmAndItsAdjoint) {
  constexpr int kBatch = 3, kFilters = 4;
  for (const Window2D& w : Windows(/*pooling=*/false)) {
    const int rows = kBatch * w.out_height() * w.out_width();
    const std::vector<float> images = Random(kBatch * w.height * w.width * w.channels, -1, 1);
    const std::vector<float> kernels = Random(kFilters * w.patch(), -1, 1);
    DeviceArray images_device = Upload(images), kernels_device = Upload(kernels);
    DeviceArray columns(backend_.get(), static_cast<size_t>(rows) * w.patch());
    DeviceArray output(backend_.get(), static_cast<size_t>(rows) * kFilters);
    backend_->Im2Col(w, kBatch, images_device.data(), columns.data());
    backend_->Gemm(false, true, rows, kFilters, w.patch(), 1.0f, columns.data(),
                   kernels_device.data(), 0.0f, output.data());
    const std::vector<float> actual = Download(output);
    // The columns' gradient scattered back (Col2Im) against the direct scatter.
    const std::vector<float> column_gradient = Random(static_cast<size_t>(rows) * w.patch(), -1, 1);
    DeviceArray column_gradient_device = Upload(column_gradient);
    DeviceArray image_gradient(backend_.get(), images.size());
    backend_->Col2Im(w, kBatch, column_gradient_device.data(), image_gradient.data());
    const std::vector<float> scattered = Download(image_gradient);
    std::vector<double> expected_scatter(images.size(), 0.0), magnitude(images.size(), 0.0);
    for (int n = 0; n < kBatch; ++n) {
      for (int oh = 0; oh < w.out_height(); ++oh) {
        for (int ow = 0; ow < w.out_width(); ++ow) {
          const int row = (n * w.out_height() + oh) * w.out_width() + ow;
          for (int f = 0; f < kFilters; ++f) {
            double sum = 0, size = 0;
            for (int kh = 0; kh < w.kernel_h; ++kh) {
              for (int kw = 0; kw < w.kernel_w; ++kw) {
                for (int c = 0; c < w.channels; ++c) {
                  const int64_t at = Pixel(w, n, oh * w.stride - w.padding + kh,
                                           ow * w.stride - w.padding + kw, c);
                  const double k = kernels[f * w.patch() + (kh * w.kernel_w + kw) * w.channels + c];
                  if (at >= 0) sum += k * images[at];
                  if (at >= 0) size += std::abs(k * images[at]);
                  if (f == 0 && at >= 0) {
                    const double g = column_gradient[static_cast<size_t>(row) * w.patch() +
                                                     (kh * w.kernel_w + kw) * w.channels + c];
                    expected_scatter[at] += g;
                    magnitude[at] += std::abs(g);
                  }
                }
              }
            }
            ASSERT_TRUE(Near(actual[row * kFilters + f], sum, size))
                << "window " << w.height << "x" << w.width << "x" << w.channels << " row " << row;
          }
        }
      }
    }
    for (size_t i = 0; i < images.size(); ++i) {
      ASSERT_TRUE(Near(scattered[i], expected_scatter[i], magnitude[i])) << i;
    }
  }
}

// Max and average pooling, forward and backward, against direct loops in double precision;
// the max's gradient goes to the first maximum of its window (ties are made on purpose).
TEST_P(ComputeBackendTest, PoolingForwardAndBackward) {
  constexpr int kBatch = 2;
  for (const Window2D& w : Windows(/*pooling=*/true)) {
    std::vector<float> x = Random(kBatch * w.height * w.width * w.channels, -1, 1);
    for (size_t i = 0; i < x.size(); i += 7) x[i] = 0.5f;  // Ties within windows.
    const size_t pooled = static_cast<size_t>(kBatch) * w.out_height() * w.out_width() * w.channels;
    const std::vector<float> dy = Random(pooled, -1, 1);
    DeviceArray x_device = Upload(x), dy_device = Upload(dy);
    DeviceArray max_y(backend_.get(), pooled), avg_y(backend_.get(), pooled);
    DeviceArray max_dx(backend_.get(), x.size()), avg_dx(backend_.get(), x.size());
    backend_->MaxPoolForward(w, kBatch, x_device.data(), max_y.data());
    backend_->AvgPoolForward(w, kBatch, x_device.data(), avg_y.data());
    backend_->MaxPoolBackward(w, kBatch, x_device.data(), max_y.data(), dy_device.data(),
                              max_dx.data());
    backend_->AvgPoolBackward(w, kBatch, dy_device.data(), avg_dx.data());
    const std::vector<float> maxes = Download(max_y), means = Download(avg_y);
    const std::vector<float> max_grad = Download(max_dx), avg_grad = Download(avg_dx);
    std::vector<double> expected_max_grad(x.size(), 0.0), expected_avg_grad(x.size(), 0.0);
    const double share = 1.0 / (w.kernel_h * w.kernel_w);
    for (int n = 0; n < kBatch; ++n) {
      for (int oh = 0; oh < w.out_height(); ++oh) {
        for (int ow = 0; ow < w.out_width(); ++ow) {
          for (int c = 0; c < w.channels; ++c) {
            const size_t out = ((static_cast<size_t>(n) * w.out_height() + oh) * w.out_width() +
                                ow) * w.channels + c;
            int64_t first_max = -1;
            double sum = 0;
            for (int kh = 0; kh < w.kernel_h; ++kh) {
              for (int kw = 0; kw < w.kernel_w; ++kw) {
                const int64_t at = Pixel(w, n, oh * w.stride + kh, ow * w.stride + kw, c);
                sum += x[at];
                if (first_max < 0 || x[at] > x[first_max]) first_max = at;
                expected_avg_grad[at] += dy[out] * share;
              }
            }
            ASSERT_EQ(maxes[out], x[first_max]) << out;
            ASSERT_TRUE(Near(means[out], sum * share, share * w.kernel_h * w.kernel_w)) << out;
            expected_max_grad[first_max] += dy[out];
          }
        }
      }
    }
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(Near(max_grad[i], expected_max_grad[i], 1.0)) << i;
      ASSERT_TRUE(Near(avg_grad[i], expected_avg_grad[i], 1.0)) << i;
    }
  }
}

TEST_P(ComputeBackendTest, SynchronizeWaitsForQueuedWork) {
  for (int count : kSizes) {
    DeviceArray x_device(backend_.get(), count);
    DeviceArray y_device(backend_.get(), count);
    backend_->Fill(count, 2.0f, x_device.data());
    backend_->Fill(count, 1.0f, y_device.data());
    backend_->Axpy(count, 0.5f, x_device.data(), y_device.data());
    backend_->Synchronize();
    EXPECT_EQ(Download(y_device), std::vector<float>(count, 2.0f)) << count;
  }
}

TEST_P(ComputeBackendTest, SoftmaxCrossEntropyMatchesReference) {
  const float scale = 0.125f;
  for (int rows : kSizes) {
    for (int classes : kSizes) {
      SCOPED_TRACE(::testing::Message() << "rows=" << rows << " classes=" << classes);
      const std::vector<float> logits = Random(static_cast<size_t>(rows) * classes, -5, 5);
      const std::vector<float> labels = RandomClasses(rows, classes);
      DeviceArray logits_device = Upload(logits);
      DeviceArray labels_device = Upload(labels);
      DeviceArray dlogits_device(backend_.get(), logits.size());
      const LossSums sums =
          backend_->SoftmaxCrossEntropy(rows, classes, logits_device.data(),
                                        labels_device.data(), scale, dlogits_device.data());
      const std::vector<float> dlogits = Download(dlogits_device);

      double expected_loss = 0;
      int64_t expected_correct = 0;
      for (int r = 0; r < rows; ++r) {
        const float* row = &logits[static_cast<size_t>(r) * classes];
        const int label = static_cast<int>(labels[r]);
        const int argmax = static_cast<int>(std::max_element(row, row + classes) - row);
        double sum = 0;
        for (int c = 0; c < classes; ++c) sum += std::exp(double{row[c]} - row[argmax]);
        expected_loss += std::log(sum) + row[argmax] - row[label];
        if (argmax == label) ++expected_correct;
        for (int c = 0; c < classes; ++c) {
          const double probability = std::exp(double{row[c]} - row[argmax]) / sum;
          const double expected = (probability - (c == label ? 1 : 0)) * scale;
          ASSERT_TRUE(Near(dlogits[r * classes + c], expected, scale))
              << r << "," << c;
        }
      }
      EXPECT_TRUE(Near(sums.loss, expected_loss, 1e-6 * rows));
      EXPECT_EQ(sums.correct, expected_correct);
    }
  }
}

TEST_P(ComputeBackendTest, SoftmaxCrossEntropyExactOnCraftedRows) {
  // Each softmax is exactly one-hot in float (exp(-1000) is 0), except row 3's exact halves,
  // so the losses and gradients are exact. Row 3 ties at the maximum: the first max counts.
  const int classes = 3;
  const std::vector<float> logits = {0, -1000, -1000,     // label 0: right
                                     0, -1000, -1000,     // label 2: wrong
                                     1000, 0, 0,          // label 0: right
                                     5, 5, -1000,         // label 1: wrong (tie, first max)
                                     -1000, 0, -1000};    // label 1: right
  const std::vector<float> labels = {0, 2, 0, 1, 1};
  const int rows = static_cast<int>(labels.size());
  DeviceArray logits_device = Upload(logits);
  DeviceArray labels_device = Upload(labels);
  DeviceArray dlogits_device(backend_.get(), logits.size());
  const LossSums sums = backend_->SoftmaxCrossEntropy(
      rows, classes, logits_device.data(), labels_device.data(), 2.0f, dlogits_device.data());
  EXPECT_EQ(sums.correct, 3);
  // Row 1 costs 1000, row 3 log(2), the others 0.
  EXPECT_TRUE(Near(sums.loss, 1000 + std::log(2.0), 1e-12));
  const std::vector<float> dlogits = Download(dlogits_device);
  const std::vector<float> expected = {0, 0, 0,    //
                                       2, 0, -2,   //
                                       0, 0, 0,    //
                                       1, -1, 0,   //
                                       0, 0, 0};
  EXPECT_EQ(dlogits, expected);
}

TEST_P(ComputeBackendTest, SoftmaxCrossEntropyStaysFiniteForLargeLogits) {
  const int classes = 4;
  const std::vector<float> logits = {1000, 999, 998, -1000,  //
                                     -1000, -999, 1000, 1000};
  const std::vector<float> labels = {1, 0};
  DeviceArray logits_device = Upload(logits);
  DeviceArray labels_device = Upload(labels);
  DeviceArray dlogits_device(backend_.get(), logits.size());
  const LossSums sums = backend_->SoftmaxCrossEntropy(
      2, classes, logits_device.data(), labels_device.data(), 1.0f, dlogits_device.data());
  ASSERT_TRUE(std::isfinite(sums.loss));
  const double row0 = std::log(std::exp(0.0) + std::exp(-1.0) + std::exp(-2.0)) + 1;
  const double row1 = std::log(2.0) + 2000;
  EXPECT_TRUE(Near(sums.loss, row0 + row1, 1e-6));
  EXPECT_EQ(sums.correct, 0);
  for (float value : Download(dlogits_device)) EXPECT_TRUE(std::isfinite(value));
}

TEST_P(ComputeBackendTest, SigmoidCrossEntropyMatchesReference) {
  const float scale = 0.25f;
  for (int rows : kSizes) {
    SCOPED_TRACE(::testing::Message() << "rows=" << rows);
    const std::vector<float> logits = Random(rows, -8, 8);
    const std::vector<float> labels = RandomClasses(rows, 2);
    DeviceArray logits_device = Upload(logits);
    DeviceArray labels_device = Upload(labels);
    DeviceArray dlogits_device(backend_.get(), rows);
    const LossSums sums = backend_->SigmoidCrossEntropy(
        rows, logits_device.data(), labels_device.data(), scale, dlogits_device.data());
    const std::vector<float> dlogits = Download(dlogits_device);

    double expected_loss = 0;
    int64_t expected_correct = 0;
    for (int r = 0; r < rows; ++r) {
      const double x = logits[r];
      const double y = labels[r];
      const double probability = 1 / (1 + std::exp(-x));
      expected_loss += -(y * std::log(probability) + (1 - y) * std::log(1 - probability));
      if ((x > 0 ? 1 : 0) == y) ++expected_correct;
      ASSERT_TRUE(Near(dlogits[r], (probability - y) * scale, scale)) << r;
    }
    EXPECT_TRUE(Near(sums.loss, expected_loss, 1e-6 * rows));
    EXPECT_EQ(sums.correct, expected_correct);
  }
}

TEST_P(ComputeBackendTest, SigmoidCrossEntropyExactOnCraftedRows) {
  // A logit of 0 predicts 0. Losses: 0 or 1000 at +-1000, log(2) at 0.
  const std::vector<float> logits = {1000, 1000, -1000, -1000, 0, 0};
  const std::vector<float> labels = {1, 0, 0, 1, 0, 1};
  const int rows = static_cast<int>(labels.size());
  DeviceArray logits_device = Upload(logits);
  DeviceArray labels_device = Upload(labels);
  DeviceArray dlogits_device(backend_.get(), rows);
  const LossSums sums = backend_->SigmoidCrossEntropy(
      rows, logits_device.data(), labels_device.data(), 4.0f, dlogits_device.data());
  EXPECT_EQ(sums.correct, 3);
  EXPECT_TRUE(Near(sums.loss, 2000 + 2 * std::log(2.0), 1e-12));
  EXPECT_EQ(Download(dlogits_device), (std::vector<float>{0, 4, 0, -4, 2, -2}));
}

TEST_P(ComputeBackendTest, SquaredError) {
  for (int rows : kSizes) {
    const std::vector<float> predictions = Random(rows, -3, 3);
    const std::vector<float> targets = Random(rows, -3, 3);
    DeviceArray predictions_device = Upload(predictions);
    DeviceArray targets_device = Upload(targets);
    DeviceArray gradient_device(backend_.get(), rows);
    const LossSums sums = backend_->SquaredError(rows, predictions_device.data(),
                                                 targets_device.data(), 0.5f,
                                                 gradient_device.data());
    const std::vector<float> gradient = Download(gradient_device);
    double expected_loss = 0;
    for (int r = 0; r < rows; ++r) {
      const double difference = double{predictions[r]} - targets[r];
      expected_loss += 0.5 * difference * difference;
      ASSERT_TRUE(Near(gradient[r], 0.5 * difference,
                       0.5 * (std::abs(predictions[r]) + std::abs(targets[r]))))
          << r;
    }
    EXPECT_TRUE(Near(sums.loss, expected_loss, 1e-6 * rows)) << rows;
    EXPECT_EQ(sums.correct, 0);
  }

  // Exact: differences of 2, -1 and 0.
  DeviceArray predictions = Upload({3, 0, 7});
  DeviceArray targets = Upload({1, 1, 7});
  DeviceArray gradient(backend_.get(), 3);
  const LossSums sums =
      backend_->SquaredError(3, predictions.data(), targets.data(), 1.0f, gradient.data());
  EXPECT_EQ(sums.loss, 2.5);
  EXPECT_EQ(Download(gradient), (std::vector<float>{2, -1, 0}));
}

INSTANTIATE_TEST_SUITE_P(AllBackends, ComputeBackendTest,
                         ::testing::ValuesIn(AvailableBackends()),
                         [](const ::testing::TestParamInfo<BackendFactory>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace ps
