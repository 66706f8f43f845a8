#include "common/json_text.h"

#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/did_you_mean.h"

namespace ps {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;

// Whether `value` is a name of `type`; when it is a string that is not, the problem at `path`.
absl::Status CheckEnumName(const nlohmann::json& value, const EnumDescriptor& type,
                           const std::string& path) {
  if (!value.is_string() || type.FindValueByName(value.get<std::string>()) != nullptr) {
    return absl::OkStatus();  // Numbers and other kinds: protobuf judges them.
  }
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) {
    const std::string& name = type.value(i)->name();
    if (type.value(i)->number() == 0 && absl::EndsWith(name, "UNSPECIFIED")) continue;
    names.push_back(name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": \"", value.get<std::string>(), "\" is not one of ",
                   absl::StrJoin(names, ", "), DidYouMean(value.get<std::string>(), names)));
}

absl::Status CheckFields(const nlohmann::json& json, const Descriptor& type,
                         const std::string& path);

// One field's value: its enum names, and the fields of its messages, also in lists and maps.
absl::Status CheckValue(const nlohmann::json& value, const FieldDescriptor& field,
                        const std::string& path) {
  if (field.is_map()) {
    if (!value.is_object()) return absl::OkStatus();
    const FieldDescriptor& map_value = *field.message_type()->map_value();
    for (const auto& [key, item] : value.items()) {
      absl::Status status = CheckValue(item, map_value, absl::StrCat(path, "[\"", key, "\"]"));
      if (!status.ok()) return status;
    }
    return absl::OkStatus();
  }
  if (field.is_repeated() && value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      // An element is checked as the field's type, not as a list again.
      const nlohmann::json& item = value[i];
      const std::string where = absl::StrCat(path, "[", i, "]");
      if (field.enum_type() != nullptr) {
        absl::Status status = CheckEnumName(item, *field.enum_type(), where);
        if (!status.ok()) return status;
      } else if (field.message_type() != nullptr) {
        absl::Status status = CheckFields(item, *field.message_type(), where);
        if (!status.ok()) return status;
      }
    }
    return absl::OkStatus();
  }
  if (field.enum_type() != nullptr) return CheckEnumName(value, *field.enum_type(), path);
  if (field.message_type() != nullptr) return CheckFields(value, *field.message_type(), path);
  return absl::OkStatus();
}

// The first unknown field or enum name of `json` as a `type` at `path` (dotted; "" at the top).
absl::Status CheckFields(const nlohmann::json& json, const Descriptor& type,
                         const std::string& path) {
  // protobuf's well-known types (Struct, Any, Duration, ...) have JSON forms of their own.
  if (!json.is_object() || absl::StartsWith(type.file()->name(), "google/protobuf/")) {
    return absl::OkStatus();
  }
  for (const auto& [key, value] : json.items()) {
    const std::string where = path.empty() ? key : absl::StrCat(path, ".", key);
    const FieldDescriptor* field = type.FindFieldByName(key);
    std::vector<std::string> names;
    for (int i = 0; field == nullptr && i < type.field_count(); ++i) {
      if (type.field(i)->json_name() == key) field = type.field(i);  // "jobId" for "job_id".
      names.push_back(type.field(i)->name());
    }
    if (field == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": no such field", DidYouMean(key, names)));
    }
    absl::Status status = CheckValue(value, *field, where);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<nlohmann::json> ParseJsonText(absl::string_view text) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& error) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ...":
    // keep what follows "parse error " (or the "] " that ends the prefix).
    absl::string_view what = error.what();
    for (absl::string_view marker : {absl::string_view("parse error "), absl::string_view("] ")}) {
      const size_t at = what.find(marker);
      if (at != absl::string_view::npos) {
        what.remove_prefix(at + marker.size());
        break;
      }
    }
    return absl::InvalidArgumentError(std::string(what));
  }
}

nlohmann::json ProtoToJson(const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // Printing an in-memory message cannot fail, and its text is valid JSON.
  (void)google::protobuf::util::MessageToJsonString(message, &text, options);
  return nlohmann::json::parse(text);
}

absl::Status ParseProtoJson(absl::string_view text, google::protobuf::Message* message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(text.data(), text.size()), message, options);
  if (parsed.ok()) return absl::OkStatus();
  absl::StatusOr<nlohmann::json> json = ParseJsonText(text);
  if (!json.ok()) return json.status();
  absl::Status named = CheckFields(*json, *message->GetDescriptor(), "");
  if (!named.ok()) return named;
  return absl::InvalidArgumentError(parsed.message().as_string());
}

}  // namespace ps
