#include "common/process/flag_help.h"

#include <string>

#include <gflags/gflags.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

DEFINE_int32(flag_help_test_rounds, 3, "how many rounds to run");
DEFINE_string(flag_help_test_name, "x", "the name to use");

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(FlagHelpTest, ShowsTheNamedFlagsInOrder) {
  EXPECT_EQ(FlagHelp({"flag_help_test_rounds", "flag_help_test_name"}),
            "  --flag_help_test_rounds=3\n      how many rounds to run\n"
            "  --flag_help_test_name=\"x\"\n      the name to use\n");
}

TEST(FlagHelpTest, WithoutNamesShowsTheProjectsFlagsAndNotTheLoggingLibrarys) {
  const std::string help = FlagHelp();
  EXPECT_THAT(help, HasSubstr("--flag_help_test_rounds=3"));  // Defined in common/.
  EXPECT_THAT(help, Not(HasSubstr("--logtostderr")));
  EXPECT_THAT(help, Not(HasSubstr("--flagfile")));
}

TEST(FlagHelpTest, KnowsWhenHelpIsAskedFor) {
  const char* help[] = {"prog", "--task=ps:0", "--help"};
  const char* short_help[] = {"prog", "-h"};
  const char* none[] = {"prog", "--helpful_flag=1"};
  EXPECT_TRUE(HelpRequested(3, const_cast<char**>(help)));
  EXPECT_TRUE(HelpRequested(2, const_cast<char**>(short_help)));
  EXPECT_FALSE(HelpRequested(2, const_cast<char**>(none)));
}

}  // namespace
}  // namespace ps
