#include "ctl/experiment/sweep.h"

#include <algorithm>
#include <set>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/file_system.h"
#include "common/json_text.h"
#include "common/job/job_schema.h"
#include "common/job/job_spec.h"

namespace ps {
namespace {

using ::google::protobuf::Descriptor;
using ::google::protobuf::FieldDescriptor;
using Json = nlohmann::ordered_json;

constexpr const char* kSweepFields[] = {"name",    "description", "base_job",    "ps",   "variants",
                                        "axes",    "repeats",     "target_loss", "select"};

// The field names along `path` as job.proto spells them (a part may be lowerCamel, as in
// protobuf's JSON), or INVALID_ARGUMENT naming the part that JobSpec does not have.
absl::StatusOr<std::vector<std::string>> FieldPath(const std::string& path) {
  const Descriptor* message = JobSpec::descriptor();
  std::string where = "JobSpec";
  std::vector<std::string> names;
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    const FieldDescriptor* field = message->FindFieldByName(parts[i]);
    for (int f = 0; f < message->field_count() && field == nullptr; ++f) {
      if (message->field(f)->json_name() == parts[i]) field = message->field(f);
    }
    if (field == nullptr) {
      std::vector<std::string> fields;
      for (int f = 0; f < message->field_count(); ++f) fields.push_back(message->field(f)->name());
      return absl::InvalidArgumentError(absl::StrCat(
          where, " has no field \"", parts[i], "\"; its fields are ", absl::StrJoin(fields, ", ")));
    }
    where = absl::StrCat(where, ".", field->name());
    names.push_back(field->name());
    if (i + 1 < parts.size() &&
        (field->type() != FieldDescriptor::TYPE_MESSAGE || field->is_repeated())) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " is not a message, so \"", parts[i + 1], "\" cannot follow it"));
    }
    message = field->message_type();
  }
  if (names == std::vector<std::string>{"job_id"}) {
    return absl::InvalidArgumentError("job_id is set by the sweep (\"<name>-<point number>\")");
  }
  return names;
}

// "workers" and "ps": numbers of tasks, not JobSpec fields.
bool IsTaskCount(const std::string& path) { return path == kWorkersSetting || path == kPsSetting; }

absl::Status CheckSettingPath(const std::string& path) {
  if (IsTaskCount(path)) return absl::OkStatus();
  return FieldPath(path).status();
}

absl::StatusOr<std::vector<SweepSetting>> ParseVariant(const Json& variant) {
  if (!variant.is_object()) {
    return absl::InvalidArgumentError(
        "must be an object of settings, e.g. "
        "{\"consistency.mode\": \"SSP\", \"consistency.ssp_bound\": 1}");
  }
  std::vector<SweepSetting> settings;
  for (const auto& [path, value] : variant.items()) {
    absl::Status status = CheckSettingPath(path);
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("\"", path, "\": ", status.message()));
    }
    settings.push_back({path, value});
  }
  return settings;
}

// REQUIRES: IsTaskCount(path).
absl::Status CheckTaskCount(const std::string& path, const Json& value) {
  if (!value.is_number_integer() || value.get<int64_t>() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " must be a whole number >= 1, got ", value.dump()));
  }
  return absl::OkStatus();
}

std::string SafeFileName(const std::string& id) {
  std::string name = id;
  for (char& c : name) {
    if (!absl::ascii_isalnum(c) && std::string("._=,+-").find(c) == std::string::npos) c = '_';
  }
  return name;
}

// A point's directory name: its id made safe, and where that passes kMaxPointDirName bytes (a
// file name may have 255, and the logs add ".cluster" and ".log"), its start and a hash of the
// whole id (FNV-1a, the same on every run, so that a sweep resumes into the same directories).
std::string PointDirName(const std::string& id) {
  constexpr size_t kMaxPointDirName = 160;
  std::string name = SafeFileName(id);
  if (name.size() <= kMaxPointDirName) return name;
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : id) hash = (hash ^ c) * 1099511628211ull;
  return absl::StrCat(name.substr(0, kMaxPointDirName - 17), "-",
                      absl::Hex(hash, absl::kZeroPad16));
}

absl::Status Problem(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

// "variants" and "axes" into `sweep`; INVALID_ARGUMENT "field: problem".
absl::Status ParseSettings(const Json& root, Sweep* sweep) {
  std::set<std::string> variant_paths;
  if (root.contains("variants")) {
    if (!root["variants"].is_array() || root["variants"].empty()) {
      return Problem("variants", "must be a non-empty list of objects");
    }
    for (size_t i = 0; i < root["variants"].size(); ++i) {
      absl::StatusOr<std::vector<SweepSetting>> variant = ParseVariant(root["variants"][i]);
      if (!variant.ok()) {
        return Problem(absl::StrCat("variants[", i, "]"), variant.status().message());
      }
      for (const SweepSetting& setting : *variant) {
        if (IsTaskCount(setting.path)) {
          absl::Status status = CheckTaskCount(setting.path, setting.value);
          if (!status.ok()) return Problem(absl::StrCat("variants[", i, "]"), status.message());
        }
        variant_paths.insert(setting.path);
      }
      sweep->variants.push_back(*std::move(variant));
    }
  }
  if (root.contains("axes")) {
    if (!root["axes"].is_object()) return Problem("axes", "must be an object of setting: [values]");
    for (const auto& [path, values] : root["axes"].items()) {
      std::string field = absl::StrCat("axes.\"", path, "\"");
      absl::Status status = CheckSettingPath(path);
      if (!status.ok()) return Problem(field, status.message());
      if (variant_paths.count(path) > 0) {
        return Problem(field, "is set by the variants too; set it in one place");
      }
      if (!values.is_array() || values.empty()) {
        return Problem(field, "must be a non-empty list of values");
      }
      SweepAxis axis{path, {}};
      for (const Json& value : values) {
        if (IsTaskCount(path)) {
          status = CheckTaskCount(path, value);
          if (!status.ok()) return Problem(field, status.message());
        }
        axis.values.push_back(value);
      }
      sweep->axes.push_back(std::move(axis));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string SettingText(const nlohmann::ordered_json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

absl::StatusOr<JobSpec> OverrideField(const JobSpec& spec, const std::string& path,
                                      const nlohmann::ordered_json& value) {
  absl::StatusOr<std::vector<std::string>> names = FieldPath(path);
  if (!names.ok()) return names.status();
  std::string text;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  // Printing an in-memory message cannot fail.
  (void)google::protobuf::util::MessageToJsonString(spec, &text, print);
  Json json = Json::parse(text);
  Json* node = &json;
  for (const std::string& name : *names) node = &(*node)[name];
  *node = value;
  JobSpec result;
  absl::Status status = ParseProtoJson(json.dump(), &result);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(SettingText(value), " does not fit ", path, ": ", status.message()));
  }
  return result;
}

absl::StatusOr<Sweep> ParseSweep(absl::string_view json, absl::string_view source) {
  auto error = [&](absl::string_view field, absl::string_view problem) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", field, ": ", problem));
  };
  Json root;
  try {
    root = Json::parse(json.begin(), json.end());
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  for (const auto& [key, value] : root.items()) {
    if (std::find(std::begin(kSweepFields), std::end(kSweepFields), key) ==
        std::end(kSweepFields)) {
      return error(key,
                   absl::StrCat("unknown field; a sweep has ", absl::StrJoin(kSweepFields, ", ")));
    }
  }
  Sweep sweep;
  sweep.source = std::string(source);
  sweep.name = root.value("name", "");
  if (sweep.name.empty() || SafeFileName(sweep.name) != sweep.name ||
      sweep.name.find(',') != std::string::npos) {
    return error("name",
                 "must be a non-empty name of letters, digits and . _ = + - (it names "
                 "the jobs and the results directory)");
  }
  if (root.contains("description")) {
    if (!root["description"].is_string()) return error("description", "must be a string");
    sweep.description = root["description"].get<std::string>();
  }

  const Json& base = root.contains("base_job") ? root["base_job"] : Json();
  absl::StatusOr<JobSpec> base_job;
  if (base.is_string()) {
    base_job = ReadJobSpecFile(base.get<std::string>());
  } else if (base.is_object()) {
    base_job = ParseJobSpecJson(base.dump(), absl::StrCat(source, ": base_job"));
  } else {
    return error("base_job",
                 "is required: a job file (\"config/jobs/default.json\") or a job object");
  }
  if (!base_job.ok()) return base_job.status();
  sweep.base_job = *std::move(base_job);

  for (const auto& [field, value] : {std::make_pair("ps", &sweep.num_ps),
                                     std::make_pair("repeats", &sweep.repeats)}) {
    if (!root.contains(field)) continue;
    if (!root[field].is_number_integer() || root[field].get<int64_t>() < 1) {
      return error(field, "must be a whole number >= 1");
    }
    *value = root[field].get<int>();
  }
  if (root.contains("target_loss")) {
    if (!root["target_loss"].is_number() || root["target_loss"].get<double>() < 0) {
      return error("target_loss", "must be a number >= 0");
    }
    sweep.target_loss = root["target_loss"].get<double>();
  }

  absl::Status settings = ParseSettings(root, &sweep);
  if (!settings.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", settings.message()));
  }
  if (root.contains("select")) {
    const std::vector<std::string> paths = SettingPaths(sweep);
    if (!root["select"].is_string() ||
        std::find(paths.begin(), paths.end(), root["select"].get<std::string>()) == paths.end() ||
        root["select"].get<std::string>() == "seed") {
      return error("select", absl::StrCat("must name one of the sweep's settings other than seed (",
                                          absl::StrJoin(paths, ", "),
                                          "), whose best value on the validation split the "
                                          "report selects"));
    }
    sweep.select = root["select"].get<std::string>();
  }
  return sweep;
}

absl::StatusOr<Sweep> ReadSweepFile(const std::string& path) {
  absl::StatusOr<std::string> text = FileSystem::Default()->ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(path, ": cannot read the sweep file (",
                                     text.status().message(), "); check the path"));
  }
  return ParseSweep(*text, path);
}

std::vector<std::string> SettingPaths(const Sweep& sweep) {
  std::vector<std::string> paths;
  auto add = [&paths](const std::string& path) {
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) paths.push_back(path);
  };
  for (const std::vector<SweepSetting>& variant : sweep.variants) {
    for (const SweepSetting& setting : variant) add(setting.path);
  }
  for (const SweepAxis& axis : sweep.axes) add(axis.path);
  return paths;
}

absl::StatusOr<std::vector<SweepPoint>> ExpandSweep(const Sweep& sweep, int default_workers,
                                                    int default_ps) {
  std::vector<std::vector<SweepSetting>> variants = sweep.variants;
  if (variants.empty()) variants.emplace_back();
  // Each variant, then each combination of the axes' values (an odometer, last axis fastest).
  std::vector<std::vector<SweepSetting>> combinations;
  for (const std::vector<SweepSetting>& variant : variants) {
    std::vector<size_t> position(sweep.axes.size(), 0);
    while (true) {
      std::vector<SweepSetting> settings = variant;
      for (size_t a = 0; a < sweep.axes.size(); ++a) {
        settings.push_back({sweep.axes[a].path, sweep.axes[a].values[position[a]]});
      }
      combinations.push_back(std::move(settings));
      size_t a = sweep.axes.size();
      while (a > 0 && ++position[a - 1] == sweep.axes[a - 1].values.size()) position[--a] = 0;
      if (a == 0) break;
    }
  }

  std::vector<SweepPoint> points;
  std::set<std::string> ids;
  for (const std::vector<SweepSetting>& settings : combinations) {
    for (int repeat = 0; repeat < sweep.repeats; ++repeat) {
      SweepPoint point;
      point.index = static_cast<int>(points.size());
      point.settings = settings;
      point.repeat = repeat;
      point.num_workers = default_workers;
      point.num_ps = default_ps;
      point.spec = sweep.base_job;
      std::vector<std::string> id;
      for (const SweepSetting& setting : settings) {
        id.push_back(absl::StrCat(setting.path, "=", SettingText(setting.value)));
        if (setting.path == kWorkersSetting) {
          point.num_workers = setting.value.get<int>();
          continue;
        }
        if (setting.path == kPsSetting) {
          point.num_ps = setting.value.get<int>();
          continue;
        }
        absl::StatusOr<JobSpec> spec = OverrideField(point.spec, setting.path, setting.value);
        if (!spec.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(sweep.source, ": setting \"", setting.path,
                                                         "\": ", spec.status().message()));
        }
        point.spec = *std::move(spec);
      }
      if (sweep.repeats > 1) {
        id.push_back(absl::StrCat("repeat=", repeat));
        point.spec.set_seed(point.spec.seed() + repeat);
      }
      point.id = id.empty() ? "base" : absl::StrJoin(id, ",");
      point.dir_name = PointDirName(point.id);
      point.spec.set_job_id(absl::StrCat(sweep.name, "-", point.index + 1));
      if (!ids.insert(point.dir_name).second) {
        return absl::InvalidArgumentError(absl::StrCat(sweep.source, ": two points have the id ",
                                                       point.id, "; make the variants differ"));
      }
      absl::Status valid = ValidateJobSpec(point.spec, point.num_workers);
      if (!valid.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(sweep.source, ": point ", point.id, ": ", valid.message()));
      }
      points.push_back(std::move(point));
    }
  }
  return points;
}

}  // namespace ps
