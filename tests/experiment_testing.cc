#include "tests/experiment_testing.h"

#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_system.h"
#include "common/process/subprocess.h"

namespace ps {
namespace {

std::vector<std::string> SplitCsvLine(const std::string& line) {
  std::vector<std::string> cells(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      cells.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      cells.emplace_back();
    } else {
      cells.back() += c;
    }
  }
  return cells;
}

}  // namespace

PsctlRun RunPsctl(const std::vector<std::string>& args, const std::string& dir,
                  absl::Duration timeout) {
  static int runs = 0;
  std::string output_path = absl::StrCat(dir, "/psctl-", ++runs, ".out");
  std::vector<std::string> argv = {"ctl/psctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  PsctlRun run;
  absl::StatusOr<Subprocess> process = Subprocess::Start(argv, output_path);
  if (!process.ok()) {
    ADD_FAILURE() << process.status();
    return run;
  }
  std::optional<int> code = process->Wait(timeout);
  run.exit_code = code.value_or(-1);
  run.output = ReadFile(output_path);
  if (!code.has_value()) {
    ADD_FAILURE() << "psctl still running after " << timeout << ":\n" << run.output;
  }
  return run;
}

std::string TestDir() {
  std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/",
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::create_directories(dir);
  return dir;
}

std::string ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text = FileSystem::Default()->ReadFile(path);
  return text.ok() ? *std::move(text) : "";
}

void WriteFile(const std::string& path, const std::string& text) {
  absl::Status written = FileSystem::Default()->WriteFileAtomically(path, text);
  EXPECT_TRUE(written.ok()) << written;
}

nlohmann::json ReadSummary(const std::string& point_dir) {
  return nlohmann::json::parse(ReadFile(point_dir + "/summary.json"), nullptr,
                               /*allow_exceptions=*/false);
}

std::vector<std::map<std::string, std::string>> ReadCsvRows(const std::string& path) {
  std::vector<std::string> lines = absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty());
  std::vector<std::map<std::string, std::string>> rows;
  if (lines.empty()) return rows;
  std::vector<std::string> header = SplitCsvLine(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = SplitCsvLine(lines[i]);
    EXPECT_EQ(cells.size(), header.size()) << path << ": " << lines[i];
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < header.size() && c < cells.size(); ++c) row[header[c]] = cells[c];
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace ps
