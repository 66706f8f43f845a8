#include "common/net/grpc_status.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace ps {
namespace {

// The absl payload that travels as error_details, and the form of its one detail.
constexpr char kDetailUrl[] = "ps/status-detail";
constexpr char kStreamAgePrefix[] = "primary_stream_age_ms=";
constexpr char kMovedToPrefix[] = "shard_moved_to_ps=";

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const absl::optional<absl::Cord> detail = status.GetPayload(kDetailUrl);
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()),
                      detail.has_value() ? std::string(*detail) : std::string());
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  absl::Status converted(static_cast<absl::StatusCode>(status.error_code()),
                         status.error_message());
  if (!status.error_details().empty()) {
    converted.SetPayload(kDetailUrl, absl::Cord(status.error_details()));
  }
  return converted;
}

absl::Status WithPrimaryStreamAge(absl::Status status, absl::Duration age) {
  status.SetPayload(kDetailUrl,
                    absl::Cord(absl::StrCat(kStreamAgePrefix, absl::ToInt64Milliseconds(age))));
  return status;
}

std::optional<absl::Duration> PrimaryStreamAge(const grpc::Status& status) {
  const std::string& details = status.error_details();
  absl::string_view detail = details;
  int64_t ms = 0;
  if (!absl::ConsumePrefix(&detail, kStreamAgePrefix) || !absl::SimpleAtoi(detail, &ms) ||
      ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

absl::Status WithShardMovedTo(absl::Status status, int ps) {
  status.SetPayload(kDetailUrl, absl::Cord(absl::StrCat(kMovedToPrefix, ps)));
  return status;
}

std::optional<int> ShardMovedTo(const grpc::Status& status) {
  const std::string& details = status.error_details();
  absl::string_view detail = details;
  int ps = 0;
  if (!absl::ConsumePrefix(&detail, kMovedToPrefix) || !absl::SimpleAtoi(detail, &ps) || ps < 0) {
    return std::nullopt;
  }
  return ps;
}

}  // namespace ps
