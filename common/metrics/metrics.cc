#include "common/metrics/metrics.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <glog/logging.h>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Help text escapes backslash and newline; label values also the double quote.
void AppendEscaped(absl::string_view text, bool quote, std::string* out) {
  for (char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (quote && c == '"') {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

void AppendLabels(const MetricLabels& labels, const std::pair<std::string, std::string>* extra,
                  std::string* out) {
  if (labels.empty() && extra == nullptr) return;
  out->push_back('{');
  bool first = true;
  auto append = [&](const std::pair<std::string, std::string>& label) {
    if (!first) out->push_back(',');
    first = false;
    absl::StrAppend(out, label.first, "=\"");
    AppendEscaped(label.second, /*quote=*/true, out);
    out->push_back('"');
  };
  for (const auto& label : labels) append(label);
  if (extra != nullptr) append(*extra);
  out->push_back('}');
}

void AtomicAdd(std::atomic<double>* target, double delta) {
  double old = target->load(std::memory_order_relaxed);
  while (!target->compare_exchange_weak(old, old + delta, std::memory_order_relaxed)) {
  }
}

std::vector<std::string> LabelNames(const MetricLabels& labels) {
  std::vector<std::string> names;
  for (const auto& label : labels) names.push_back(label.first);
  return names;
}

template <typename Metric>
Metric* FindChild(std::vector<std::pair<MetricLabels, std::unique_ptr<Metric>>>& children,
                  const MetricLabels& labels) {
  for (auto& [child_labels, metric] : children) {
    if (child_labels == labels) return metric.get();
  }
  return nullptr;
}

}  // namespace

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  // The shortest of %.15g and %.17g that reads back as the same double.
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.15g", value);
  if (std::strtod(buffer, nullptr) != value) {
    std::snprintf(buffer, sizeof(buffer), "%.17g", value);
  }
  return buffer;
}

void MetricsWriter::Family(absl::string_view name, absl::string_view help, MetricType type) {
  absl::StrAppend(&text_, "# HELP ", name, " ");
  AppendEscaped(help, /*quote=*/false, &text_);
  absl::StrAppend(&text_, "\n# TYPE ", name, " ", TypeName(type), "\n");
}

void MetricsWriter::Sample(absl::string_view name, const MetricLabels& labels, double value) {
  text_.append(name.data(), name.size());
  AppendLabels(labels, nullptr, &text_);
  absl::StrAppend(&text_, " ", FormatMetricValue(value), "\n");
}

void MetricsWriter::Histogram(absl::string_view name, const MetricLabels& labels,
                              const std::vector<double>& upper_bounds,
                              const std::vector<int64_t>& cumulative_counts, double sum,
                              int64_t count) {
  const std::string bucket = absl::StrCat(name, "_bucket");
  for (size_t i = 0; i <= upper_bounds.size(); ++i) {
    const bool last = i == upper_bounds.size();
    const std::pair<std::string, std::string> le = {
        "le", last ? "+Inf" : FormatMetricValue(upper_bounds[i])};
    text_.append(bucket);
    AppendLabels(labels, &le, &text_);
    absl::StrAppend(&text_, " ", last ? count : cumulative_counts[i], "\n");
  }
  Sample(absl::StrCat(name, "_sum"), labels, sum);
  Sample(absl::StrCat(name, "_count"), labels, static_cast<double>(count));
}

void Gauge::Add(double delta) { AtomicAdd(&value_, delta); }

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)),
      counts_(new std::atomic<int64_t>[upper_bounds_.size() + 1]) {
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) counts_[i].store(0);
  for (size_t i = 1; i < upper_bounds_.size(); ++i) {
    CHECK_LT(upper_bounds_[i - 1], upper_bounds_[i]) << "histogram bounds must increase";
  }
}

void Histogram::Observe(double value) {
  size_t bucket = 0;
  while (bucket < upper_bounds_.size() && value > upper_bounds_[bucket]) ++bucket;
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(&sum_, value);
  count_.fetch_add(1, std::memory_order_relaxed);
}

void Histogram::Write(absl::string_view name, const MetricLabels& labels,
                      MetricsWriter* writer) const {
  std::vector<int64_t> cumulative(upper_bounds_.size());
  int64_t running = 0;
  for (size_t i = 0; i < upper_bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    cumulative[i] = running;
  }
  running += counts_[upper_bounds_.size()].load(std::memory_order_relaxed);
  writer->Histogram(name, labels, upper_bounds_, cumulative, sum_.load(std::memory_order_relaxed),
                    running);
}

MetricsRegistry::Family* MetricsRegistry::FindOrAddFamily(const std::string& name,
                                                          const std::string& help, MetricType type,
                                                          const MetricLabels& labels) {
  auto [it, added] = families_.try_emplace(name);
  Family& family = it->second;
  if (added) {
    family.help = help;
    family.type = type;
    return &family;
  }
  CHECK(family.type == type && family.help == help) << "metric " << name << " redefined";
  MetricLabels first;
  if (!family.counters.empty()) first = family.counters[0].first;
  if (!family.gauges.empty()) first = family.gauges[0].first;
  if (!family.histograms.empty()) first = family.histograms[0].first;
  CHECK(LabelNames(first) == LabelNames(labels)) << "metric " << name << ": other label names";
  return &family;
}

Counter* MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family* family = FindOrAddFamily(name, help, MetricType::kCounter, labels);
  if (Counter* counter = FindChild(family->counters, labels)) return counter;
  family->counters.emplace_back(labels, std::make_unique<Counter>());
  return family->counters.back().second.get();
}

Gauge* MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                 const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family* family = FindOrAddFamily(name, help, MetricType::kGauge, labels);
  if (Gauge* gauge = FindChild(family->gauges, labels)) return gauge;
  family->gauges.emplace_back(labels, std::make_unique<Gauge>());
  return family->gauges.back().second.get();
}

Histogram* MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                         const std::vector<double>& upper_bounds,
                                         const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family* family = FindOrAddFamily(name, help, MetricType::kHistogram, labels);
  if (family->histograms.empty()) {
    family->upper_bounds = upper_bounds;
  } else {
    CHECK(family->upper_bounds == upper_bounds) << "metric " << name << ": other bounds";
  }
  if (Histogram* histogram = FindChild(family->histograms, labels)) return histogram;
  family->histograms.emplace_back(labels, std::make_unique<Histogram>(upper_bounds));
  return family->histograms.back().second.get();
}

void MetricsRegistry::AddCollector(Collector collector) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collector));
}

std::string MetricsRegistry::Render() const {
  MetricsWriter writer;
  std::vector<Collector> collectors;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, family] : families_) {
      writer.Family(name, family.help, family.type);
      for (const auto& [labels, counter] : family.counters) {
        writer.Sample(name, labels, static_cast<double>(counter->value()));
      }
      for (const auto& [labels, gauge] : family.gauges) {
        writer.Sample(name, labels, gauge->value());
      }
      for (const auto& [labels, histogram] : family.histograms) {
        histogram->Write(name, labels, &writer);
      }
    }
    collectors = collectors_;
  }
  // Outside mu_: a collector takes its owner's locks.
  for (const Collector& collector : collectors) collector(&writer);
  return writer.text();
}

}  // namespace ps
