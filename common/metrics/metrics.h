// Metrics of a daemon, rendered in Prometheus's text exposition format (version 0.0.4) for its
// /metrics page (common/net/metrics_http_server.h).
//
// Two ways to export a value:
//  - an instrument (Counter, Gauge, Histogram) registered once with its labels, then updated on
//    the hot path without locks or allocation (atomics);
//  - a collector: a callback that writes samples at scrape time from statistics its owner keeps
//    anyway (the ps exports its jobs' JobStats this way), so the hot path pays nothing.
#ifndef PS_COMMON_METRICS_METRICS_H_
#define PS_COMMON_METRICS_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace ps {

// A sample's labels, in the order they are written: {{"job", "mnist"}, {"shard", "0"}}.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// Builds exposition text. Each family is one Family() call followed by its samples; a name is
// a valid Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), which the caller guarantees. Help
// text and label values may hold anything: they are escaped. Not thread-safe.
class MetricsWriter {
 public:
  // "# HELP name help" and "# TYPE name type".
  void Family(absl::string_view name, absl::string_view help, MetricType type);
  // "name{labels} value"; integral values are written without a fraction, infinities as
  // +Inf / -Inf, NaN as NaN.
  void Sample(absl::string_view name, const MetricLabels& labels, double value);
  // A histogram's samples: name_bucket{labels,le="b"} with the count of observations <= b for
  // each upper bound b, name_bucket{labels,le="+Inf"} = count, name_sum and name_count.
  // REQUIRES: cumulative_counts.size() == upper_bounds.size(), both increasing / nondecreasing,
  // every cumulative count <= count.
  void Histogram(absl::string_view name, const MetricLabels& labels,
                 const std::vector<double>& upper_bounds,
                 const std::vector<int64_t>& cumulative_counts, double sum, int64_t count);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A number as the exposition format writes it (also a bucket's "le").
std::string FormatMetricValue(double value);

// Thread-safe; Increment is one relaxed atomic add.
class Counter {
 public:
  void Increment(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// Thread-safe.
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Thread-safe; Observe is a few relaxed atomic operations (no lock, no allocation).
class Histogram {
 public:
  // REQUIRES: upper_bounds increasing and finite (+Inf is implied).
  explicit Histogram(std::vector<double> upper_bounds);

  void Observe(double value);

  // Cumulative counts per upper bound, the sum and the count, read without a common snapshot:
  // a scrape racing with Observe may see one observation in some of them only.
  void Write(absl::string_view name, const MetricLabels& labels, MetricsWriter* writer) const;

  const std::vector<double>& upper_bounds() const { return upper_bounds_; }

 private:
  const std::vector<double> upper_bounds_;
  // counts_[i]: observations in (upper_bounds_[i-1], upper_bounds_[i]]; the last, beyond all.
  std::unique_ptr<std::atomic<int64_t>[]> counts_;
  std::atomic<double> sum_{0};
  std::atomic<int64_t> count_{0};
};

// The metrics of one process. Thread-safe. Instruments live as long as the registry; the
// pointers Add* return may be kept and used from any thread.
class MetricsRegistry {
 public:
  using Collector = std::function<void(MetricsWriter*)>;

  // The instrument of family `name` with `labels`, created on first use. Every call for one
  // name must pass the same help, type and label names (CHECK-fails otherwise: a programming
  // error), histograms the same bounds.
  Counter* AddCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels = {}) ABSL_LOCKS_EXCLUDED(mu_);
  Gauge* AddGauge(const std::string& name, const std::string& help, const MetricLabels& labels = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  Histogram* AddHistogram(const std::string& name, const std::string& help,
                          const std::vector<double>& upper_bounds, const MetricLabels& labels = {})
      ABSL_LOCKS_EXCLUDED(mu_);

  // Calls `collector` at every Render, after the instruments. It writes whole families, none
  // named as an instrument or another collector's. REQUIRES: what it reads outlives the
  // registry, or the registry is no longer rendered once it is gone.
  void AddCollector(Collector collector) ABSL_LOCKS_EXCLUDED(mu_);

  // Every family: instruments by name, each's samples in the order their labels were added,
  // then the collectors' in the order they were added.
  std::string Render() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Family {
    std::string help;
    MetricType type;
    std::vector<double> upper_bounds;  // Histograms.
    std::vector<std::pair<MetricLabels, std::unique_ptr<Counter>>> counters;
    std::vector<std::pair<MetricLabels, std::unique_ptr<Gauge>>> gauges;
    std::vector<std::pair<MetricLabels, std::unique_ptr<Histogram>>> histograms;
  };
  Family* FindOrAddFamily(const std::string& name, const std::string& help, MetricType type,
                          const MetricLabels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family> families_ ABSL_GUARDED_BY(mu_);
  std::vector<Collector> collectors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_COMMON_METRICS_METRICS_H_
