// The arithmetic of convolution and pooling over NHWC images (Window2D), one output element at
// a time: the CUDA backend runs a thread per element, and the CPU backend's loops
// (cpu_window_ops.h) give the same results bit for bit. Every backward operation gathers (an
// input element sums what its windows send it, in a fixed order) rather than scattering with
// atomics, so the results do not depend on thread scheduling.
#ifndef PS_WORKER_COMPUTE_WINDOW_OPS_H_
#define PS_WORKER_COMPUTE_WINDOW_OPS_H_

#include <cstddef>

#include "worker/compute/compute_backend.h"
#include "worker/compute/host_device.h"

namespace ps {
namespace window_ops {

// Window2D's own accessors, callable on the device too.
PS_HOST_DEVICE inline int OutHeight(const Window2D& w) {
  return (w.height + 2 * w.padding - w.kernel_h) / w.stride + 1;
}
PS_HOST_DEVICE inline int OutWidth(const Window2D& w) {
  return (w.width + 2 * w.padding - w.kernel_w) / w.stride + 1;
}
PS_HOST_DEVICE inline int Patch(const Window2D& w) { return w.kernel_h * w.kernel_w * w.channels; }

// Floats in `batch` input images, and in their pooled outputs.
PS_HOST_DEVICE inline size_t ImageSize(const Window2D& w, int batch) {
  return static_cast<size_t>(batch) * w.height * w.width * w.channels;
}
PS_HOST_DEVICE inline size_t PooledSize(const Window2D& w, int batch) {
  return static_cast<size_t>(batch) * OutHeight(w) * OutWidth(w) * w.channels;
}

// Element `i` of a batch of height x width x channels NHWC images, as (n, h, w, c).
struct Nhwc {
  size_t n;
  int h, w, c;
};
PS_HOST_DEVICE inline Nhwc NhwcOf(size_t i, int height, int width, int channels) {
  Nhwc at;
  at.c = static_cast<int>(i % channels);
  const size_t spatial = i / channels;
  at.w = static_cast<int>(spatial % width);
  at.h = static_cast<int>((spatial / width) % height);
  at.n = spatial / (static_cast<size_t>(width) * height);
  return at;
}

// Element `i` of Im2Col's columns: batch * out_h * out_w rows of patch() floats, each row an
// output position (n, oh, ow) and each column a window offset (kh, kw, c).
PS_HOST_DEVICE inline float Im2ColAt(const Window2D& w, const float* images, size_t i) {
  const Nhwc row = NhwcOf(i, OutHeight(w), OutWidth(w), Patch(w));
  const int c = row.c % w.channels;
  const int kw = (row.c / w.channels) % w.kernel_w;
  const int kh = row.c / (w.channels * w.kernel_w);
  const int ih = row.h * w.stride - w.padding + kh;
  const int iw = row.w * w.stride - w.padding + kw;
  if (ih < 0 || ih >= w.height || iw < 0 || iw >= w.width) return 0.0f;
  return images[((row.n * w.height + ih) * w.width + iw) * w.channels + c];
}

// The (n, ih, iw, c) of input element `i`.
PS_HOST_DEVICE inline Nhwc PixelOf(const Window2D& w, size_t i) {
  return NhwcOf(i, w.height, w.width, w.channels);
}

// The output row (n, oh, ow) of the window at kernel offset `k` over position `at` (along one
// axis): the output index o with o * stride - padding + k == at, or -1 when there is none.
PS_HOST_DEVICE inline int WindowAt(int at, int k, int stride, int padding, int outputs) {
  const int shifted = at + padding - k;
  if (shifted < 0 || shifted % stride != 0) return -1;
  const int o = shifted / stride;
  return o < outputs ? o : -1;
}

// Element `i` of Col2Im's images: the sum of the column entries Im2Col copied from it, over
// the kernel offsets kh, then kw, ascending.
PS_HOST_DEVICE inline float Col2ImAt(const Window2D& w, const float* columns, size_t i) {
  const Nhwc p = PixelOf(w, i);
  const int out_h = OutHeight(w), out_w = OutWidth(w);
  float sum = 0.0f;
  for (int kh = 0; kh < w.kernel_h; ++kh) {
    const int oh = WindowAt(p.h, kh, w.stride, w.padding, out_h);
    if (oh < 0) continue;
    for (int kw = 0; kw < w.kernel_w; ++kw) {
      const int ow = WindowAt(p.w, kw, w.stride, w.padding, out_w);
      if (ow < 0) continue;
      const size_t row = (p.n * out_h + oh) * out_w + ow;
      sum += columns[row * Patch(w) + (kh * w.kernel_w + kw) * w.channels + p.c];
    }
  }
  return sum;
}

// The input index of offset (kh, kw) of output element (n, oh, ow, c)'s window (padding 0).
PS_HOST_DEVICE inline size_t PoolInput(const Window2D& w, size_t n, int oh, int ow, int c, int kh,
                                       int kw) {
  return ((n * w.height + oh * w.stride + kh) * w.width + ow * w.stride + kw) * w.channels + c;
}

// Output element `i` of a pooling: (n, oh, ow, c), batch * out_h * out_w * channels of them.
PS_HOST_DEVICE inline Nhwc PoolOutputOf(const Window2D& w, size_t i) {
  return NhwcOf(i, OutHeight(w), OutWidth(w), w.channels);
}

PS_HOST_DEVICE inline float MaxPoolAt(const Window2D& w, const float* x, size_t i) {
  const Nhwc o = PoolOutputOf(w, i);
  float best = x[PoolInput(w, o.n, o.h, o.w, o.c, 0, 0)];
  for (int kh = 0; kh < w.kernel_h; ++kh) {
    for (int kw = 0; kw < w.kernel_w; ++kw) {
      const float v = x[PoolInput(w, o.n, o.h, o.w, o.c, kh, kw)];
      best = v > best ? v : best;
    }
  }
  return best;
}

PS_HOST_DEVICE inline float AvgPoolAt(const Window2D& w, const float* x, size_t i) {
  const Nhwc o = PoolOutputOf(w, i);
  float sum = 0.0f;
  for (int kh = 0; kh < w.kernel_h; ++kh) {
    for (int kw = 0; kw < w.kernel_w; ++kw) sum += x[PoolInput(w, o.n, o.h, o.w, o.c, kh, kw)];
  }
  return sum / static_cast<float>(w.kernel_h * w.kernel_w);
}

// Input element `i` of a pooling's gradient: what each window holding it sends (windows in
// (oh, ow) order, ascending). `max`: the window's dy when `i` is its first maximum (x and y as
// the forward pass had them); else the window's dy over its size.
PS_HOST_DEVICE inline float PoolGradientAt(const Window2D& w, bool max, const float* x,
                                           const float* y, const float* dy, size_t i) {
  const Nhwc p = PixelOf(w, i);
  const int out_h = OutHeight(w), out_w = OutWidth(w);
  const float share = 1.0f / static_cast<float>(w.kernel_h * w.kernel_w);
  float sum = 0.0f;
  for (int kh = w.kernel_h - 1; kh >= 0; --kh) {
    const int oh = WindowAt(p.h, kh, w.stride, 0, out_h);
    if (oh < 0) continue;
    for (int kw = w.kernel_w - 1; kw >= 0; --kw) {
      const int ow = WindowAt(p.w, kw, w.stride, 0, out_w);
      if (ow < 0) continue;
      const size_t out = ((p.n * out_h + oh) * out_w + ow) * w.channels + p.c;
      if (!max) {
        sum += RoundedProduct(dy[out], share);
        continue;
      }
      // Whether no earlier offset of this window holds the maximum too.
      bool first = true;
      for (int h = 0; h <= kh && first; ++h) {
        for (int v = 0; v < (h < kh ? w.kernel_w : kw); ++v) {
          if (x[PoolInput(w, p.n, oh, ow, p.c, h, v)] == y[out]) {
            first = false;
            break;
          }
        }
      }
      if (first && x[i] == y[out]) sum += dy[out];
    }
  }
  return sum;
}

}  // namespace window_ops
}  // namespace ps

#endif  // PS_WORKER_COMPUTE_WINDOW_OPS_H_
