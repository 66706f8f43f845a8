#include "ctl/experiment/report_runner.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/process/subprocess.h"

namespace ps {
namespace {

// Exit status of tools/report.py and tools/run_report.py when matplotlib cannot be imported.
constexpr int kMissingMatplotlib = 3;
constexpr char kReportScript[] = "report.py";
constexpr char kCompareScript[] = "compare_runs.py";  // Beside report.py.
constexpr char kRunScript[] = "run_report.py";        // Beside report.py.

// tools/<name>: beside --report_script when it is given; else the first copy found in the
// runfiles Bazel names in the environment (bazel test and bazel run: the caller's tree, complete
// before the caller starts), this program's own runfiles tree, a release's layout (/usr/bin/psctl,
// /usr/share/ps/tools/), and last the current directory's tools/.
std::string FindScript(const std::string& flag, const std::string& name) {
  if (!flag.empty()) {
    return name == kReportScript ? flag
                                 : (std::filesystem::path(flag).parent_path() / name).string();
  }
  const std::string relative = std::string("tools/") + name;
  std::vector<std::filesystem::path> candidates;
  for (const char* variable : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    const char* dir = std::getenv(variable);
    if (dir != nullptr && *dir != '\0') {
      candidates.push_back(std::filesystem::path(dir) / "ps" / relative);
    }
  }
  std::error_code error;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(std::filesystem::path(self.string() + ".runfiles/ps") / relative);
    candidates.push_back(self.parent_path().parent_path() / "share/ps" / relative);
  }
  for (const std::filesystem::path& candidate : candidates) {
    if (std::filesystem::exists(candidate, error)) return candidate.string();
  }
  return relative;
}

// Runs `python script args...`, its output in `log` meanwhile; returns the output, or the
// errors RunReport and CompareRuns name.
absl::StatusOr<std::string> RunScript(const std::string& script,
                                      const std::vector<std::string>& args, const std::string& log,
                                      const ReportOptions& options) {
  std::error_code error;
  if (!std::filesystem::exists(script, error)) {
    return absl::NotFoundError(absl::StrCat(
        "cannot find the report script ", script,
        ": run psctl from the repository's root, or pass --report_script=PATH/tools/report.py"));
  }
  if (access(options.python.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("psctl report needs ", options.python,
                                            ": run tools/setup.sh (it installs python3 and "
                                            "python3-matplotlib), or pass --python"));
  }
  std::vector<std::string> command = {options.python, script};
  command.insert(command.end(), args.begin(), args.end());
  absl::StatusOr<Subprocess> process = Subprocess::Start(command, log);
  if (!process.ok()) return process.status();
  std::optional<int> code = process->Wait(absl::InfiniteDuration());
  std::string output = process->Output();
  std::filesystem::remove(log, error);
  if (code == kMissingMatplotlib) return absl::FailedPreconditionError(output);
  if (code != 0) {
    return absl::InternalError(
        absl::StrCat(script, " failed (exit code ", code.value_or(-1), "):\n", output));
  }
  return output;
}

}  // namespace

absl::StatusOr<std::string> RunReport(const std::string& results_dir,
                                      const ReportOptions& options) {
  std::error_code error;
  if (!std::filesystem::exists(results_dir + "/sweep.csv", error)) {
    return absl::NotFoundError(absl::StrCat(
        results_dir, " holds no sweep.csv: give the results directory of `psctl experiment`"));
  }
  return RunScript(FindScript(options.script, kReportScript), {results_dir},
                   results_dir + "/report.log", options);
}

absl::StatusOr<std::string> CompareRuns(const std::vector<std::string>& run_dirs,
                                        const ReportOptions& options) {
  std::error_code error;
  for (const std::string& dir : run_dirs) {
    if (!std::filesystem::exists(dir + "/manifest.json", error)) {
      return absl::NotFoundError(absl::StrCat(
          dir, " holds no manifest.json: give results directories of runs (psctl local, submit "
          "or experiment's points)"));
    }
  }
  const std::string script = FindScript(options.script, kCompareScript);
  const std::string log =
      (std::filesystem::temp_directory_path(error) / absl::StrCat("psctl-compare-", getpid()))
          .string();
  return RunScript(script, run_dirs, log, options);
}

absl::StatusOr<std::string> DrawRun(const std::string& run_dir, const ReportOptions& options) {
  std::error_code error;
  if (!std::filesystem::exists(run_dir + "/metrics.csv", error)) {
    return absl::NotFoundError(
        absl::StrCat(run_dir, " holds no metrics.csv: give a run's results directory"));
  }
  return RunScript(FindScript(options.script, kRunScript), {run_dir}, run_dir + "/report.log",
                   options);
}

}  // namespace ps
