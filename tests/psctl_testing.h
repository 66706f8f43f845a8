// What the tests that run psctl as a process share: running it, reading what it wrote, and
// finding the processes a test started.
#ifndef PS_TESTS_PSCTL_TESTING_H_
#define PS_TESTS_PSCTL_TESTING_H_

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/subprocess.h"

namespace ps {

// The binaries, relative to the test's working directory (the runfiles root).
inline constexpr char kPsctl[] = "ctl/psctl";
inline constexpr char kPsServer[] = "server/ps_server";
inline constexpr char kPsWorker[] = "worker/ps_worker";
inline constexpr absl::Duration kPsctlTimeout = absl::Seconds(60);

std::string ReadFile(const std::string& path);
// `text` split at line breaks, empty lines dropped.
std::vector<std::string> Lines(const std::string& text);

// The float32 values of a .npy file written by common/npy.cc (version 1.0); empty if it is not.
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
