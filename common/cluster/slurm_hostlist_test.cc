#include "common/cluster/slurm_hostlist.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace {

struct ExpandCase {
  const char* hostlist;
  // What `scontrol show hostnames` prints, one name a line, joined here with spaces. Every
  // expectation was checked against Debian's slurm-wlm 22.05.8 (`scontrol show hostnames LIST`).
  const char* scontrol;
};

TEST(ExpandSlurmHostlistTest, ExpandsAsScontrolShowHostnames) {
  const ExpandCase kCases[] = {
      {"n1", "n1"},
      {"host.example.com", "host.example.com"},
      {"a,b,c", "a b c"},
      {"n[1-10]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10"},
      {"gpu[01-04,07],cpu-a[1-2]", "gpu01 gpu02 gpu03 gpu04 gpu07 cpu-a1 cpu-a2"},
      {"n[008-011]", "n008 n009 n010 n011"},
      {"n[0001-0003]", "n0001 n0002 n0003"},
      {"n[09-11]", "n09 n10 n11"},
      {"n[099-101]", "n099 n100 n101"},
      {"n[9-10],m", "n9 n10 m"},
      // The width is the first number's: a padded last number changes nothing.
      {"n[8-011]", "n8 n9 n10 n11"},
      {"n[7-007]", "n7"},
      {"n[001-10]", "n001 n002 n003 n004 n005 n006 n007 n008 n009 n010"},
      {"n[01-2]", "n01 n02"},
      {"n[0]", "n0"},
      {"n[00]", "n00"},
      {"n[007]", "n007"},
      {"n[2-2]", "n2"},
      {"n[1-3,5,7-8]", "n1 n2 n3 n5 n7 n8"},
      // Order is kept and duplicates stay.
      {"n[3,1,2]", "n3 n1 n2"},
      {"n[1-3,2]", "n1 n2 n3 n2"},
      {"n[1-2],n[1-2]", "n1 n2 n1 n2"},
      {"a,b[1-2],c", "a b1 b2 c"},
      {"n1,n[2-3]", "n1 n2 n3"},
      {"N[1-2]", "N1 N2"},
      {"n-[1-2]", "n-1 n-2"},
      // Several bracket groups: a cartesian product. With two, the leftmost varies slowest.
      {"rack[1-2]-n[1-2]", "rack1-n1 rack1-n2 rack2-n1 rack2-n2"},
      {"c[1-2]-[01-02]", "c1-01 c1-02 c2-01 c2-02"},
      {"n[1-2]x[3-4]", "n1x3 n1x4 n2x3 n2x4"},
      {"x[1-2][3-4]", "x13 x14 x23 x24"},
      // With more, Slurm's order: the last group fastest, then the first, the second, ...
      {"r[1-2]c[1-2]n[1,3]", "r1c1n1 r1c1n3 r2c1n1 r2c1n3 r1c2n1 r1c2n3 r2c2n1 r2c2n3"},
      {"a[1-2]b[1-2]c[1-2]d[1-2]",
       "a1b1c1d1 a1b1c1d2 a2b1c1d1 a2b1c1d2 a1b2c1d1 a1b2c1d2 a2b2c1d1 a2b2c1d2 "
       "a1b1c2d1 a1b1c2d2 a2b1c2d1 a2b1c2d2 a1b2c2d1 a1b2c2d2 a2b2c2d1 a2b2c2d2"},
      {"a[1,2]b[3-4],z[1-2]y[5,6]x[7-8]",
       "a1b3 a1b4 a2b3 a2b4 z1y5x7 z1y5x8 z2y5x7 z2y5x8 z1y6x7 z1y6x8 z2y6x7 z2y6x8"},
      // No prefix at all.
      {"[1-2]", "1 2"},
      {"n[1-2],[3-4]", "n1 n2 3 4"},
      {"n[4294967296]", "n4294967296"},
  };
  for (const ExpandCase& c : kCases) {
    SCOPED_TRACE(c.hostlist);
    absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostlist(c.hostlist);
    ASSERT_TRUE(hosts.ok()) << hosts.status();
    EXPECT_EQ(absl::StrJoin(*hosts, " "), c.scontrol);
  }
}

TEST(ExpandSlurmHostlistTest, ExpandsUpToTheLimit) {
  absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostlist("n[1-65536]");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  ASSERT_EQ(hosts->size(), 65536u);
  EXPECT_EQ(hosts->back(), "n65536");

  hosts = ExpandSlurmHostlist("a[1-256]b[1-256]");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_EQ(hosts->size(), 65536u);
  EXPECT_EQ((*hosts)[256], "a2b1");
}

struct InvalidCase {
  const char* hostlist;
  // Every part must appear in the message.
  std::vector<std::string> message_parts;
};

TEST(ExpandSlurmHostlistTest, RefusesMalformedListsNamingThePartAndPosition) {
  const InvalidCase kCases[] = {
      // scontrol: "Invalid range: `5-3'".
      {"n[5-3]", {"\"n[5-3]\": reversed range \"5-3\" at character 3", "smaller number first"}},
      {"n[1-2],m[10-9]", {"reversed range \"10-9\" at character 10"}},
      // scontrol prints "n]" and "n1-2]": it guesses. Refused here.
      {"n[1-2", {"'[' is never closed at character 2", "add the ']'"}},
      {"n1-2]", {"']' without a '[' at character 5"}},
      {"n[1-2]]", {"']' without a '[' at character 7"}},
      // scontrol: "Invalid hostlist".
      {"n[[1]]", {"'[' inside brackets at character 3", "do not nest"}},
      {"n[1-2]-ib", {"text \"-ib\" after the last bracket group at character 7"}},
      {"gpu-[1-2].cluster", {"text \".cluster\" after the last bracket group"}},
      {"a[1-2]b[3-4]c", {"text \"c\" after the last bracket group at character 13"}},
      // scontrol: "Invalid range: `'".
      {"n[]", {"empty range at character 3", "[1-4,7]"}},
      {"n[1,,2]", {"empty range at character 5"}},
      {"n[1,]", {"empty range at character 5"}},
      // scontrol prints "n1" for "n[1-]"; refused here.
      {"n[1-]", {"range \"1-\" is not N or N-M at character 3"}},
      {"n[-3]", {"range \"-3\" is not N or N-M at character 3"}},
      {"n[a-b]", {"range \"a-b\" is not N or N-M"}},
      {"n[1x-3]", {"range \"1x-3\" is not N or N-M"}},
      {"n[1-3-5]", {"range \"1-3-5\" is not N or N-M"}},
      // scontrol skips empty names; refused here.
      {"n1,,n2", {"empty host name at character 4", "remove the extra comma"}},
      {",n1", {"empty host name at character 1"}},
      {"n1,", {"empty host name at character 3"}},
      {"", {"the host list is empty"}},
      // scontrol splits names at whitespace too; Slurm's variables never hold any.
      {"n1 n2", {"whitespace at character 3", "commas only"}},
      {"n[1 -3]", {"whitespace at character 4"}},
      // scontrol: "Too many hosts in range".
      {"n[1-65537]", {"more than 65536 hosts at character 1"}},
      {"n[1-100000000000000000]", {"more than 65536 hosts"}},
      {"a[1-300]b[1-300]", {"more than 65536 hosts"}},
      {"a[1-65536],b", {"more than 65536 hosts at character 12"}},
      {"a[1-40000],b[1-40000]", {"more than 65536 hosts at character 12"}},
      {"n[0-999999999999999999],n[1-1000000000000000000]", {"more than 65536 hosts"}},
      {"n[99999999999999999999]", {"number \"99999999999999999999\" has more than 18 digits"}},
  };
  for (const InvalidCase& c : kCases) {
    SCOPED_TRACE(c.hostlist);
    absl::StatusOr<std::vector<std::string>> hosts = ExpandSlurmHostlist(c.hostlist);
    ASSERT_FALSE(hosts.ok()) << absl::StrJoin(*hosts, " ");
    EXPECT_EQ(hosts.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.message_parts) {
      EXPECT_NE(hosts.status().message().find(part), absl::string_view::npos)
          << hosts.status().message() << "\n  lacks: " << part;
    }
  }
}

TEST(ExpandSlurmTasksPerNodeTest, ExpandsRepetitions) {
  const std::pair<const char*, std::vector<int>> kCases[] = {
      {"4", {4}},
      {"2(x3),1", {2, 2, 2, 1}},
      {"1,2,3", {1, 2, 3}},
      {"1(x2),3(x1),2", {1, 1, 3, 2}},
      {"16(x4)", {16, 16, 16, 16}},
      {"1(x65536)", std::vector<int>(65536, 1)},
      {"65536", {65536}},
  };
  for (const auto& [text, expected] : kCases) {
    SCOPED_TRACE(text);
    absl::StatusOr<std::vector<int>> counts = ExpandSlurmTasksPerNode(text);
    ASSERT_TRUE(counts.ok()) << counts.status();
    EXPECT_EQ(*counts, expected);
  }
}

TEST(ExpandSlurmTasksPerNodeTest, RefusesMalformedCounts) {
  const InvalidCase kCases[] = {
      {"", {"the task counts are empty"}},
      {"2,,1", {"empty task count at character 3"}},
      {"2,", {"empty task count at character 2"}},
      {"x", {"task count \"x\" is not a number at character 1"}},
      {"2(x3", {"task count \"2(x3\" is not N or N(xR) at character 1", "2(x3)"}},
      {"2(3)", {"is not N or N(xR)"}},
      {"2(x)", {"is not N or N(xR)"}},
      {"1,2(xa)", {"repetition \"a\" is not a number at character 6"}},
      {"0", {"\"0\" has zero tasks"}},
      {"2(x0)", {"\"2(x0)\" has zero repetitions"}},
      {"1(x65537)", {"more than 65536 nodes or tasks"}},
      {"65537", {"more than 65536 nodes or tasks"}},
      {"999999999999999999(x65536)", {"more than 65536 nodes or tasks"}},
      {"1(x40000),1(x30000)", {"more than 65536 nodes or tasks at character 11"}},
      {"1(x9999999999999999999)", {"has more than 18 digits"}},
  };
  for (const InvalidCase& c : kCases) {
    SCOPED_TRACE(c.hostlist);
    absl::StatusOr<std::vector<int>> counts = ExpandSlurmTasksPerNode(c.hostlist);
    ASSERT_FALSE(counts.ok());
    EXPECT_EQ(counts.status().code(), absl::StatusCode::kInvalidArgument);
    for (const std::string& part : c.message_parts) {
      EXPECT_NE(counts.status().message().find(part), absl::string_view::npos)
          << counts.status().message() << "\n  lacks: " << part;
    }
  }
}

}  // namespace
}  // namespace ps
