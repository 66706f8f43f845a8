// What the experiment tests share: psctl run as a process, and the files of a sweep's results
// directory read back.
#ifndef PS_TESTS_EXPERIMENT_TESTING_H_
#define PS_TESTS_EXPERIMENT_TESTING_H_

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/time/time.h"

namespace ps {

struct PsctlRun {
  int exit_code = -1;  // -1: still running at the timeout (then killed).
  std::string output;  // stdout and stderr together.
};

// Runs ctl/psctl (from the test's runfiles) with `args`, its output in `dir`.
PsctlRun RunPsctl(const std::vector<std::string>& args, const std::string& dir,
                  absl::Duration timeout);

// The running test's own directory under TEST_TMPDIR, created.
std::string TestDir();

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& text);

// A point's summary.json; null when missing or unreadable.
nlohmann::json ReadSummary(const std::string& point_dir);

// The rows of a CSV file with a header (RFC 4180 quoting), each as column -> value.
std::vector<std::map<std::string, std::string>> ReadCsvRows(const std::string& path);

}  // namespace ps

#endif  // PS_TESTS_EXPERIMENT_TESTING_H_
