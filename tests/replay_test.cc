// psctl replay as a user runs it: a 4-worker ASYNC run recorded with record_apply_log on a local
// cluster of 2 ps, replayed on a fresh one, ends with the recorded weights bit for bit and
// records the same log; a log with one entry changed does not replay to them.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = TestDir(); }
  void TearDown() override {
    std::vector<pid_t> pids;
    ProcessesMentioning(dir_, &pids);
    for (pid_t pid : pids) kill(pid, SIGKILL);  // Left behind: already a failure; clean up.
  }
  // The raw bytes of every params/*.npy of a results directory.
  static std::map<std::string, std::string> Parameters(const std::string& results) {
    std::map<std::string, std::string> files;
    for (const auto& entry : std::filesystem::directory_iterator(results + "/params")) {
      files[entry.path().filename().string()] = ReadFile(entry.path().string());
    }
    return files;
  }
  std::string dir_;
};

TEST_F(ReplayTest, AReplayedAsyncRunEndsWithTheRecordedWeightsBitForBit) {
  // ASYNC on 4 workers with uneven steps (straggler delays): the order of updates is timing's.
  const std::string job = WriteJob(
      dir_, "job",
      JobJson("replayed", 150, R"({"mode": "ASYNC", "staleness_learning_rate": "INVERSE"})",
              R"(, "record_apply_log": true,
                 "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 2})"));
  const std::string recorded = dir_ + "/recorded";
  Psctl run({"local", "--job=" + job, "--results=" + recorded, "--ps=2", "--workers=4",
             "--device=cpu"},
            dir_);
  ASSERT_EQ(run.Wait(), 0) << run.Output();
  // Each shard's log: every worker's updates (150 each), and its pulls.
  for (int ps = 0; ps < 2; ++ps) {
    const std::vector<std::vector<std::string>> rows =
        ReadCsv(recorded + "/apply_log/ps-" + std::to_string(ps) + ".csv");
    int applies = 0, pulls = 0;
    for (size_t r = 1; r < rows.size(); ++r) {
      applies += rows[r][0] == "APPLY";
      pulls += rows[r][0] == "PULL";
    }
    EXPECT_EQ(applies, 4 * 150) << ps;
    EXPECT_GE(pulls, 4 * 150) << ps;
  }

  const std::string replayed = dir_ + "/replayed";
  Psctl replay({"replay", recorded, "--results=" + replayed, "--device=cpu"}, dir_);
  ASSERT_EQ(replay.Wait(), 0) << replay.Output();
  EXPECT_THAT(replay.Stdout(), HasSubstr("in their recorded order"));
  EXPECT_EQ(Parameters(replayed), Parameters(recorded));
  for (int ps = 0; ps < 2; ++ps) {
    const std::string log = "/apply_log/ps-" + std::to_string(ps) + ".csv";
    EXPECT_EQ(ReadFile(replayed + log), ReadFile(recorded + log)) << log;
  }
  EXPECT_EQ(ReadJson(replayed + "/summary.json")["state"], "DONE");

  // One entry changed on ps:0, an update's learning rate doubled: not the recorded run.
  const std::string log_path = recorded + "/apply_log/ps-0.csv";
  std::vector<std::string> lines = absl::StrSplit(ReadFile(log_path), '\n');
  bool changed_one = false;
  for (size_t i = 1; i < lines.size() && !changed_one; ++i) {
    std::vector<std::string> fields = absl::StrSplit(lines[i], ',');
    if (fields.size() == 7 && fields[0] == "APPLY") {
      fields[5] = std::to_string(2 * std::stod(fields[5]));
      lines[i] = absl::StrJoin(fields, ",");
      changed_one = true;
    }
  }
  ASSERT_TRUE(changed_one) << "no update in the log";
  std::ofstream(log_path) << absl::StrJoin(lines, "\n");
  Psctl changed({"replay", recorded, "--results=" + dir_ + "/changed", "--device=cpu"}, dir_);
  const int code = changed.Wait();
  EXPECT_TRUE(code != 0 || Parameters(dir_ + "/changed") != Parameters(recorded))
      << changed.Output();
  EXPECT_THAT(ProcessesMentioning(dir_), IsEmpty());
}

TEST_F(ReplayTest, ARunThatDidNotRecordIsRefusedSayingWhatToDo) {
  const std::string job = WriteJob(dir_, "job", JobJson("plain", 20, R"({"mode": "ASYNC"})"));
  Psctl run({"local", "--job=" + job, "--results=" + dir_ + "/plain", "--device=cpu"}, dir_);
  ASSERT_EQ(run.Wait(), 0) << run.Output();
  Psctl replay({"replay", dir_ + "/plain"}, dir_);
  EXPECT_EQ(replay.Wait(), 2) << replay.Output();
  EXPECT_THAT(replay.Stderr(), HasSubstr("did not record its apply log"));
  EXPECT_THAT(replay.Stderr(), HasSubstr("\"record_apply_log\": true"));
}

}  // namespace
}  // namespace ps
