// Checkpoints as a user meets them, with psctl and the daemons as processes: a SYNC job resumed
// from a checkpoint on a fresh local cluster ends with the weights of the run that was never
// stopped; a damaged checkpoint is skipped, loudly, for the one before; a job with no
// checkpoint is refused with what to do.
#include <cstdint>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/psctl_testing.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A job of 2 workers whose steps take a couple of milliseconds (straggler delays, which change
// no value), with a checkpoint every 60 steps: SYNC with Adam, or `mode` with `optimizer`.
std::string JobJson(const std::string& id, const std::string& mode = "SYNC",
                    const std::string& optimizer = "ADAM") {
  return absl::StrCat(R"({
    "job_id": ")", id, R"(",
    "model": {"kind": "MLP", "hidden_sizes": [16]},
    "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 1200, "feature_dim": 8,
                           "num_classes": 3}},
    "optimizer": {"kind": ")", optimizer, R"("},
    "learning_rate": {"base": 0.01},
    "consistency": {"mode": ")", mode, R"("},
    "batch_size": 16,
    "steps": 600,
    "seed": 7,
    "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 1.5},
    "checkpoint": {"every_steps": 60, "keep": 20}
  })");
}

// Loads `path` with numpy (the header parsed with json, each tensor with numpy.frombuffer) and
// checks each tensor's sum against `expected` (by .npy file name). Skips where numpy is missing.
void ExpectNumpyReads(const std::string& path,
                      const std::map<std::string, std::vector<float>>& expected) {
  if (std::system("/usr/bin/python3 -c 'import numpy' 2>/dev/null") != 0) {
    GTEST_SKIP() << "python3-numpy is not installed (tools/setup.sh installs it)";
  }
  const std::string script = absl::StrCat(
      "import json, struct, numpy\n"
      "data = open('", path, "', 'rb').read()\n"
      "n = struct.unpack('<Q', data[:8])[0]\n"
      "header = json.loads(data[8:8 + n])\n"
      "for name, t in sorted(header.items()):\n"
      "  if name == '__metadata__': continue\n"
      "  b, e = t['data_offsets']\n"
      "  a = numpy.frombuffer(data[8 + n + b:8 + n + e], dtype='<f4').reshape(t['shape'])\n"
      "  print(name.replace('/', '_') + '.npy', repr(float(a.astype(numpy.float64).sum())))\n");
  const std::string script_path = path + ".py";
  std::ofstream(script_path) << script;
  const std::string out_path = path + ".out";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + script_path + " > " + out_path).c_str()), 0);
  std::map<std::string, double> sums;
  for (const std::string& line : Lines(ReadFile(out_path))) {
    const size_t space = line.find(' ');
    double sum = 0;
    ASSERT_TRUE(absl::SimpleAtod(line.substr(space + 1), &sum)) << line;
    sums[line.substr(0, space)] = sum;
  }
  ASSERT_EQ(sums.size(), expected.size()) << ReadFile(out_path);
  for (const auto& [name, values] : expected) {
    double sum = 0;
    for (float value : values) sum += value;
    EXPECT_NEAR(sums.at(name), sum, 1e-9 * (1 + std::abs(sum))) << name;
  }
}

struct Completed {
  std::string name;
  int64_t step = 0;
};

// The checkpoints psctl reported complete, in order.
std::vector<Completed> CompletedCheckpoints(const std::string& stdout_text) {
  std::vector<Completed> completed;
  const std::regex line(R"(checkpoint \d+ complete: (\S+), resumes at step (\d+))");
  for (std::sregex_iterator it(stdout_text.begin(), stdout_text.end(), line), end; it != end;
       ++it) {
    Completed c;
    c.name = (*it)[1];
    EXPECT_TRUE(absl::SimpleAtoi((*it)[2].str(), &c.step));
    completed.push_back(c);
  }
  return completed;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TestDir();
    checkpoints_ = dir_ + "/checkpoints";
    job_ = dir_ + "/job.json";
    std::ofstream(job_) << JobJson("resumable");
  }
  void TearDown() override {
    std::vector<pid_t> pids;
    ProcessesMentioning(dir_, &pids);
    for (pid_t pid : pids) kill(pid, SIGKILL);  // Left behind: already a failure; clean up.
  }

  // psctl local on a fresh 2-ps, 2-worker cluster; `extra` flags after the common ones.
  Psctl Local(const std::string& results, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"local", "--job=" + job_, "--results=" + results,
                                     "--checkpoint_dir=" + checkpoints_, "--device=cpu"};
    args.insert(args.end(), extra.begin(), extra.end());
    return Psctl(args, dir_);
  }

  // Deletes checkpoint `name` on every ps's disk.
  void Delete(const std::string& name) {
    for (int ps = 0; ps < 2; ++ps) {
      std::filesystem::remove_all(absl::StrCat(checkpoints_, "/ps-", ps, "/resumable/", name));
    }
  }

  std::string dir_, checkpoints_, job_;
};

TEST_F(CheckpointTest, AResumedSyncJobEndsWithTheWeightsOfOneNeverStoppedPastADamagedCheckpoint) {
  Psctl whole = Local(dir_ + "/whole");
  ASSERT_EQ(whole.Wait(), 0) << whole.Output();
  std::vector<Completed> completed = CompletedCheckpoints(whole.Stdout());
  // The run is taken apart at its first checkpoint C; the second is damaged.
  ASSERT_GE(completed.size(), 2u) << whole.Output();
  const Completed& c = completed[0];
  const Completed& damaged = completed[1];
  ASSERT_GT(c.step, 0);
  ASSERT_LT(damaged.step, 600);
  for (size_t i = 2; i < completed.size(); ++i) Delete(completed[i].name);
  {
    const std::string file =
        absl::StrCat(checkpoints_, "/ps-1/resumable/", damaged.name, "/shard-1-of-2.ckpt");
    std::fstream out(file, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(out.good()) << file;
    out.seekp(100);
    out.put('\x55');
  }

  Psctl resumed = Local(dir_ + "/resumed", {"--resume"});
  ASSERT_EQ(resumed.Wait(), 0) << resumed.Output();
  EXPECT_THAT(resumed.Stdout(),
              HasSubstr(absl::StrCat("checkpoint ", damaged.name, " cannot be restored: ")));
  EXPECT_THAT(resumed.Stdout(), HasSubstr("falling back to the previous complete checkpoint"));
  EXPECT_THAT(resumed.Stdout(), HasSubstr(absl::StrCat("from checkpoint ", c.name, " at step ",
                                                       c.step)));
  const std::string events = ReadFile(dir_ + "/resumed/events.csv");
  // time_s,event,task,step,checkpoint,steps_lost,detail.
  EXPECT_THAT(events, HasSubstr(absl::StrCat(",resumed,,", c.step, ",", c.name, ",,\"from ")));
  EXPECT_THAT(events, ::testing::ContainsRegex(
                          ",checkpoint_complete,,[0-9]+,[-0-9a-f]+,,\"checkpoint 1 complete: "));

  const auto actual = ResultParameters(dir_ + "/resumed");
  ExpectSameParameters(ResultParameters(dir_ + "/whole"), actual, 1e-6);
  EXPECT_THAT(ProcessesMentioning(dir_), IsEmpty());

  // The resumed run's last checkpoint is its final state: exported, it is those weights, as
  // .npy files and one safetensors file numpy reads.
  const std::vector<Completed> resumed_checkpoints = CompletedCheckpoints(resumed.Stdout());
  ASSERT_FALSE(resumed_checkpoints.empty());
  EXPECT_EQ(resumed_checkpoints.back().step, 600);
  Psctl exported({"export", "--checkpoint_dir=" + checkpoints_, "--job=resumable",
                  "--out=" + dir_ + "/exported"},
                 dir_);
  ASSERT_EQ(exported.Wait(), 0) << exported.Output();
  EXPECT_THAT(exported.Stdout(), HasSubstr(resumed_checkpoints.back().name));
  for (const auto& [name, values] : actual) {
    EXPECT_EQ(ReadNpy(dir_ + "/exported/" + name), values) << name;
  }
  ExpectNumpyReads(dir_ + "/exported/model.safetensors", actual);
}

// Another number of ps: a SYNC job (Adam) checkpointed on 2 ps whose daemons share one checkpoint
// directory resumes on 3 ps and on 1, each ps placing the variables' slices (cut into rows of at
// least 64 bytes, so that the layouts cut them differently) and their optimizer slots again from
// every shard's file, and ends with the weights of the run never stopped.
TEST_F(CheckpointTest, ASyncJobResumedOnAnotherNumberOfPsEndsWithTheWeightsOfOneNeverStopped) {
  std::string job = JobJson("resumable");
  job.replace(job.find("\"seed\": 7,"), 10, "\"seed\": 7, \"min_slice_bytes\": 64,");
  std::ofstream(job_) << job;
  Psctl whole = Local(dir_ + "/whole", {"--shared_checkpoint_dir"});
  ASSERT_EQ(whole.Wait(), 0) << whole.Output();
  const std::vector<Completed> completed = CompletedCheckpoints(whole.Stdout());
  ASSERT_GE(completed.size(), 3u) << whole.Output();
  const Completed c = completed[1];
  ASSERT_TRUE(std::filesystem::exists(
      absl::StrCat(checkpoints_, "/resumable/", c.name, "/shard-1-of-2.ckpt")));
  for (int num_ps : {3, 1}) {
    SCOPED_TRACE(absl::StrCat("on ", num_ps, " ps"));
    // Only C is left: the whole run's later checkpoints and the previous resumed run's are gone.
    for (const auto& entry :
         std::filesystem::directory_iterator(checkpoints_ + "/resumable")) {
      if (entry.path().filename() != c.name) std::filesystem::remove_all(entry.path());
    }
    const std::string results = absl::StrCat(dir_, "/resumed-", num_ps);
    Psctl resumed = Local(results, {"--shared_checkpoint_dir", "--resume",
                                    absl::StrCat("--ps=", num_ps)});
    ASSERT_EQ(resumed.Wait(), 0) << resumed.Output();
    EXPECT_THAT(resumed.Stdout(),
                HasSubstr(absl::StrCat("checkpoint ", c.name, " was taken on 2 ps and this "
                                       "cluster has ", num_ps)));
    EXPECT_THAT(resumed.Stdout(), HasSubstr(absl::StrCat("from checkpoint ", c.name,
                                                         " at step ", c.step)));
    ExpectSameParameters(ResultParameters(dir_ + "/whole"), ResultParameters(results), 1e-6);
  }
  EXPECT_THAT(ProcessesMentioning(dir_), IsEmpty());
}

// Without a shared directory each ps has only its own shard's file: resuming on another number
// of ps says what is missing and how to give it.
TEST_F(CheckpointTest, ResumingOnAnotherNumberOfPsWithoutEveryShardsFileSaysWhatToDo) {
  Psctl whole = Local(dir_ + "/whole");
  ASSERT_EQ(whole.Wait(), 0) << whole.Output();
  Psctl resumed = Local(dir_ + "/resumed", {"--resume", "--ps=1"});
  EXPECT_NE(resumed.Wait(), 0) << resumed.Output();
  EXPECT_THAT(resumed.Output(), HasSubstr("was taken on 2 ps and this cluster has 1"));
  EXPECT_THAT(resumed.Output(), HasSubstr("the same --checkpoint_dir"));
  EXPECT_THAT(ProcessesMentioning(dir_), IsEmpty());
}

// ALLREDUCE: the chief publishes the model for each checkpoint; with plain SGD (no optimizer
// state on the workers) a run resumed from one ends with the weights of one never stopped.
TEST_F(CheckpointTest, AResumedAllReduceJobEndsWithTheWeightsOfOneNeverStopped) {
  std::ofstream(job_) << JobJson("resumable", "ALLREDUCE", "SGD");
  Psctl whole = Local(dir_ + "/whole");
  ASSERT_EQ(whole.Wait(), 0) << whole.Output();
  std::vector<Completed> completed = CompletedCheckpoints(whole.Stdout());
  ASSERT_GE(completed.size(), 2u) << whole.Output();
  // Each at a multiple of 60 steps (where the chief published), the last at the end.
  for (const Completed& c : completed) EXPECT_EQ(c.step % 60, 0) << c.name;
  EXPECT_EQ(completed.back().step, 600);
  const Completed& c = completed[0];
  ASSERT_LT(c.step, 600);
  for (size_t i = 1; i < completed.size(); ++i) Delete(completed[i].name);

  Psctl resumed = Local(dir_ + "/resumed", {"--resume"});
  ASSERT_EQ(resumed.Wait(), 0) << resumed.Output();
  EXPECT_THAT(resumed.Stdout(), HasSubstr(absl::StrCat("from checkpoint ", c.name, " at step ",
                                                       c.step)));
  ExpectSameParameters(ResultParameters(dir_ + "/whole"), ResultParameters(dir_ + "/resumed"),
                       1e-6);
  EXPECT_THAT(ProcessesMentioning(dir_), IsEmpty());
}

// A sparse model: the shards' checkpoints hold its table's rows and their AdaGrad accumulators,
// so a SYNC run resumed from one ends where the run never stopped does.
TEST_F(CheckpointTest, AResumedSparseJobEndsAsOneNeverStopped) {
  // 600 LIBSVM rows of 4 features among ids 1 to 50 (near 2^40 once hashed), labelled by a rule.
  std::string text;
  for (int row = 0; row < 600; ++row) {
    const int first = 1 + (row * 7) % 47;
    absl::StrAppend(&text, (row * 13) % 5 < 2 ? "+1" : "-1", " ", first, ":1 ", first + 1, ":0.5 ",
                    first + 2, ":-0.25 ", 50, ":", (row % 3) * 0.5, "\n");
  }
  std::ofstream(dir_ + "/rows.libsvm") << text;
  std::ofstream(job_) << R"({
    "job_id": "resumable",
    "model": {"kind": "SPARSE_LOGISTIC_REGRESSION"},
    "data": {"libsvm": ")"
                      << dir_ << R"(/rows.libsvm"},
    "optimizer": {"kind": "ADAGRAD"},
    "learning_rate": {"base": 0.3},
    "consistency": {"mode": "SYNC"},
    "batch_size": 16,
    "steps": 300,
    "seed": 7,
    "stragglers": {"distribution": "UNIFORM", "mean_delay_ms": 1.5},
    "checkpoint": {"every_steps": 60, "keep": 20}
  })";
  Psctl whole = Local(dir_ + "/whole");
  ASSERT_EQ(whole.Wait(), 0) << whole.Output();
  std::vector<Completed> completed = CompletedCheckpoints(whole.Stdout());
  ASSERT_GE(completed.size(), 2u) << whole.Output();
  const Completed& c = completed[0];
  ASSERT_GT(c.step, 0);
  ASSERT_LT(c.step, 300);
  for (size_t i = 1; i < completed.size(); ++i) Delete(completed[i].name);

  Psctl resumed = Local(dir_ + "/resumed", {"--resume"});
  ASSERT_EQ(resumed.Wait(), 0) << resumed.Output();
  EXPECT_THAT(resumed.Stdout(),
              HasSubstr(absl::StrCat("from checkpoint ", c.name, " at step ", c.step)));
  ExpectSameParameters(ResultParameters(dir_ + "/whole"), ResultParameters(dir_ + "/resumed"),
                       1e-6);
  // The evaluation reads the rows: the same loss to the last digit printed.
  const std::string loss = "\"final_eval_loss\": ";
  const std::string whole_summary = ReadFile(dir_ + "/whole/summary.json");
  const std::string resumed_summary = ReadFile(dir_ + "/resumed/summary.json");
  const size_t at = whole_summary.find(loss);
  ASSERT_NE(at, std::string::npos) << whole_summary;
  const std::string value = whole_summary.substr(at, whole_summary.find(',', at) - at);
  EXPECT_THAT(resumed_summary, HasSubstr(value));
  EXPECT_THAT(ProcessesMentioning(dir_), IsEmpty());
}

TEST_F(CheckpointTest, ResumingAJobWithoutACheckpointIsRefusedSayingWhatToDo) {
  Psctl psctl = Local(dir_ + "/results", {"--resume"});
  EXPECT_EQ(psctl.Wait(), 2) << psctl.Output();  // NOT_FOUND: bad input.
  EXPECT_THAT(psctl.Stderr(), HasSubstr("has no complete checkpoint to resume from"));
  EXPECT_THAT(psctl.Stderr(), HasSubstr("submit it without --resume"));
  EXPECT_THAT(ProcessesMentioning(dir_), IsEmpty());
}

}  // namespace
}  // namespace ps
