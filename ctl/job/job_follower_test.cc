// psctl's progress line: the chief's step, loss and rate, and its evaluations: the validation
// split's where the job has one, the test split's where the chief evaluated it.
#include "ctl/job/job_follower.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cluster/cluster_spec.h"
#include "ctl/cluster/testing/fake_cluster_client.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

JobProgress Chief(int64_t step) {
  JobProgress chief;
  chief.set_worker(0);
  chief.set_step(step);
  chief.set_loss(0.5);
  chief.set_elapsed_seconds(2);
  return chief;
}

TEST(ProgressLineTest, ShowsTheValidationSplitAndTheFinalTestEvaluation) {
  JobSpec spec;
  spec.set_steps(100);
  JobProgress chief = Chief(40);
  EXPECT_THAT(ProgressLine(spec, {chief}, absl::Seconds(2)),
              HasSubstr("step 40/100 | loss 0.5000"));
  EXPECT_THAT(ProgressLine(spec, {chief}, absl::Seconds(2)), Not(HasSubstr("acc")));

  chief.mutable_eval()->set_loss(0.25);
  chief.mutable_eval()->set_accuracy(0.875);
  EXPECT_THAT(ProgressLine(spec, {chief}, absl::Seconds(2)),
              HasSubstr(" | eval loss 0.2500 acc 0.875"));

  // A job with a validation split: its evaluations, and the test split's once it has one.
  JobProgress validated = Chief(40);
  validated.mutable_validation()->set_loss(0.3);
  validated.mutable_validation()->set_accuracy(0.8);
  EXPECT_THAT(ProgressLine(spec, {validated}, absl::Seconds(2)),
              HasSubstr(" | validation loss 0.3000 acc 0.800"));
  EXPECT_THAT(ProgressLine(spec, {validated}, absl::Seconds(2)), Not(HasSubstr("eval loss")));
  *validated.mutable_eval() = chief.eval();
  EXPECT_THAT(ProgressLine(spec, {validated}, absl::Seconds(2)),
              HasSubstr(" | validation loss 0.3000 acc 0.800 | eval loss 0.2500 acc 0.875"));
}

// With a straggler, once the fast worker is done: the line goes on with the straggler's step and
// loss, psctl's clock and every example over it, and says when the time limit ends the job first.
TEST(ProgressLineTest, GoesOnAfterAWorkerFinishedAndCountsTheTimeLimit) {
  JobSpec spec;
  spec.set_steps(100);
  spec.set_time_limit_s(50);
  spec.mutable_consistency()->set_mode(ConsistencyConfig::ASYNC);
  JobProgress done = Chief(100);
  done.set_state(JobProgress::DONE);
  done.set_examples_per_second(100);
  done.set_elapsed_seconds(10);  // 1000 examples.
  JobProgress straggler = Chief(20);
  straggler.set_worker(1);
  straggler.set_loss(0.75);
  straggler.set_examples_per_second(20);
  straggler.set_elapsed_seconds(10);  // 200 examples.
  EXPECT_EQ(ProgressLine(spec, {done, straggler}, absl::Seconds(12)),
            "step 20/100 | loss 0.7500 | 100 ex/s | staleness 0.00 | 12.0s, "
            "ETA 38s (time_limit_s)");
  EXPECT_THAT(ProgressLine(spec, {done, straggler}, absl::Seconds(20)),
              HasSubstr("| 60 ex/s | staleness 0.00 | 20.0s, ETA 30s (time_limit_s)"));
  spec.clear_time_limit_s();  // The steps left at the pace so far: 80 at 20 in 12 s.
  EXPECT_THAT(ProgressLine(spec, {done, straggler}, absl::Seconds(12)), HasSubstr(", ETA 48s"));
}

// A worker whose streams the test scripts: each WatchJob sends its updates and ends with its
// status; GetWorkerStatus says whether the worker still runs the job.
class ScriptedWorker : public FakeClusterClient {
 public:
  using FakeClusterClient::FakeClusterClient;

  struct Stream {
    std::vector<JobProgress::State> updates;
    absl::Status end;
  };
  mutable std::deque<Stream> streams;
  bool still_runs = true;
  mutable int status_calls = 0;

  absl::Status WatchJob(int worker, const std::string& job_id, grpc::ClientContext*,
                        const std::function<void(const JobProgress&)>& on_progress)
      const override {
    if (streams.empty()) return absl::UnavailableError("no more streams");
    Stream stream = streams.front();
    streams.pop_front();
    for (JobProgress::State state : stream.updates) {
      JobProgress progress;
      progress.set_worker(worker);
      progress.set_job_id(job_id);
      progress.set_state(state);
      on_progress(progress);
    }
    return stream.end;
  }
  absl::StatusOr<WorkerStatus> GetWorkerStatus(int worker) const override {
    ++status_calls;
    if (!still_runs) return absl::UnavailableError(absl::StrCat("worker:", worker, " is down"));
    WorkerStatus status;
    JobProgress* job = status.add_jobs();
    job->set_job_id("j");
    job->set_state(JobProgress::RUNNING);
    return status;
  }
};

class FollowerTest : public ::testing::Test {
 protected:
  FollowerTest()
      : cluster_(*ClusterSpec::Parse(R"({"ps": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]})",
                                     "test")),
        client_(cluster_) {}

  const ClusterSpec cluster_;
  ScriptedWorker client_;
};

// psctl suspended past the worker's keepalive, or a network blip: the worker closed the stream
// while it runs the job on. psctl opens it again and follows the job to its end.
TEST_F(FollowerTest, AStreamThatBrokeWhileTheWorkerRunsOnIsOpenedAgain) {
  client_.streams = {{{JobProgress::RUNNING}, absl::UnavailableError("keepalive watchdog timeout")},
                     {{JobProgress::RUNNING, JobProgress::DONE}, absl::OkStatus()}};
  Follower follower(client_, "j", nullptr);
  ASSERT_TRUE(follower.WaitAllFinal(absl::Seconds(10)));
  EXPECT_EQ(follower.Last()[0].state(), JobProgress::DONE);
  EXPECT_TRUE(follower.Gone().empty());
}

TEST_F(FollowerTest, AWorkerThatDoesNotAnswerIsGone) {
  client_.still_runs = false;
  client_.streams = {{{JobProgress::RUNNING}, absl::UnavailableError("Socket closed")}};
  Follower follower(client_, "j", nullptr);
  ASSERT_TRUE(follower.WaitAllFinal(absl::Seconds(10)));
  EXPECT_EQ(follower.Last()[0].state(), JobProgress::FAILED);
  EXPECT_EQ(follower.Gone(), std::set<int>{0});
  EXPECT_THAT(follower.Last()[0].error(), HasSubstr("lost the progress stream: Socket closed"));
}

// A stream that keeps breaking with nothing new on it is given up after a few tries.
TEST_F(FollowerTest, AStreamThatBreaksOverAndOverIsGivenUp) {
  client_.streams.push_back({{JobProgress::RUNNING}, absl::UnavailableError("broken")});
  for (int i = 0; i < 10; ++i) {
    client_.streams.push_back({{}, absl::UnavailableError("broken")});
  }
  Follower follower(client_, "j", nullptr);
  ASSERT_TRUE(follower.WaitAllFinal(absl::Seconds(10)));
  EXPECT_EQ(follower.Gone(), std::set<int>{0});
  EXPECT_EQ(client_.status_calls, 3);
  EXPECT_EQ(client_.streams.size(), 7u) << "four of the 11 streams opened";
}

}  // namespace
}  // namespace ps
