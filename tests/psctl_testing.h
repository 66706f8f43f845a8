// What the tests that run psctl as a process share: running it, reading what it wrote, and
// finding the processes a test started.
#ifndef PS_TESTS_PSCTL_TESTING_H_
#define PS_TESTS_PSCTL_TESTING_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"
#include "common/process/subprocess.h"

namespace ps {

// The binaries, relative to the test's working directory (the runfiles root).
inline constexpr char kPsctl[] = "ctl/psctl";
inline constexpr char kPsServer[] = "server/ps_server";
inline constexpr char kPsWorker[] = "worker/ps_worker";
inline constexpr absl::Duration kPsctlTimeout = absl::Seconds(60);

std::string ReadFile(const std::string& path);
// `text` split at line breaks, empty lines dropped.
std::vector<std::string> Lines(const std::string& text);

// The float32 values of a .npy file written by ctl/export/npy.cc (version 1.0); empty if it is not.
std::vector<float> ReadNpy(const std::string& path);
// Every parameter file of a results directory (params/*.npy), by file name.
std::map<std::string, std::vector<float>> ResultParameters(const std::string& results);
// Expects `actual` to hold `expected`'s parameters, each value within `tolerance`.
void ExpectSameParameters(const std::map<std::string, std::vector<float>>& expected,
                          const std::map<std::string, std::vector<float>>& actual,
                          float tolerance);

// The running test's own directory under TEST_TMPDIR: every path a test hands psctl or a
// daemon lies in it, so that a process mentioning it was started for this test.
std::string TestDir();

// Processes other than this one whose command line mentions `text`, as "PID: command line".
std::vector<std::string> ProcessesMentioning(const std::string& text,
                                             std::vector<pid_t>* pids = nullptr);

// A small job: softmax regression on a 4-class Gaussian mixture, a fraction of a second per
// hundred steps. `consistency` and `extra_fields` (", \"name\": value ...") are JSON text.
std::string JobJson(const std::string& id, int64_t steps,
                    const std::string& consistency = R"({"mode": "SYNC"})",
                    const std::string& extra_fields = "");
// JobJson's job with its data handed out (data.sharding DYNAMIC) for `epochs` epochs of
// kHandoutBatchesPerEpoch batches (its 3200 training examples in batches of 32), no `steps`.
inline constexpr int kHandoutBatchesPerEpoch = 100;
std::string HandoutJobJson(const std::string& id, int epochs, const std::string& consistency,
                           const std::string& extra_fields = "");
// What `psctl status` says of a HandoutJobJson job of `epochs` that used every batch once and
// holds none.
std::string EveryBatchUsedOnce(int epochs);
// Writes `json` to `dir`/`name`.json and returns that path.
std::string WriteJob(const std::string& dir, const std::string& name, const std::string& json);
// The file's JSON; a discarded value when it does not parse.
nlohmann::json ReadJson(const std::string& path);
// Rows of a CSV file, the header first.
std::vector<std::vector<std::string>> ReadCsv(const std::string& path);
// The whole number in `row`[`column`] (a test failure when it is not one), or -1.
int64_t Column(const std::vector<std::string>& row, size_t column);
// The shape in a .npy file's header, after checking the header (NumPy format 1.0, little-endian
// float32, C order, padded to 64 bytes) and that the data fills the rest of the file.
std::vector<int64_t> NpyShape(const std::string& path);
// The environment variable `name` as a whole number, or `fallback` when unset or not one.
int EnvInt(const char* name, int fallback);
// A results directory's metrics.csv (time_s, worker, step, ...): the largest step recorded at or
// before `at_s` (-1 if none), and the time of the first row after `after_s` whose step is past
// `step` (-1 if none).
int64_t LastStepAt(const std::string& metrics, double at_s);
double FirstStepPast(const std::string& metrics, double after_s, int64_t step);
// Waits until `path` has at least `lines` lines.
bool WaitForLines(const std::string& path, size_t lines, absl::Duration timeout);

// One psctl run; stdout and stderr go to separate files in `dir`.
class Psctl {
 public:
  Psctl(const std::vector<std::string>& args, const std::string& dir);

  pid_t pid() const { return process_.has_value() ? process_->pid() : -1; }
  // Whether psctl has exited (its exit code is then kept for Wait).
  bool Ended();
  // The exit code, or -1 (a test failure) after killing a psctl still running at `timeout`.
  int Wait(absl::Duration timeout = kPsctlTimeout);
  std::string Stdout() const { return ReadFile(stdout_path_); }
  std::string Stderr() const { return ReadFile(stderr_path_); }
  std::string Output() const;

 private:
  std::string stdout_path_, stderr_path_;
  std::optional<Subprocess> process_;
  std::optional<int> exit_code_;  // Once Ended() saw it exit.
};

}  // namespace ps

#endif  // PS_TESTS_PSCTL_TESTING_H_
