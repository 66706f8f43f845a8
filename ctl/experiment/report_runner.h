// psctl report: runs tools/report.py (matplotlib, Debian's python3-matplotlib) on a sweep's
// results directory, which writes report.md and plots/*.png there; or tools/compare_runs.py on
// runs' results directories, which prints them side by side by their manifests, and for a
// single run tools/run_report.py, which draws it.
#ifndef PS_CTL_EXPERIMENT_REPORT_RUNNER_H_
#define PS_CTL_EXPERIMENT_REPORT_RUNNER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ps {

struct ReportOptions {
  // tools/report.py (tools/compare_runs.py is found beside it); empty: the copy in the Bazel
  // runfiles of the environment or of this program, a release's, else the current directory's.
  std::string script;
  std::string python = "/usr/bin/python3";  // Debian's, where python3-matplotlib installs.
};

// Writes <results_dir>/report.md and <results_dir>/plots/. Returns the script's output (the
// files it wrote). NOT_FOUND when the directory holds no sweep.csv, or python or the script is
// missing; FAILED_PRECONDITION when matplotlib is missing (naming tools/setup.sh); INTERNAL
// with the script's output when it fails otherwise.
absl::StatusOr<std::string> RunReport(const std::string& results_dir, const ReportOptions& options);

// Runs side by side (ctl/job/run_manifest.h): a markdown table of what each run was and what it
// reached, and the JobSpec settings that differ, returned as the script's output. NOT_FOUND
// when a directory holds no manifest.json, or python or the script is missing; INTERNAL with
// the script's output when it fails.
absl::StatusOr<std::string> CompareRuns(const std::vector<std::string>& run_dirs,
                                        const ReportOptions& options);

// One run's pictures (tools/run_report.py): <run_dir>/report.png (each worker's loss, rate and
// staleness distribution, the evaluations' accuracy) and report.html beside it. Returns the
// script's output (the files it wrote); errors as RunReport's, NOT_FOUND naming a directory
// without metrics.csv.
absl::StatusOr<std::string> DrawRun(const std::string& run_dir, const ReportOptions& options);

}  // namespace ps

#endif  // PS_CTL_EXPERIMENT_REPORT_RUNNER_H_
