#include "common/cluster/environment.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace ps {
namespace {

TEST(EnvironmentTest, ProcessEnvironmentHoldsTheVariablesBazelSets) {
  Environment environment = ProcessEnvironment();
  const std::string* tmpdir = FindVariable(environment, "TEST_TMPDIR");
  ASSERT_NE(tmpdir, nullptr);
  EXPECT_EQ(*tmpdir, std::string(std::getenv("TEST_TMPDIR")));
}

TEST(EnvironmentTest, FindVariableTellsUnsetFromEmpty) {
  Environment environment = {{"EMPTY", ""}, {"SET", "a=b"}};
  ASSERT_NE(FindVariable(environment, "EMPTY"), nullptr);
  EXPECT_EQ(*FindVariable(environment, "EMPTY"), "");
  EXPECT_EQ(*FindVariable(environment, "SET"), "a=b");
  EXPECT_EQ(FindVariable(environment, "UNSET"), nullptr);
}

}  // namespace
}  // namespace ps
