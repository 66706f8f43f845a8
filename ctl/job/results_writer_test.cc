#include "ctl/job/results_writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "absl/strings/str_split.h"
#include "common/testing/fault_injecting_file_system.h"
#include "ctl/job/run_manifest.h"

namespace ps {
namespace {

std::string Read(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string Dir(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(ResultsWriterTest, RefusesANonEmptyDirectoryUnlessOverwrite) {
  std::string dir = Dir("used");
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/old.txt") << "keep";
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer = ResultsWriter::Create(dir, false);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(writer.status().message().find("--overwrite"), absl::string_view::npos);
  EXPECT_EQ(Read(dir + "/old.txt"), "keep");  // Nothing changed.
  writer = ResultsWriter::Create(dir, true);
  ASSERT_TRUE(writer.ok()) << writer.status();
  EXPECT_FALSE(std::filesystem::exists(dir + "/old.txt"));
}

TEST(ResultsWriterTest, WritesEveryFile) {
  std::string dir = Dir("results");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer = ResultsWriter::Create(dir, false);
  ASSERT_TRUE(writer.ok()) << writer.status();

  JobSpec spec;
  spec.set_job_id("j");
  absl::StatusOr<ClusterSpec> cluster =
      ClusterSpec::Parse(R"({"ps": ["h1:1"], "worker": ["h2:1", "h3:1"]})", "test");
  ASSERT_TRUE(cluster.ok());
  ASSERT_TRUE((*writer)->WriteJob(spec, *cluster).ok());
  nlohmann::json job = nlohmann::json::parse(Read(dir + "/job.json"));
  EXPECT_EQ(job["spec"]["job_id"], "j");
  EXPECT_EQ(job["cluster"]["cluster"]["worker"].size(), 2u);
  EXPECT_FALSE(job["version"].get<std::string>().empty());

  JobProgress progress;
  progress.set_worker(0);
  progress.set_step(10);
  progress.set_loss(0.5);
  progress.mutable_eval()->set_step(10);
  progress.mutable_eval()->set_accuracy(0.9);
  (*writer)->RecordProgress(progress);
  (*writer)->RecordProgress(progress);  // The same evaluation again: one eval.csv row.
  std::string metrics = Read(dir + "/metrics.csv");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 3);
  std::string eval = Read(dir + "/eval.csv");
  EXPECT_EQ(std::count(eval.begin(), eval.end(), '\n'), 2);
  EXPECT_NE(eval.find(",10,0,0.9,"), std::string::npos) << eval;
  std::string validation = Read(dir + "/validation.csv");
  EXPECT_EQ(validation, "time_s,step,loss,accuracy,examples\n") << "no validation split yet";
  // A job with a validation split: its evaluations go to validation.csv, and a final
  // evaluation that adds the test split's is one more eval.csv row.
  JobProgress later = progress;  // The summary below is of `progress`.
  later.set_step(20);
  later.mutable_validation()->set_step(20);
  later.mutable_validation()->set_accuracy(0.8);
  (*writer)->RecordProgress(later);
  later.mutable_eval()->set_step(30);
  later.mutable_validation()->set_step(30);
  (*writer)->RecordProgress(later);
  validation = Read(dir + "/validation.csv");
  EXPECT_EQ(std::count(validation.begin(), validation.end(), '\n'), 3) << validation;
  EXPECT_NE(validation.find(",20,0,0.8,"), std::string::npos) << validation;
  eval = Read(dir + "/eval.csv");
  EXPECT_EQ(std::count(eval.begin(), eval.end(), '\n'), 3) << eval;

  JobStats shard;
  shard.set_ps_index(0);
  shard.set_applied_updates(10);
  shard.mutable_staleness()->set_total(4);
  shard.mutable_staleness()->set_mean(1.5);
  shard.mutable_staleness()->set_max(3);
  (*shard.mutable_dropped())["stale_step"] = 2;
  WorkerStats* worker = shard.add_workers();
  worker->set_worker(1);
  for (int count : {1, 0, 3}) worker->mutable_staleness()->add_counts(count);
  ASSERT_TRUE((*writer)->WriteStaleness({shard}).ok());
  EXPECT_EQ(Read(dir + "/staleness.csv"), "shard,worker,staleness,count\n0,1,0,1\n0,1,2,3\n");
  // The timeline: every count on the first snapshot, then only the counts that grew.
  ASSERT_TRUE((*writer)->RecordStalenessSnapshot({shard}).ok());
  worker->mutable_staleness()->set_counts(2, 5);
  ASSERT_TRUE((*writer)->RecordStalenessSnapshot({shard}).ok());
  ASSERT_TRUE((*writer)->RecordStalenessSnapshot({shard}).ok());  // Nothing grew: no row.
  const std::string timeline = Read(dir + "/staleness_timeline.csv");
  EXPECT_EQ(std::count(timeline.begin(), timeline.end(), '\n'), 4) << timeline;
  EXPECT_EQ(timeline.substr(0, timeline.find('\n')), "time_s,shard,worker,staleness,count");
  EXPECT_NE(timeline.find(",0,1,0,1\n"), std::string::npos) << timeline;
  EXPECT_NE(timeline.find(",0,1,2,3\n"), std::string::npos) << timeline;
  EXPECT_NE(timeline.find(",0,1,2,5\n"), std::string::npos) << timeline;
  worker->mutable_staleness()->set_counts(2, 3);

  progress.set_state(JobProgress::DONE);
  ASSERT_TRUE((*writer)->WriteSummary(spec, {progress}, {shard}, absl::Seconds(2)).ok());
  nlohmann::json summary = nlohmann::json::parse(Read(dir + "/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_EQ(summary["steps"], 10);
  EXPECT_EQ(summary["dropped_gradients"], 2);
  EXPECT_DOUBLE_EQ(summary["staleness_mean"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(summary["final_eval_accuracy"].get<double>(), 0.9);
  // The manifest, with the summary: the cluster WriteJob had, and the summary's figures.
  nlohmann::json manifest = nlohmann::json::parse(Read(dir + "/manifest.json"));
  EXPECT_EQ(manifest["job_hash"], JobSpecHash(spec));
  EXPECT_EQ(manifest["cluster"], job["cluster"]);
  EXPECT_EQ(manifest["final"]["state"], "DONE");
  EXPECT_EQ(manifest["final"]["steps"], 10);

  ParameterSpec parameters;
  VariableDef* w = parameters.add_variables();
  w->set_name("layer0/weights");
  w->add_shape(2);
  w->add_shape(2);
  std::vector<float> values = {1, 2, 3, 4};
  ASSERT_TRUE(
      (*writer)->WriteParameters(parameters, {{"layer0/weights", absl::MakeSpan(values)}}).ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/params/layer0_weights.npy"));
}

// psctl stops the other workers once one fails: the summary says FAILED, whatever the order.
TEST(ResultsWriterTest, SummaryOfAFailedJobSaysFailed) {
  std::string dir = Dir("failed");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer = ResultsWriter::Create(dir, false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  JobProgress failed, stopped;
  failed.set_worker(1);
  failed.set_state(JobProgress::FAILED);
  failed.set_error_code(static_cast<int>(absl::StatusCode::kDataLoss));
  failed.set_error("/data/t.idx is truncated at byte 16");
  stopped.set_state(JobProgress::STOPPED);
  ASSERT_TRUE((*writer)->WriteSummary(JobSpec(), {failed, stopped}, {}, absl::Seconds(1)).ok());
  nlohmann::json summary = nlohmann::json::parse(Read(dir + "/summary.json"));
  EXPECT_EQ(summary["state"], "FAILED");
  // The reason is in the summary, not only on psctl's stderr.
  EXPECT_EQ(summary["error"], "worker:1: /data/t.idx is truncated at byte 16");
  EXPECT_EQ(summary["error_code"], "DATA_LOSS");
  ASSERT_TRUE((*writer)->WriteSummary(JobSpec(), {stopped, failed}, {}, absl::Seconds(1)).ok());
  EXPECT_EQ(nlohmann::json::parse(Read(dir + "/summary.json"))["state"], "FAILED");
}

// Staleness beyond the histogram's last bucket: the row of 63 counts it, the summary keeps the
// exact maximum and mean.
TEST(ResultsWriterTest, TheLastStalenessBucketHoldsThatManyOrMoreAndTheSummaryIsExact) {
  std::string dir = Dir("beyond");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer = ResultsWriter::Create(dir, false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  JobStats shard;
  WorkerStats* worker = shard.add_workers();
  StalenessHistogramData* histogram = worker->mutable_staleness();
  histogram->mutable_counts()->Resize(64, 0);
  histogram->set_counts(1, 1);
  histogram->set_counts(63, 2);  // Gradients of staleness 70 and 100.
  histogram->set_total(3);
  histogram->set_sum(171);
  histogram->set_mean(57);
  histogram->set_max(100);
  *shard.mutable_staleness() = *histogram;
  ASSERT_TRUE((*writer)->WriteStaleness({shard}).ok());
  EXPECT_EQ(Read(dir + "/staleness.csv"), "shard,worker,staleness,count\n0,0,1,1\n0,0,63,2\n");
  ASSERT_TRUE((*writer)->WriteSummary(JobSpec(), {}, {shard}, absl::Seconds(1)).ok());
  nlohmann::json summary = nlohmann::json::parse(Read(dir + "/summary.json"));
  EXPECT_EQ(summary["staleness_max"], 100);
  EXPECT_EQ(summary["staleness_mean"], 57.0);
}

// What the chief trained and evaluated on, and the scaling to apply to new data.
TEST(ResultsWriterTest, SummaryRecordsTheDataSplitsAndScaling) {
  std::string dir = Dir("data");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer = ResultsWriter::Create(dir, false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  JobProgress chief;
  chief.set_state(JobProgress::DONE);
  chief.set_note("stopped early at step 15");
  DataSummary* data = chief.mutable_data();
  data->set_train_examples(270);
  data->set_validation_examples(90);
  data->set_test_examples(40);
  data->set_scaling("min_max");
  data->add_feature_min(-1.5f);
  data->add_feature_max(2);
  ASSERT_TRUE((*writer)->WriteSummary(JobSpec(), {chief}, {}, absl::Seconds(1)).ok());
  nlohmann::json summary = nlohmann::json::parse(Read(dir + "/summary.json"));
  EXPECT_EQ(summary["note"], "stopped early at step 15");
  EXPECT_EQ(summary["data"], nlohmann::json::parse(R"({"train_examples": 270,
      "validation_examples": 90, "test_examples": 40, "scaling": "min_max",
      "feature_min": [-1.5], "feature_max": [2.0]})"));
  EXPECT_FALSE(summary.contains("error"));
}

// A worker the job went on without (its mode allows it) is listed, and does not fail the job.
TEST(ResultsWriterTest, SummaryListsALostWorkerAndSaysDoneWhenTheOthersFinished) {
  std::string dir = Dir("lost");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer = ResultsWriter::Create(dir, false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  JobProgress done, lost;
  done.set_state(JobProgress::DONE);
  done.set_step(100);
  lost.set_worker(1);
  lost.set_state(JobProgress::FAILED);
  lost.set_step(40);
  lost.set_error("lost the progress stream");
  ASSERT_TRUE((*writer)->WriteSummary(JobSpec(), {done, lost}, {}, absl::Seconds(1), {1}).ok());
  nlohmann::json summary = nlohmann::json::parse(Read(dir + "/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  ASSERT_EQ(summary["lost_workers"].size(), 1u);
  EXPECT_EQ(summary["lost_workers"][0]["worker"], 1);
  EXPECT_EQ(summary["lost_workers"][0]["step"], 40);
  EXPECT_EQ(summary["lost_workers"][0]["error"], "lost the progress stream");
  ASSERT_TRUE((*writer)->WriteSummary(JobSpec(), {done, lost}, {}, absl::Seconds(1)).ok());
  EXPECT_EQ(nlohmann::json::parse(Read(dir + "/summary.json"))["state"], "FAILED");
  // A worker the job grew by that never started: neither lost nor a failure.
  ASSERT_TRUE(
      (*writer)->WriteSummary(JobSpec(), {done, lost}, {}, absl::Seconds(1), {}, {1}).ok());
  summary = nlohmann::json::parse(Read(dir + "/summary.json"));
  EXPECT_EQ(summary["state"], "DONE");
  EXPECT_TRUE(summary["lost_workers"].empty());
  EXPECT_EQ(summary["workers_not_started"], nlohmann::json::array({1}));
}

TEST(ResultsWriterTest, EventsAreRowsWithTheirDetailQuoted) {
  std::string dir = Dir("events");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer = ResultsWriter::Create(dir, false);
  ASSERT_TRUE(writer.ok()) << writer.status();
  (*writer)->RecordEvent(
      {"worker_lost", "worker:1", 40, "", -1, "step 40: lost the \"progress\" stream"});
  (*writer)->RecordEvent({"recovered", "ps:1", 100, "r-000001", 37, "goes on"});
  const std::string text = Read(dir + "/events.csv");
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << text;
  EXPECT_EQ(lines[0], "time_s,event,task,step,checkpoint,steps_lost,detail");
  EXPECT_THAT(lines[1],
              ::testing::EndsWith(
                  ",worker_lost,worker:1,40,,,\"step 40: lost the \"\"progress\"\" stream\""));
  EXPECT_THAT(lines[2], ::testing::EndsWith(",recovered,ps:1,100,r-000001,37,\"goes on\""));
}

TEST(ResultsWriterTest, AFullDiskFailsTheWriteNamingTheFileAndTheFix) {
  FaultInjectingFileSystem fs;
  ResultsWriterOptions options;
  options.fs = &fs;
  std::string dir = Dir("full_disk");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer =
      ResultsWriter::Create(dir, false, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  JobSpec spec;
  spec.set_job_id("j");

  fs.FailWrites("summary.json");
  absl::Status status = (*writer)->WriteSummary(spec, {}, {}, absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find(dir + "/summary.json"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("No space left on device"), absl::string_view::npos) << status;
  EXPECT_NE(status.message().find("--results"), absl::string_view::npos) << status;
  EXPECT_FALSE(std::filesystem::exists(dir + "/summary.json"));

  fs.FailWrites(".npy", EIO);
  ParameterSpec parameters;
  VariableDef* w = parameters.add_variables();
  w->set_name("layer0/weights");
  w->add_shape(2);
  std::vector<float> values = {1, 2};
  status = (*writer)->WriteParameters(parameters, {{"layer0/weights", absl::MakeSpan(values)}});
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(dir + "/params/layer0_weights.npy"), absl::string_view::npos)
      << status;
  EXPECT_EQ(fs.failed_writes(), 2);

  fs.ClearFaults();
  EXPECT_TRUE((*writer)->WriteSummary(spec, {}, {}, absl::Seconds(1)).ok());
}

TEST(ResultsWriterTest, AMetricsRowThatCannotBeWrittenIsReportedBySummary) {
  FaultInjectingFileSystem fs;
  ResultsWriterOptions options;
  options.fs = &fs;
  std::string dir = Dir("full_disk_metrics");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer =
      ResultsWriter::Create(dir, false, options);
  ASSERT_TRUE(writer.ok()) << writer.status();
  JobProgress progress;
  progress.set_worker(0);
  progress.set_step(1);
  (*writer)->RecordProgress(progress);
  fs.FailWrites("metrics.csv");
  progress.set_step(2);
  (*writer)->RecordProgress(progress);
  fs.ClearFaults();
  progress.set_step(3);
  (*writer)->RecordProgress(progress);

  JobSpec spec;
  absl::Status status = (*writer)->WriteSummary(spec, {progress}, {}, absl::Seconds(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(status.message().find(dir + "/metrics.csv"), absl::string_view::npos) << status;
  EXPECT_TRUE(std::filesystem::exists(dir + "/summary.json"));  // Written all the same.
  std::string metrics = Read(dir + "/metrics.csv");
  EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 3) << metrics;  // Header, 1, 3.
}

TEST(ResultsWriterTest, CreateNamesAFileItCannotStart) {
  FaultInjectingFileSystem fs;
  fs.FailWrites("eval.csv");
  ResultsWriterOptions options;
  options.fs = &fs;
  std::string dir = Dir("full_disk_eval");
  absl::StatusOr<std::unique_ptr<ResultsWriter>> writer =
      ResultsWriter::Create(dir, false, options);
  EXPECT_EQ(writer.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(writer.status().message().find(dir + "/eval.csv"), absl::string_view::npos)
      << writer.status();
}

}  // namespace
}  // namespace ps
