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

// argv of `words` (argv[0] "prog"), for UnknownFlagMessage.
std::string Unknown(std::vector<std::string> words) {
  words.insert(words.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  return UnknownFlagMessage(static_cast<int>(argv.size()), argv.data(), "prog");
}

TEST(FlagHelpTest, AnUnknownFlagIsNamedWithTheFlagMeant) {
  EXPECT_EQ(Unknown({"--flag_help_test_round=4"}),
            "unknown flag --flag_help_test_round (did you mean \"--flag_help_test_rounds\"?); "
            "prog --help lists the flags");
  EXPECT_EQ(Unknown({"cmd", "-flag_help_test_nmae", "y"}),
            "unknown flag --flag_help_test_nmae (did you mean \"--flag_help_test_name\"?); "
            "prog --help lists the flags");
  EXPECT_EQ(Unknown({"--completely_unlike_any"}),
            "unknown flag --completely_unlike_any; prog --help lists the flags");
  // Known flags, a bool's --noNAME, values, negative numbers, and what follows "--".
  EXPECT_EQ(Unknown({"cmd", "--flag_help_test_rounds", "-3", "--flag_help_test_name=a", "word",
                     "--nologtostderr", "--", "--not_a_flag"}),
            "");
  EXPECT_EQ(Unknown({"--noflag_help_test_rounds"}),  // Not a bool.
            "unknown flag --noflag_help_test_rounds (did you mean \"--flag_help_test_rounds\"?); "
            "prog --help lists the flags");
  // A value that looks like a flag, given as the next word of a known flag.
  EXPECT_EQ(Unknown({"--flag_help_test_name", "-x", "--flag_help_test_rounds", "--3"}), "");
  // --undefok lets gflags pass unknown flags.
  EXPECT_EQ(Unknown({"--not_a_flag", "--undefok=not_a_flag"}), "");
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
