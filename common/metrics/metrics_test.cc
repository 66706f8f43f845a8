#include "common/metrics/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(FormatMetricValueTest, IntegersWithoutFractionAndSpecialValuesAsPrometheusSpellsThem) {
  EXPECT_EQ(FormatMetricValue(0), "0");
  EXPECT_EQ(FormatMetricValue(-3), "-3");
  EXPECT_EQ(FormatMetricValue(1234567890123.0), "1234567890123");
  EXPECT_EQ(FormatMetricValue(0.25), "0.25");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
}

TEST(MetricsWriterTest, WritesHelpTypeAndSamplesWithEscapedLabelValues) {
  MetricsWriter writer;
  writer.Family("ps_pushes_total", "Pushes.\nBy job \\ shard.", MetricType::kCounter);
  writer.Sample("ps_pushes_total", {{"job", "a\"b\\c\nd"}, {"shard", "0"}}, 7);
  writer.Sample("ps_pushes_total", {}, 1.5);
  EXPECT_EQ(writer.text(),
            "# HELP ps_pushes_total Pushes.\\nBy job \\\\ shard.\n"
            "# TYPE ps_pushes_total counter\n"
            "ps_pushes_total{job=\"a\\\"b\\\\c\\nd\",shard=\"0\"} 7\n"
            "ps_pushes_total 1.5\n");
}

TEST(MetricsWriterTest, WritesHistogramAsCumulativeBucketsSumAndCount) {
  MetricsWriter writer;
  writer.Family("ps_staleness", "Staleness.", MetricType::kHistogram);
  writer.Histogram("ps_staleness", {{"job", "j"}}, {0, 1, 2.5}, {3, 5, 5}, 9.5, 6);
  EXPECT_EQ(writer.text(),
            "# HELP ps_staleness Staleness.\n"
            "# TYPE ps_staleness histogram\n"
            "ps_staleness_bucket{job=\"j\",le=\"0\"} 3\n"
            "ps_staleness_bucket{job=\"j\",le=\"1\"} 5\n"
            "ps_staleness_bucket{job=\"j\",le=\"2.5\"} 5\n"
            "ps_staleness_bucket{job=\"j\",le=\"+Inf\"} 6\n"
            "ps_staleness_sum{job=\"j\"} 9.5\n"
            "ps_staleness_count{job=\"j\"} 6\n");
}

TEST(MetricsRegistryTest, RendersInstrumentsByNameThenCollectors) {
  MetricsRegistry registry;
  Counter* ok = registry.AddCounter("b_calls_total", "Calls.", {{"code", "OK"}});
  Counter* bad = registry.AddCounter("b_calls_total", "Calls.", {{"code", "UNAVAILABLE"}});
  EXPECT_EQ(registry.AddCounter("b_calls_total", "Calls.", {{"code", "OK"}}), ok);
  Gauge* gauge = registry.AddGauge("a_jobs", "Jobs.");
  Histogram* latency = registry.AddHistogram("c_seconds", "Latency.", {0.01, 0.1});
  ok->Increment();
  ok->Increment(2);
  bad->Increment();
  gauge->Set(2);
  gauge->Add(-0.5);
  latency->Observe(0.005);
  latency->Observe(0.01);
  latency->Observe(0.05);
  latency->Observe(3);
  registry.AddCollector([](MetricsWriter* writer) {
    writer->Family("d_version", "Version.", MetricType::kGauge);
    writer->Sample("d_version", {{"job", "x"}}, 42);
  });
  EXPECT_EQ(registry.Render(),
            "# HELP a_jobs Jobs.\n"
            "# TYPE a_jobs gauge\n"
            "a_jobs 1.5\n"
            "# HELP b_calls_total Calls.\n"
            "# TYPE b_calls_total counter\n"
            "b_calls_total{code=\"OK\"} 3\n"
            "b_calls_total{code=\"UNAVAILABLE\"} 1\n"
            "# HELP c_seconds Latency.\n"
            "# TYPE c_seconds histogram\n"
            "c_seconds_bucket{le=\"0.01\"} 2\n"
            "c_seconds_bucket{le=\"0.1\"} 3\n"
            "c_seconds_bucket{le=\"+Inf\"} 4\n"
            "c_seconds_sum 3.065\n"
            "c_seconds_count 4\n"
            "# HELP d_version Version.\n"
            "# TYPE d_version gauge\n"
            "d_version{job=\"x\"} 42\n");
}

TEST(MetricsRegistryTest, ConcurrentIncrementsAreAllCounted) {
  MetricsRegistry registry;
  Counter* counter = registry.AddCounter("n_total", "N.");
  Histogram* histogram = registry.AddHistogram("h", "H.", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) {
        counter->Increment();
        histogram->Observe(1);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter->value(), 40000);
  EXPECT_NE(registry.Render().find("h_bucket{le=\"1\"} 40000\nh_bucket{le=\"+Inf\"} 40000\n"
                                   "h_sum 40000\nh_count 40000\n"),
            std::string::npos);
}

TEST(MetricsRegistryDeathTest, RedefiningAFamilyWithOtherLabelNamesIsAProgrammingError) {
  MetricsRegistry registry;
  registry.AddCounter("x_total", "X.", {{"job", "a"}});
  EXPECT_DEATH(registry.AddCounter("x_total", "X.", {{"shard", "0"}}), "other label names");
}

}  // namespace
}  // namespace ps
