#include "ctl/experiment/sweep_table.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/json_text.h"

namespace ps {
namespace {

constexpr char kTimePerStep[] = "time_per_step_s";

// The columns from summary.json, in order: its fields of these names, and kTimePerStep.
constexpr const char* kSummaryColumns[] = {"steps",
                                           "wall_time_s",
                                           kTimePerStep,
                                           "examples_per_second",
                                           "final_train_loss",
                                           "final_eval_loss",
                                           "final_eval_accuracy",
                                           "final_validation_loss",
                                           "final_validation_accuracy",
                                           "staleness_mean",
                                           "staleness_max",
                                           "dropped_gradients",
                                           "bytes_sent_per_step",
                                           "bytes_received_per_step"};

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// 10 significant digits: bytes per step (millions) keep their last bytes, which StrCat's 6
// would round away.
std::string Number(double value) { return absl::StrFormat("%.10g", value); }

std::string Cell(const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return Number(value.get<double>());
  return value.dump();
}

// A summary column's cell; empty where the summary lacks the field.
std::string SummaryCell(const nlohmann::json& summary, const std::string& column) {
  if (column != kTimePerStep) return Cell(summary.value(column, nlohmann::json()));
  const nlohmann::json steps = summary.value("steps", nlohmann::json());
  const nlohmann::json wall_time = summary.value("wall_time_s", nlohmann::json());
  if (!steps.is_number() || steps.get<double>() <= 0 || !wall_time.is_number()) return "";
  return Number(wall_time.get<double>() / steps.get<double>());
}

}  // namespace

nlohmann::json ReadSummary(const std::string& point_dir, FileSystem* fs) {
  absl::StatusOr<std::string> text = fs->ReadFile(point_dir + "/summary.json");
  if (!text.ok()) return nullptr;
  absl::StatusOr<nlohmann::json> summary = ParseJsonText(*text);
  return summary.ok() && summary->is_object() ? *std::move(summary) : nullptr;
}

std::optional<double> TimeToTarget(const std::string& eval_csv_path, double target_loss,
                                   FileSystem* fs) {
  absl::StatusOr<std::string> text = fs->ReadFile(eval_csv_path);
  if (!text.ok()) return std::nullopt;
  std::vector<absl::string_view> lines = absl::StrSplit(*text, '\n', absl::SkipEmpty());
  // lines[0] is the header: time_s,step,loss,...
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
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
                             const std::string& results_dir, FileSystem* fs) {
  const std::vector<std::string> settings = SettingPaths(sweep);
  auto is_setting = [&settings](const std::string& name) {
    return std::find(settings.begin(), settings.end(), name) != settings.end();
  };
  std::vector<std::string> header = {"point", "dir"};
  header.insert(header.end(), settings.begin(), settings.end());
  for (const char* tasks : {kWorkersSetting, kPsSetting}) {
    if (!is_setting(tasks)) header.push_back(tasks);
  }
  header.push_back("repeat");
  if (!is_setting("seed")) header.push_back("seed");
  header.push_back("state");
  header.insert(header.end(), std::begin(kSummaryColumns), std::end(kSummaryColumns));
  header.push_back("time_to_target_s");

  std::string text = absl::StrCat(absl::StrJoin(header, ","), "\n");
  for (const SweepPoint& point : points) {
    std::vector<std::string> row = {point.id, point.dir_name};
    auto tasks = [&point](const std::string& setting) {
      return absl::StrCat(setting == kWorkersSetting ? point.num_workers : point.num_ps);
    };
    for (const std::string& setting : settings) {
      if (setting == kWorkersSetting || setting == kPsSetting) {
        row.push_back(tasks(setting));
        continue;
      }
      std::string cell;
      for (const SweepSetting& own : point.settings) {
        if (own.path == setting) cell = SettingText(own.value);
      }
      row.push_back(cell);
    }
    for (const char* setting : {kWorkersSetting, kPsSetting}) {
      if (!is_setting(setting)) row.push_back(tasks(setting));
    }
    row.push_back(absl::StrCat(point.repeat));
    if (!is_setting("seed")) row.push_back(absl::StrCat(point.spec.seed()));
    std::string dir = absl::StrCat(results_dir, "/", point.dir_name);
    nlohmann::json summary = ReadSummary(dir, fs);
    row.push_back(summary.is_null() ? "PENDING" : Cell(summary.value("state", nlohmann::json())));
    for (const char* column : kSummaryColumns) {
      row.push_back(summary.is_null() ? "" : SummaryCell(summary, column));
    }
    std::optional<double> time_to_target;
    if (!summary.is_null() && sweep.target_loss > 0) {
      // Judged on the validation split where the run evaluated one (its test set is evaluated
      // once, at the end), as the stop rules judge.
      absl::StatusOr<std::string> validation = fs->ReadFile(dir + "/validation.csv");
      const bool validated =
          validation.ok() && std::count(validation->begin(), validation->end(), '\n') > 1;
      time_to_target = TimeToTarget(dir + (validated ? "/validation.csv" : "/eval.csv"),
                                    sweep.target_loss, fs);
    }
    row.push_back(time_to_target.has_value() ? absl::StrCat(*time_to_target) : "");
    for (std::string& cell : row) cell = CsvField(cell);
    absl::StrAppend(&text, absl::StrJoin(row, ","), "\n");
  }
  return fs->WriteFileAtomically(path, text);
}

}  // namespace ps
