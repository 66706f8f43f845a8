#include "common/json_text.h"

#include <string>

#include <google/protobuf/util/json_util.h>

#include "absl/status/status.h"

namespace ps {

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

}  // namespace ps
