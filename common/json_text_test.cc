#include "common/json_text.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

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

}  // namespace
}  // namespace ps
