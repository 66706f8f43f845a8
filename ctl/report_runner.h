// psctl report: runs tools/report.py (matplotlib, Debian's python3-matplotlib) on a sweep's
// results directory, which writes report.md and plots/*.png there.
#ifndef PS_CTL_REPORT_RUNNER_H_
#define PS_CTL_REPORT_RUNNER_H_

#include <string>

#include "absl/status/statusor.h"

namespace ps {

struct ReportOptions {
  // tools/report.py; empty: the copy in this program's Bazel runfiles, else the one under the
  // current directory.
  std::string script;
  std::string python = "/usr/bin/python3";  // Debian's, where python3-matplotlib installs.
};

// Writes <results_dir>/report.md and <results_dir>/plots/. Returns the script's output (the
// files it wrote). NOT_FOUND when the directory holds no sweep.csv, or python or the script is
// missing; FAILED_PRECONDITION when matplotlib is missing (naming tools/setup.sh); INTERNAL
// with the script's output when it fails otherwise.
absl::StatusOr<std::string> RunReport(const std::string& results_dir, const ReportOptions& options);

}  // namespace ps

#endif  // PS_CTL_REPORT_RUNNER_H_
