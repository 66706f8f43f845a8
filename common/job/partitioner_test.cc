#include "common/job/partitioner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

struct Variable {
  std::string name;
  std::vector<int64_t> shape;
};

ParameterSpec Spec(const std::vector<Variable>& variables, int64_t min_slice_bytes) {
  ParameterSpec spec;
  spec.set_min_slice_bytes(min_slice_bytes);
  for (const Variable& v : variables) {
    VariableDef* def = spec.add_variables();
    def->set_name(v.name);
    for (int64_t dim : v.shape) def->add_shape(dim);
  }
  return spec;
}

int64_t Rows(const VariableDef& variable) { return variable.shape(0); }

int64_t RowSize(const VariableDef& variable) {
  int64_t row_size = 1;
  for (int d = 1; d < variable.shape_size(); ++d) row_size *= variable.shape(d);
  return row_size;
}

std::string Describe(const SlicePlacement& s) {
  return absl::StrCat(s.variable, "[", s.row_begin, "+", s.row_count, " x ", s.row_size, "]@ps",
                      s.ps_task);
}

// Checks what every placement must satisfy: slices in (variable_index, row_begin) order, each
// variable's rows covered exactly once by at most num_ps slices whose row counts differ by at
// most one, and every slice on a valid ps task.
void ExpectWellFormed(const ParameterSpec& spec, const Placement& placement, int num_ps) {
  EXPECT_EQ(placement.num_ps, num_ps);
  size_t next = 0;
  for (int v = 0; v < spec.variables_size(); ++v) {
    const VariableDef& variable = spec.variables(v);
    SCOPED_TRACE(variable.name());
    std::vector<int> owner(Rows(variable), -1);
    int64_t row_begin = 0;
    int64_t fewest_rows = Rows(variable);
    int64_t most_rows = 0;
    int num_slices = 0;
    for (; next < placement.slices.size() && placement.slices[next].variable_index == v; ++next) {
      const SlicePlacement& slice = placement.slices[next];
      SCOPED_TRACE(Describe(slice));
      EXPECT_EQ(slice.variable, variable.name());
      EXPECT_EQ(slice.row_size, RowSize(variable));
      EXPECT_EQ(slice.row_begin, row_begin);
      ASSERT_GT(slice.row_count, 0);
      ASSERT_LE(slice.row_begin + slice.row_count, Rows(variable));
      EXPECT_GE(slice.ps_task, 0);
      EXPECT_LT(slice.ps_task, num_ps);
      for (int64_t r = slice.row_begin; r < slice.row_begin + slice.row_count; ++r) {
        EXPECT_EQ(owner[r], -1) << "row " << r << " is in two slices";
        owner[r] = static_cast<int>(next);
      }
      row_begin += slice.row_count;
      fewest_rows = std::min(fewest_rows, slice.row_count);
      most_rows = std::max(most_rows, slice.row_count);
      ++num_slices;
    }
    for (int64_t r = 0; r < Rows(variable); ++r) {
      EXPECT_NE(owner[r], -1) << "row " << r << " is in no slice";
    }
    EXPECT_GE(num_slices, 1);
    EXPECT_LE(num_slices, num_ps);
    EXPECT_LE(most_rows - fewest_rows, 1);
  }
  EXPECT_EQ(next, placement.slices.size()) << "slices out of (variable_index, row_begin) order";
}

const std::vector<Variable>& ShapesForCoverage() {
  static const auto* const kShapes = new std::vector<Variable>{
      {"one_row", {1}},         {"two_rows", {2, 3}},   {"three_rows", {3, 5}},
      {"four_rows", {4}},       {"prime_7", {7, 2}},    {"prime_13", {13}},
      {"prime_97", {97, 3, 2}}, {"hundred", {100, 10}}, {"prime_1009", {1009, 4}},
      {"wide", {6, 1000}},
  };
  return *kShapes;
}

TEST(PartitionerTest, CoversEveryRowExactlyOnce) {
  // 4 bytes: every row is big enough, so each variable gets min(num_ps, rows) slices.
  for (int64_t min_slice_bytes : {int64_t{4}, int64_t{40}, int64_t{1000}, int64_t{0}}) {
    for (int num_ps = 1; num_ps <= 5; ++num_ps) {
      SCOPED_TRACE(absl::StrCat("min_slice_bytes=", min_slice_bytes, " num_ps=", num_ps));
      ParameterSpec spec = Spec(ShapesForCoverage(), min_slice_bytes);
      absl::StatusOr<Placement> placement = PlaceVariables(spec, num_ps);
      ASSERT_TRUE(placement.ok()) << placement.status();
      ExpectWellFormed(spec, *placement, num_ps);
      if (min_slice_bytes == 4) {
        for (int v = 0; v < spec.variables_size(); ++v) {
          int64_t expected = std::min<int64_t>(num_ps, Rows(spec.variables(v)));
          int64_t actual =
              std::count_if(placement->slices.begin(), placement->slices.end(),
                            [v](const SlicePlacement& s) { return s.variable_index == v; });
          EXPECT_EQ(actual, expected) << spec.variables(v).name();
        }
      }
    }
  }
}

TEST(PartitionerTest, NoSliceBelowMinimumUnlessTheVariableIsSmaller) {
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
    int64_t min_slice_bytes;
    int num_ps;
    int expected_slices;
  };
  const Case kCases[] = {
      // 3 rows of 100 bytes: two slices would leave one of 100 bytes.
      {"rows do not divide", {3, 25}, 150, 4, 1},
      {"exactly two minimums", {4, 25}, 200, 4, 2},
      {"just under two minimums", {7, 25}, 400, 4, 1},
      {"prime rows", {13, 10}, 200, 5, 2},
      {"capped by num_ps", {100, 100}, 400, 3, 3},
      {"capped by rows", {2, 1000}, 4, 5, 2},
      {"default minimum", {1024, 256}, 0, 8, 4},
      {"smaller than the minimum", {10, 10}, 1000, 5, 1},
      {"vector", {1000}, 1000, 5, 4},
  };
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    ParameterSpec spec = Spec({{"w", c.shape}}, c.min_slice_bytes);
    absl::StatusOr<Placement> placement = PlaceVariables(spec, c.num_ps);
    ASSERT_TRUE(placement.ok()) << placement.status();
    ExpectWellFormed(spec, *placement, c.num_ps);
    EXPECT_EQ(static_cast<int>(placement->slices.size()), c.expected_slices);
    int64_t min_slice_bytes = c.min_slice_bytes == 0 ? kDefaultMinSliceBytes : c.min_slice_bytes;
    int64_t variable_bytes = Rows(spec.variables(0)) * RowSize(spec.variables(0)) * 4;
    for (const SlicePlacement& slice : placement->slices) {
      if (variable_bytes >= min_slice_bytes) {
        EXPECT_GE(slice.num_bytes(), min_slice_bytes) << Describe(slice);
      }
    }
  }
}

TEST(PartitionerTest, SmallVariablesAreNotSplit) {
  ParameterSpec spec =
      Spec({{"bias", {64}}, {"scale", {1}}, {"small_matrix", {32, 32}}, {"big", {512, 512}}}, 0);
  absl::StatusOr<Placement> placement = PlaceVariables(spec, 4);
  ASSERT_TRUE(placement.ok()) << placement.status();
  ExpectWellFormed(spec, *placement, 4);
  for (const SlicePlacement& slice : placement->slices) {
    if (slice.variable == "big") continue;
    EXPECT_EQ(slice.row_begin, 0) << Describe(slice);
    EXPECT_EQ(slice.row_count, Rows(spec.variables(slice.variable_index))) << Describe(slice);
  }
  // 1 MiB over 4 ps tasks with 256 KiB slices.
  EXPECT_EQ(placement->slices.size(), 3u + 4u);
}

TEST(PartitionerTest, BalancesShardsWithinOneSlice) {
  std::mt19937 random(12345);
  for (int trial = 0; trial < 200; ++trial) {
    int num_ps = 1 + static_cast<int>(random() % 7);
    std::vector<Variable> variables;
    int num_variables = 1 + static_cast<int>(random() % 12);
    for (int v = 0; v < num_variables; ++v) {
      std::vector<int64_t> shape = {1 + static_cast<int64_t>(random() % 300)};
      if (random() % 2 == 0) shape.push_back(1 + static_cast<int64_t>(random() % 64));
      variables.push_back({absl::StrCat("v", v), shape});
    }
    int64_t min_slice_bytes = static_cast<int64_t>(random() % 4096);
    ParameterSpec spec = Spec(variables, min_slice_bytes);
    SCOPED_TRACE(absl::StrCat("trial ", trial, ": ", spec.ShortDebugString(), " num_ps=", num_ps));
    absl::StatusOr<Placement> placement = PlaceVariables(spec, num_ps);
    ASSERT_TRUE(placement.ok()) << placement.status();
    ExpectWellFormed(spec, *placement, num_ps);

    int64_t largest_slice = 0;
    int64_t total = 0;
    for (const SlicePlacement& slice : placement->slices) {
      largest_slice = std::max(largest_slice, slice.num_bytes());
      total += slice.num_bytes();
    }
    int64_t most = placement->BytesOn(0);
    int64_t least = most;
    int64_t sum = 0;
    size_t slices_seen = 0;
    for (int p = 0; p < num_ps; ++p) {
      int64_t bytes = placement->BytesOn(p);
      most = std::max(most, bytes);
      least = std::min(least, bytes);
      sum += bytes;
      std::vector<int> on = placement->SlicesOn(p);
      EXPECT_TRUE(std::is_sorted(on.begin(), on.end()));
      int64_t bytes_of_slices = 0;
      for (int i : on) {
        EXPECT_EQ(placement->slices[i].ps_task, p);
        bytes_of_slices += placement->slices[i].num_bytes();
      }
      EXPECT_EQ(bytes_of_slices, bytes);
      slices_seen += on.size();
    }
    EXPECT_EQ(sum, total);
    EXPECT_EQ(slices_seen, placement->slices.size());
    EXPECT_LE(most - least, largest_slice);
  }
}

TEST(PartitionerTest, IsDeterministic) {
  ParameterSpec spec = Spec(ShapesForCoverage(), 40);
  ParameterSpec copy;
  ASSERT_TRUE(copy.ParseFromString(spec.SerializeAsString()));
  for (int num_ps = 1; num_ps <= 5; ++num_ps) {
    absl::StatusOr<Placement> first = PlaceVariables(spec, num_ps);
    absl::StatusOr<Placement> second = PlaceVariables(copy, num_ps);
    ASSERT_TRUE(first.ok()) << first.status();
    ASSERT_TRUE(second.ok()) << second.status();
    ASSERT_EQ(first->num_ps, second->num_ps);
    ASSERT_EQ(first->slices.size(), second->slices.size());
    for (size_t i = 0; i < first->slices.size(); ++i) {
      const SlicePlacement& a = first->slices[i];
      const SlicePlacement& b = second->slices[i];
      EXPECT_EQ(a.variable_index, b.variable_index);
      EXPECT_EQ(a.variable, b.variable);
      EXPECT_EQ(a.row_begin, b.row_begin);
      EXPECT_EQ(a.row_count, b.row_count);
      EXPECT_EQ(a.row_size, b.row_size);
      EXPECT_EQ(a.ps_task, b.ps_task);
    }
  }
}

TEST(PartitionerTest, WorkedExample) {
  // min_slice_bytes 1000, 3 ps tasks:
  //   embedding [10, 100]: 400-byte rows, 3 rows make a slice, so 3 slices of 4, 3, 3 rows
  //                        (1600, 1200, 1200 bytes).
  //   dense [5, 50]:       1000 bytes, one slice.
  //   bias [7]:            28 bytes, smaller than the minimum, one slice.
  //   counts [300]:        1200 bytes; 250 rows make a slice, so one slice.
  // Largest first: embedding[0:4] -> ps0 (1600); embedding[4:7] -> ps1 (1200);
  // embedding[7:10] -> ps2 (1200); counts ties ps1 and ps2 at 1200 -> ps1 (2400);
  // dense -> ps2 (2200); bias -> ps0 (1628).
  ParameterSpec spec =
      Spec({{"embedding", {10, 100}}, {"dense", {5, 50}}, {"bias", {7}}, {"counts", {300}}}, 1000);
  absl::StatusOr<Placement> placement = PlaceVariables(spec, 3);
  ASSERT_TRUE(placement.ok()) << placement.status();

  struct Expected {
    int variable_index;
    const char* variable;
    int64_t row_begin;
    int64_t row_count;
    int64_t row_size;
    int ps_task;
  };
  const Expected kExpected[] = {
      {0, "embedding", 0, 4, 100, 0}, {0, "embedding", 4, 3, 100, 1},
      {0, "embedding", 7, 3, 100, 2}, {1, "dense", 0, 5, 50, 2},
      {2, "bias", 0, 7, 1, 0},        {3, "counts", 0, 300, 1, 1},
  };
  ASSERT_EQ(placement->slices.size(), std::size(kExpected));
  for (size_t i = 0; i < std::size(kExpected); ++i) {
    const SlicePlacement& actual = placement->slices[i];
    const Expected& expected = kExpected[i];
    SCOPED_TRACE(Describe(actual));
    EXPECT_EQ(actual.variable_index, expected.variable_index);
    EXPECT_EQ(actual.variable, expected.variable);
    EXPECT_EQ(actual.row_begin, expected.row_begin);
    EXPECT_EQ(actual.row_count, expected.row_count);
    EXPECT_EQ(actual.row_size, expected.row_size);
    EXPECT_EQ(actual.ps_task, expected.ps_task);
  }
  EXPECT_EQ(placement->BytesOn(0), 1628);
  EXPECT_EQ(placement->BytesOn(1), 2400);
  EXPECT_EQ(placement->BytesOn(2), 2200);
  EXPECT_EQ(placement->SlicesOn(0), (std::vector<int>{0, 4}));
  EXPECT_EQ(placement->SlicesOn(1), (std::vector<int>{1, 5}));
  EXPECT_EQ(placement->SlicesOn(2), (std::vector<int>{2, 3}));
}

TEST(PartitionerTest, EmptySpecPlacesNothing) {
  absl::StatusOr<Placement> placement = PlaceVariables(ParameterSpec(), 2);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_TRUE(placement->slices.empty());
  EXPECT_EQ(placement->BytesOn(0), 0);
  EXPECT_TRUE(placement->SlicesOn(1).empty());
}

TEST(PartitionerTest, RejectsInvalidSpecsNamingTheVariableAndTheFix) {
  struct Case {
    const char* name;
    std::vector<Variable> variables;
    int64_t min_slice_bytes;
    int num_ps;
    // Every part must appear in the message.
    std::vector<const char*> message_parts;
  };
  const int64_t kHuge = int64_t{1} << 40;
  const Case kCases[] = {
      {"empty name",
       {{"w", {2}}, {"", {3}}},
       0,
       2,
       {"variable at index 1", "empty name", "unique"}},
      {"repeated name",
       {{"w", {2}}, {"b", {2}}, {"w", {4}}},
       0,
       2,
       {"variable \"w\" (index 2)", "variable at index 0", "must be unique"}},
      {"no shape", {{"w", {}}}, 0, 2, {"variable \"w\" (index 0)", "no shape", "at least one"}},
      {"zero dimension",
       {{"ok", {4}}, {"w", {4, 0}}},
       0,
       2,
       {"variable \"w\" (index 1)", "dimension 1 is 0", "at least 1"}},
      {"negative rows",
       {{"w", {-3, 4}}},
       0,
       2,
       {"variable \"w\" (index 0)", "dimension 0 is -3", "at least 1"}},
      {"size overflows", {{"w", {kHuge, kHuge}}}, 0, 2, {"variable \"w\" (index 0)", "too large"}},
      {"total size overflows",
       {{"a", {kHuge, 1 << 20}}, {"b", {kHuge, 1 << 20}}},
       0,
       2,
       {"variable \"b\" (index 1)", "total size"}},
      {"zero ps tasks", {{"w", {4}}}, 0, 0, {"num_ps is 0", "at least one ps task"}},
      {"negative ps tasks", {{"w", {4}}}, 0, -1, {"num_ps is -1", "at least one ps task"}},
      {"negative min_slice_bytes",
       {{"w", {4}}},
       -1,
       2,
       {"min_slice_bytes is -1", "positive", "0 for the default"}},
  };
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    absl::StatusOr<Placement> placement =
        PlaceVariables(Spec(c.variables, c.min_slice_bytes), c.num_ps);
    ASSERT_FALSE(placement.ok());
    EXPECT_EQ(placement.status().code(), absl::StatusCode::kInvalidArgument);
    for (const char* part : c.message_parts) {
      EXPECT_NE(placement.status().message().find(part), absl::string_view::npos)
          << "missing \"" << part << "\" in: " << placement.status().message();
    }
  }
}

}  // namespace
}  // namespace ps
