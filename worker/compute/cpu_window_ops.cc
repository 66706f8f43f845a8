#include "worker/compute/cpu_window_ops.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "worker/compute/window_ops.h"

namespace ps {
namespace cpu_window_ops {
namespace {

using window_ops::ImageSize;
using window_ops::OutHeight;
using window_ops::OutWidth;
using window_ops::Patch;

// The kernel offsets kw in [lo, hi) whose column of a window starting at input column `left`
// lies inside the image (hi <= lo when none does).
struct KernelRange {
  int lo, hi;
};
KernelRange InsideWidth(const Window2D& w, int left) {
  return {std::max(0, -left), std::min(w.kernel_w, w.width - left)};
}

// Floats in one input image.
size_t ImageFloats(const Window2D& w) { return static_cast<size_t>(w.height) * w.width * w.channels; }

}  // namespace

void Im2Col(const Window2D& w, int batch, const float* images, float* columns) {
  const int out_h = OutHeight(w), out_w = OutWidth(w);
  const int run = w.kernel_w * w.channels;  // Floats of one kernel row of a window.
  float* row = columns;
  for (int n = 0; n < batch; ++n) {
    const float* image = images + n * ImageFloats(w);
    for (int oh = 0; oh < out_h; ++oh) {
      for (int ow = 0; ow < out_w; ++ow, row += Patch(w)) {
        const int left = ow * w.stride - w.padding;
        const KernelRange inside = InsideWidth(w, left);
        for (int kh = 0; kh < w.kernel_h; ++kh) {
          float* out = row + kh * run;
          const int ih = oh * w.stride - w.padding + kh;
          if (ih < 0 || ih >= w.height || inside.hi <= inside.lo) {
            std::fill(out, out + run, 0.0f);
            continue;
          }
          const int lo = inside.lo * w.channels, hi = inside.hi * w.channels;
          std::fill(out, out + lo, 0.0f);
          // left + inside.lo >= 0: the first pixel of the row inside the image.
          std::copy_n(image + (static_cast<size_t>(ih) * w.width + left + inside.lo) * w.channels,
                      hi - lo, out + lo);
          std::fill(out + hi, out + run, 0.0f);
        }
      }
    }
  }
}

// window_ops::Col2ImAt sums a pixel's entries over the kernel offsets (kh, kw) ascending, which
// are its windows' output positions (oh, ow) descending: so rows are added in that order.
void Col2Im(const Window2D& w, int batch, const float* columns, float* images) {
  std::fill(images, images + ImageSize(w, batch), 0.0f);
  const int out_h = OutHeight(w), out_w = OutWidth(w);
  const int run = w.kernel_w * w.channels;
  for (int n = 0; n < batch; ++n) {
    float* image = images + n * ImageFloats(w);
    for (int oh = out_h - 1; oh >= 0; --oh) {
      for (int ow = out_w - 1; ow >= 0; --ow) {
        const float* row =
            columns + ((static_cast<size_t>(n) * out_h + oh) * out_w + ow) * Patch(w);
        const int left = ow * w.stride - w.padding;
        const KernelRange inside = InsideWidth(w, left);
        if (inside.hi <= inside.lo) continue;
        for (int kh = 0; kh < w.kernel_h; ++kh) {
          const int ih = oh * w.stride - w.padding + kh;
          if (ih < 0 || ih >= w.height) continue;
          // The run of the window's row inside the image (its first pixel at left + lo).
          const float* in = row + kh * run + inside.lo * w.channels;
          float* out =
              image + (static_cast<size_t>(ih) * w.width + left + inside.lo) * w.channels;
          const int count = (inside.hi - inside.lo) * w.channels;
          for (int j = 0; j < count; ++j) out[j] += in[j];
        }
      }
    }
  }
}

namespace {

// Calls visit(out, in) for every pooled output position (n, oh, ow): `out` its channels in the
// output, `in` the input at its window's offset (0, 0). Positions ascending.
template <typename Visit>
void ForEachPool(const Window2D& w, int batch, Visit visit) {
  const int out_h = OutHeight(w), out_w = OutWidth(w);
  size_t out = 0;
  for (int n = 0; n < batch; ++n) {
    for (int oh = 0; oh < out_h; ++oh) {
      for (int ow = 0; ow < out_w; ++ow, out += w.channels) {
        visit(out, window_ops::PoolInput(w, n, oh, ow, 0, 0, 0));
      }
    }
  }
}

// The offset of kernel position (kh, kw) from a window's offset (0, 0) in the input.
size_t KernelOffset(const Window2D& w, int kh, int kw) {
  return (static_cast<size_t>(kh) * w.width + kw) * w.channels;
}

}  // namespace

void MaxPoolForward(const Window2D& w, int batch, const float* x, float* y) {
  ForEachPool(w, batch, [&](size_t out, size_t in) {
    for (int c = 0; c < w.channels; ++c) y[out + c] = x[in + c];
    for (int kh = 0; kh < w.kernel_h; ++kh) {
      for (int kw = 0; kw < w.kernel_w; ++kw) {
        const float* v = x + in + KernelOffset(w, kh, kw);
        for (int c = 0; c < w.channels; ++c) y[out + c] = v[c] > y[out + c] ? v[c] : y[out + c];
      }
    }
  });
}

void AvgPoolForward(const Window2D& w, int batch, const float* x, float* y) {
  const float size = static_cast<float>(w.kernel_h * w.kernel_w);
  ForEachPool(w, batch, [&](size_t out, size_t in) {
    for (int c = 0; c < w.channels; ++c) y[out + c] = 0.0f;
    for (int kh = 0; kh < w.kernel_h; ++kh) {
      for (int kw = 0; kw < w.kernel_w; ++kw) {
        const float* v = x + in + KernelOffset(w, kh, kw);
        for (int c = 0; c < w.channels; ++c) y[out + c] += v[c];
      }
    }
    for (int c = 0; c < w.channels; ++c) y[out + c] /= size;
  });
}

// window_ops::PoolGradientAt sums what a pixel's windows send it in output order, ascending:
// so outputs scatter in that order, each to its window's first maximum. The first maximum of
// every channel of a position is found together, as a select over the kernel offsets from the
// last to the first (a loop with no branch).
void MaxPoolBackward(const Window2D& w, int batch, const float* x, const float* y,
                     const float* dy, float* dx) {
  std::fill(dx, dx + ImageSize(w, batch), 0.0f);
  std::vector<int> first(w.channels);  // Per channel: the maximum's offset from `in`, or -1.
  ForEachPool(w, batch, [&](size_t out, size_t in) {
    std::fill(first.begin(), first.end(), -1);
    for (int kh = w.kernel_h - 1; kh >= 0; --kh) {
      for (int kw = w.kernel_w - 1; kw >= 0; --kw) {
        const int offset = static_cast<int>(KernelOffset(w, kh, kw));
        const float* v = x + in + offset;
        for (int c = 0; c < w.channels; ++c) {
          first[c] = v[c] == y[out + c] ? offset + c : first[c];
        }
      }
    }
    for (int c = 0; c < w.channels; ++c) {
      if (first[c] >= 0) dx[in + first[c]] += dy[out + c];
    }
  });
}

void AvgPoolBackward(const Window2D& w, int batch, const float* dy, float* dx) {
  std::fill(dx, dx + ImageSize(w, batch), 0.0f);
  const float share = 1.0f / static_cast<float>(w.kernel_h * w.kernel_w);
  ForEachPool(w, batch, [&](size_t out, size_t in) {
    for (int kh = 0; kh < w.kernel_h; ++kh) {
      for (int kw = 0; kw < w.kernel_w; ++kw) {
        float* d = dx + in + KernelOffset(w, kh, kw);
        for (int c = 0; c < w.channels; ++c) d[c] += dy[out + c] * share;
      }
    }
  });
}

}  // namespace cpu_window_ops
}  // namespace ps
