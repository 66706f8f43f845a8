#include "tests/psctl_testing.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/substitute.h"
#include "absl/time/clock.h"

namespace ps {

std::string ReadFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

std::vector<float> ReadNpy(const std::string& path) {
  const std::string bytes = ReadFile(path);
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return {};
  const size_t header = static_cast<unsigned char>(bytes[8]) |
                        (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  std::vector<float> values((bytes.size() - 10 - header) / sizeof(float));
  std::memcpy(values.data(), bytes.data() + 10 + header, values.size() * sizeof(float));
  return values;
}

std::map<std::string, std::vector<float>> ResultParameters(const std::string& results) {
  std::map<std::string, std::vector<float>> parameters;
  for (const auto& entry : std::filesystem::directory_iterator(results + "/params")) {
    parameters[entry.path().filename().string()] = ReadNpy(entry.path().string());
  }
  return parameters;
}

void ExpectSameParameters(const std::map<std::string, std::vector<float>>& expected,
                          const std::map<std::string, std::vector<float>>& actual,
                          float tolerance) {
  ASSERT_FALSE(expected.empty());
  ASSERT_EQ(actual.size(), expected.size());
  for (const auto& [name, values] : expected) {
    const std::vector<float>& got = actual.at(name);
    ASSERT_EQ(got.size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_NEAR(got[i], values[i], tolerance) << name << "[" << i << "]";
    }
  }
}

std::string TestDir() {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::string> ProcessesMentioning(const std::string& text, std::vector<pid_t>* pids) {
  std::vector<std::string> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {"cannot read /proc"};
  while (dirent* entry = readdir(proc)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &pid) || pid == getpid()) continue;
    std::string command = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
    std::replace(command.begin(), command.end(), '\0', ' ');
    if (!absl::StrContains(command, text)) continue;
    found.push_back(absl::StrCat(pid, ": ", command));
    if (pids != nullptr) pids->push_back(pid);
  }
  closedir(proc);
  return found;
}

Psctl::Psctl(const std::vector<std::string>& args, const std::string& dir) {
  static int runs = 0;
  std::string name = absl::StrCat(dir, "/psctl-", ++runs);
  stdout_path_ = name + ".out";
  stderr_path_ = name + ".err";
  std::vector<std::string> argv = {"/bin/sh", "-c", R"(exec "$@" 2>"$PSCTL_STDERR")", "sh",
                                   kPsctl};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<Subprocess> process =
      Subprocess::Start(argv, stdout_path_, {"PSCTL_STDERR=" + stderr_path_});
  EXPECT_TRUE(process.ok()) << process.status();
  if (process.ok()) process_ = *std::move(process);
}

bool Psctl::Ended() {
  if (!exit_code_.has_value() && process_.has_value()) {
    exit_code_ = process_->Wait(absl::ZeroDuration());
  }
  return exit_code_.has_value();
}

int Psctl::Wait(absl::Duration timeout) {
  if (exit_code_.has_value()) return *exit_code_;
  if (!process_.has_value()) return -1;
  std::optional<int> code = process_->Wait(timeout);
  if (!code.has_value()) {
    ADD_FAILURE() << "psctl still running after " << timeout << "; stdout:\n"
                  << Stdout() << "stderr:\n"
                  << Stderr();
    process_.reset();  // Kills it.
    return -1;
  }
  exit_code_ = code;  // Waiting again answers the same.
  return *code;
}

std::string Psctl::Output() const {
  return absl::StrCat("stdout:\n", Stdout(), "stderr:\n", Stderr());
}

std::string JobJson(const std::string& id, int64_t steps, const std::string& consistency,
                    const std::string& extra_fields) {
  return absl::Substitute(R"({"job_id": "$0",
  "model": {"kind": "SOFTMAX_REGRESSION"},
  "data": {"synthetic": {"kind": "GAUSSIAN_MIXTURE", "num_examples": 4000, "feature_dim": 16,
                         "num_classes": 4},
           "test_fraction": 0.2},
  "learning_rate": {"base": 0.2},
  "consistency": $1,
  "batch_size": 32, "steps": $2, "eval_interval": 100, "seed": 7, "time_limit_s": 120,
  "min_slice_bytes": 64$3}
)",
                          id, consistency, steps, extra_fields);
}

std::string HandoutJobJson(const std::string& id, int epochs, const std::string& consistency,
                           const std::string& extra_fields) {
  nlohmann::json job = nlohmann::json::parse(JobJson(id, 0, consistency, extra_fields));
  job.erase("steps");
  job["epochs"] = epochs;
  job["data"]["sharding"] = "DYNAMIC";
  return job.dump();
}

std::string EveryBatchUsedOnce(int epochs) {
  return absl::StrCat("data handed out: ", epochs, " of ", epochs, " epochs done, ",
                      epochs * kHandoutBatchesPerEpoch, " batches trained (",
                      kHandoutBatchesPerEpoch,
                      " an epoch), 0 held by workers, 0 given back and waiting (");
}

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  int parsed = 0;
  return value != nullptr && absl::SimpleAtoi(value, &parsed) ? parsed : fallback;
}

namespace {

// metrics.csv's rows as (time_s, step), the header skipped.
std::vector<std::pair<double, int64_t>> MetricsSteps(const std::string& metrics) {
  std::vector<std::pair<double, int64_t>> rows;
  for (const std::string& line : Lines(ReadFile(metrics))) {
    std::vector<std::string> fields = absl::StrSplit(line, ',');
    double time_s = 0;
    int64_t step = 0;
    if (fields.size() < 3 || !absl::SimpleAtod(fields[0], &time_s) ||
        !absl::SimpleAtoi(fields[2], &step)) {
      continue;
    }
    rows.emplace_back(time_s, step);
  }
  return rows;
}

}  // namespace

int64_t LastStepAt(const std::string& metrics, double at_s) {
  int64_t last = -1;
  for (const auto& [time_s, step] : MetricsSteps(metrics)) {
    if (time_s <= at_s) last = std::max(last, step);
  }
  return last;
}

double FirstStepPast(const std::string& metrics, double after_s, int64_t step) {
  for (const auto& [time_s, row_step] : MetricsSteps(metrics)) {
    if (time_s >= after_s && row_step > step) return time_s;
  }
  return -1;
}

std::string WriteJob(const std::string& dir, const std::string& name, const std::string& json) {
  std::string path = absl::StrCat(dir, "/", name, ".json");
  std::ofstream(path) << json;
  return path;
}

nlohmann::json ReadJson(const std::string& path) {
  return nlohmann::json::parse(ReadFile(path), nullptr, /*allow_exceptions=*/false);
}

std::vector<std::vector<std::string>> ReadCsv(const std::string& path) {
  std::vector<std::vector<std::string>> rows;
  for (const std::string& line : Lines(ReadFile(path))) rows.push_back(absl::StrSplit(line, ','));
  return rows;
}

int64_t Column(const std::vector<std::string>& row, size_t column) {
  int64_t value = -1;
  if (column < row.size()) {
    EXPECT_TRUE(absl::SimpleAtoi(row[column], &value)) << row[column];
  }
  return value;
}

std::vector<int64_t> NpyShape(const std::string& path) {
  std::string bytes = ReadFile(path);
  if (bytes.size() < 10 || bytes.compare(0, 8, std::string("\x93NUMPY\x01\x00", 8)) != 0) {
    ADD_FAILURE() << path << ": not a .npy file (version 1.0)";
    return {};
  }
  size_t header_length = static_cast<unsigned char>(bytes[8]) |
                         static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
  EXPECT_EQ((10 + header_length) % 64, 0u) << path;
  std::string header = bytes.substr(10, header_length);
  EXPECT_EQ(header.back(), '\n') << path;
  EXPECT_THAT(header, ::testing::HasSubstr("'descr': '<f4'")) << path;
  EXPECT_THAT(header, ::testing::HasSubstr("'fortran_order': False")) << path;
  std::smatch match;
  if (!std::regex_search(header, match, std::regex(R"('shape': \(([0-9, ]*)\))"))) {
    ADD_FAILURE() << path << ": no shape in " << header;
    return {};
  }
  std::vector<int64_t> shape;
  int64_t count = 1;
  for (absl::string_view dimension : absl::StrSplit(match[1].str(), ',', absl::SkipWhitespace())) {
    int64_t value = 0;
    EXPECT_TRUE(absl::SimpleAtoi(dimension, &value)) << header;
    shape.push_back(value);
    count *= value;
  }
  EXPECT_EQ(bytes.size(), 10 + header_length + 4 * count) << path;
  return shape;
}

bool WaitForLines(const std::string& path, size_t lines, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (Lines(ReadFile(path)).size() < lines) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return true;
}

}  // namespace ps
