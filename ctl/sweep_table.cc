#include "ctl/sweep_table.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ps {
namespace {

// The summary.json fields copied into the table, in column order.
constexpr const char* kSummaryColumns[] = {"steps",
                                           "wall_time_s",
                                           "examples_per_second",
                                           "final_train_loss",
                                           "final_eval_loss",
                                           "final_eval_accuracy",
                                           "staleness_mean",
                                           "staleness_max",
                                           "dropped_gradients"};

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string Cell(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return absl::StrCat(value.get<double>());
  return value.dump();
}

}  // namespace

nlohmann::json ReadSummary(const std::string& point_dir) {
  std::ifstream file(point_dir + "/summary.json");
  if (!file) return nullptr;
  std::stringstream text;
  text << file.rdbuf();
  nlohmann::json summary = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  return summary.is_object() ? summary : nullptr;
}

std::optional<double> TimeToTarget(const std::string& eval_csv_path, double target_loss) {
  std::ifstream file(eval_csv_path);
  std::string line;
  if (!std::getline(file, line)) return std::nullopt;  // The header: time_s,step,loss,...
  while (std::getline(file, line)) {
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    double time_s = 0, loss = 0;
    if (cells.size() >= 3 && absl::SimpleAtod(cells[0], &time_s) &&
        absl::SimpleAtod(cells[2], &loss) && loss <= target_loss) {
      return time_s;
    }
  }
  return std::nullopt;
}

absl::Status WriteSweepTable(const std::string& path, const Sweep& sweep,
                             const std::vector<SweepPoint>& points,
                             const std::string& results_dir) {
  const std::vector<std::string> settings = SettingPaths(sweep);
  auto is_setting = [&settings](const std::string& name) {
    return std::find(settings.begin(), settings.end(), name) != settings.end();
  };
  std::vector<std::string> header = {"point", "dir"};
  header.insert(header.end(), settings.begin(), settings.end());
  if (!is_setting(kWorkersSetting)) header.push_back(kWorkersSetting);
  header.push_back("repeat");
  if (!is_setting("seed")) header.push_back("seed");
  header.push_back("state");
  header.insert(header.end(), std::begin(kSummaryColumns), std::end(kSummaryColumns));
  header.push_back("time_to_target_s");

  std::string text = absl::StrCat(absl::StrJoin(header, ","), "\n");
  for (const SweepPoint& point : points) {
    std::vector<std::string> row = {point.id, point.dir_name};
    for (const std::string& setting : settings) {
      std::string cell;
      for (const SweepSetting& own : point.settings) {
        if (own.path == setting) cell = SettingText(own.value);
      }
      row.push_back(cell);
    }
    if (!is_setting(kWorkersSetting)) row.push_back(absl::StrCat(point.num_workers));
    row.push_back(absl::StrCat(point.repeat));
    if (!is_setting("seed")) row.push_back(absl::StrCat(point.spec.seed()));
    std::string dir = absl::StrCat(results_dir, "/", point.dir_name);
    nlohmann::json summary = ReadSummary(dir);
    row.push_back(summary.is_null() ? "PENDING" : Cell(summary.value("state", nlohmann::json())));
    for (const char* column : kSummaryColumns) {
      row.push_back(summary.is_null() ? "" : Cell(summary.value(column, nlohmann::json())));
    }
    std::optional<double> time_to_target;
    if (!summary.is_null() && sweep.target_loss > 0) {
      time_to_target = TimeToTarget(dir + "/eval.csv", sweep.target_loss);
    }
    row.push_back(time_to_target.has_value() ? absl::StrCat(*time_to_target) : "");
    for (std::string& cell : row) cell = CsvField(cell);
    absl::StrAppend(&text, absl::StrJoin(row, ","), "\n");
  }
  std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << text;
    if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write ", temporary));
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

}  // namespace ps
