// JSON text and nlohmann::json values: parsing without exceptions escaping (nlohmann::json
// throws on malformed text, and on a number too large for a double (1e999) even when told not
// to throw; every reader of JSON the project did not write itself in this run goes through
// ParseJsonText), and protobuf messages as JSON values.
#ifndef PS_COMMON_JSON_TEXT_H_
#define PS_COMMON_JSON_TEXT_H_

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// The JSON value of `text`, or INVALID_ARGUMENT whose message says what and where, without
// nlohmann's "[json.exception...]" prefix: "syntax error at line 2, column 5: ..." or "number
// overflow parsing '1e999'". Callers prefix the source and add the fix.
absl::StatusOr<nlohmann::json> ParseJsonText(absl::string_view text);

// `message` as protobuf's JSON mapping writes it, with the .proto's field names ("job_id", not
// "jobId"); fields at their default are left out.
nlohmann::json ProtoToJson(const google::protobuf::Message& message);

// `text` (JSON) into `message` by protobuf's JSON mapping, an unknown field refused. On a
// problem, INVALID_ARGUMENT whose message names it and where, and for a mistyped field or enum
// value the closest name: 'stepz: no such field (did you mean "steps"?)', 'consistency.mode:
// "SYNCH" is not one of SYNC, ASYNC, SSP, ... (did you mean "SYNC"?)', else protobuf's own
// words ("syntax error at line 1, ..." for malformed text). `message` is unspecified then.
absl::Status ParseProtoJson(absl::string_view text, google::protobuf::Message* message);

}  // namespace ps

#endif  // PS_COMMON_JSON_TEXT_H_
