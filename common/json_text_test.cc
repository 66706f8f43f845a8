#include "common/json_text.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/job.pb.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(ParseJsonTextTest, ParsesAValue) {
  absl::StatusOr<nlohmann::json> value = ParseJsonText(R"({"ps": ["a:1"], "n": 2})");
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_EQ((*value)["n"], 2);
}

TEST(ParseJsonTextTest, SyntaxErrorSaysWhere) {
  absl::StatusOr<nlohmann::json> value = ParseJsonText("{\n  \"ps\": [}");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(value.status().message(), Not(HasSubstr("json.exception")));
}

// nlohmann throws out_of_range (not parse_error) for this, even with exceptions turned off;
// found by common/cluster/cluster_spec_fuzz.
TEST(ParseJsonTextTest, NumberTooLargeIsAnErrorNotAnException) {
  absl::StatusOr<nlohmann::json> value = ParseJsonText(R"({"cluster": 999E9999999999})");
  EXPECT_EQ(value.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(value.status().message(), HasSubstr("number overflow"));
}

// A job file's mistakes, each named with its path and, where it is a typo, the name meant.
TEST(ParseProtoJsonTest, NamesAnUnknownFieldOrEnumValueAndTheNameMeant) {
  JobSpec spec;
  EXPECT_TRUE(ParseProtoJson(R"({"job_id": "j", "steps": 5, "consistency": {"mode": "SYNC"}})",
                             &spec)
                  .ok());
  EXPECT_EQ(spec.steps(), 5);
  EXPECT_TRUE(ParseProtoJson(R"({"jobId": "j"})", &spec).ok());  // JSON names too.

  absl::Status status = ParseProtoJson(R"({"job_id": "j", "stepz": 5})", &spec);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "stepz: no such field (did you mean \"steps\"?)");
  EXPECT_EQ(ParseProtoJson(R"({"consistency": {"mode": "SYNCH"}})", &spec).message(),
            "consistency.mode: \"SYNCH\" is not one of SYNC, ASYNC, SSP, SOFTSYNC, ALLREDUCE, "
            "LOCAL_SGD, DELAYED, EASGD (did you mean \"SYNC\"?)");
  // In a list of messages, and a field nothing is close to.
  EXPECT_EQ(ParseProtoJson(R"({"model": {"layers": [{"kind": "CONV"}, {"kind": "POOL"}]}})",
                           &spec)
                .message(),
            "model.layers[1].kind: \"POOL\" is not one of CONV, MAX_POOL, AVG_POOL, DENSE, "
            "DROPOUT");
  EXPECT_EQ(ParseProtoJson(R"({"model": {"layers": [{"knid": "CONV"}]}})", &spec).message(),
            "model.layers[0].knid: no such field (did you mean \"kind\"?)");
  EXPECT_EQ(ParseProtoJson(R"({"completely_else": 1})", &spec).message(),
            "completely_else: no such field");
  // Not a naming problem: protobuf's words; malformed text: where.
  EXPECT_THAT(ParseProtoJson(R"({"steps": "many"})", &spec).message(), HasSubstr("steps"));
  EXPECT_THAT(ParseProtoJson("{\n  \"steps\": }", &spec).message(), HasSubstr("line 2"));
}

}  // namespace
}  // namespace ps
