#include "ctl/export/apply_log_files.h"

#include <cstdio>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ps {
namespace {

constexpr char kHeader[] = "kind,worker,push_id,clock,version,learning_rate,drop_reason";

std::string LogPath(const std::string& results_dir, int ps) {
  return absl::StrCat(results_dir, "/apply_log/ps-", ps, ".csv");
}

std::string ParametersPath(const std::string& results_dir) {
  return results_dir + "/apply_log/parameters.json";
}

// A float as the shortest decimal that reads back as the same float (9 significant digits).
std::string ExactFloat(float value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

absl::StatusOr<ApplyLogEntry> ParseLine(absl::string_view line) {
  std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
  if (fields.size() != 7) {
    return absl::InvalidArgumentError(absl::StrCat(fields.size(), " fields, not 7"));
  }
  ApplyLogEntry entry;
  ApplyLogEntry::Kind kind;
  if (!ApplyLogEntry::Kind_Parse(std::string(fields[0]), &kind)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kind \"", fields[0], "\" is not PULL, APPLY or DROP"));
  }
  entry.set_kind(kind);
  int32_t worker;
  int64_t push_id, clock, version;
  float learning_rate = 0;
  if (!absl::SimpleAtoi(fields[1], &worker) || !absl::SimpleAtoi(fields[2], &push_id) ||
      !absl::SimpleAtoi(fields[3], &clock) || !absl::SimpleAtoi(fields[4], &version) ||
      (!fields[5].empty() && !absl::SimpleAtof(fields[5], &learning_rate))) {
    return absl::InvalidArgumentError("a number that does not parse");
  }
  entry.set_worker(worker);
  entry.set_push_id(push_id);
  entry.set_clock(clock);
  entry.set_version(version);
  entry.set_learning_rate(learning_rate);
  entry.set_drop_reason(std::string(fields[6]));
  return entry;
}

}  // namespace

absl::Status WriteApplyLogFiles(const std::string& results_dir, const ParameterSpec& parameters,
                                const std::vector<ApplyLog>& logs, FileSystem* fs) {
  absl::Status status = fs->CreateDirectories(results_dir + "/apply_log");
  if (!status.ok()) return status;
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(parameters, &json, options);
  status = fs->WriteFileAtomically(ParametersPath(results_dir), json);
  if (!status.ok()) return status;
  for (size_t ps = 0; ps < logs.size(); ++ps) {
    std::string text = absl::StrCat(kHeader, "\n");
    for (const ApplyLogEntry& e : logs[ps].entries()) {
      absl::StrAppend(&text, ApplyLogEntry::Kind_Name(e.kind()), ",", e.worker(), ",",
                      e.push_id(), ",", e.clock(), ",", e.version(), ",",
                      e.kind() == ApplyLogEntry::APPLY ? ExactFloat(e.learning_rate()) : "", ",",
                      e.drop_reason(), "\n");
    }
    status = fs->WriteFileAtomically(LogPath(results_dir, static_cast<int>(ps)), text);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<ApplyLogFiles> ReadApplyLogFiles(const std::string& results_dir, int num_ps,
                                                FileSystem* fs) {
  ApplyLogFiles files;
  const std::string parameters_path = ParametersPath(results_dir);
  absl::StatusOr<std::string> json = fs->ReadFile(parameters_path);
  if (!json.ok()) {
    return absl::NotFoundError(absl::StrCat(
        parameters_path, " cannot be read (", json.status().message(),
        "): replay needs a run recorded with \"record_apply_log\": true in its job"));
  }
  auto parsed = google::protobuf::util::JsonStringToMessage(*json, &files.parameters);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(parameters_path, ": not a ParameterSpec: ", parsed.ToString()));
  }
  for (int ps = 0; ps < num_ps; ++ps) {
    const std::string path = LogPath(results_dir, ps);
    absl::StatusOr<std::string> text = fs->ReadFile(path);
    if (!text.ok()) {
      return absl::NotFoundError(absl::StrCat(path, " cannot be read: ", text.status().message()));
    }
    ApplyLog log;
    int line_number = 0;
    for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
      if (++line_number == 1) {
        if (line != kHeader) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": the first line is not \"", kHeader, "\""));
        }
        continue;
      }
      absl::StatusOr<ApplyLogEntry> entry = ParseLine(line);
      if (!entry.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, " line ", line_number, ": ", entry.status().message()));
      }
      *log.add_entries() = *std::move(entry);
    }
    files.logs.push_back(std::move(log));
  }
  return files;
}

}  // namespace ps
