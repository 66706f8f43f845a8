#include "server/sparse_table.h"

#include <cmath>
#include <numeric>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ps {
namespace {

using ::testing::HasSubstr;

SparseTable::Options TableOptions(OptimizerConfig::Kind optimizer = OptimizerConfig::SGD) {
  SparseTable::Options options;
  options.name = "embedding";
  options.width = 4;
  options.initializer.set_kind(InitializerConfig::UNIFORM);
  options.initializer.set_scale(0.5f);
  options.seed = 7;
  options.optimizer.set_kind(optimizer);
  return options;
}

std::unique_ptr<SparseTable> NewTable(const SparseTable::Options& options) {
  absl::StatusOr<std::unique_ptr<SparseTable>> table = SparseTable::Create(options);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *std::move(table) : nullptr;
}

std::vector<float> Read(SparseTable& table, const std::vector<uint64_t>& keys) {
  std::vector<float> out(keys.size() * table.width());
  absl::Status status = table.Read(keys, absl::MakeSpan(out));
  EXPECT_TRUE(status.ok()) << status;
  return out;
}

TEST(SparseTableTest, AnUnknownKeyCreatesItsRowWithTheSameValuesWhateverTheOrder) {
  std::unique_ptr<SparseTable> a = NewTable(TableOptions());
  std::unique_ptr<SparseTable> b = NewTable(TableOptions());
  const uint64_t big = (uint64_t{1} << 40) + 12345;  // A hashed feature id.
  const std::vector<float> first = Read(*a, {3, big, 0});
  EXPECT_EQ(a->rows(), 3);
  // Another table (another shard, run or restore) touching them in another order.
  const std::vector<float> second = Read(*b, {0, 3, big});
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(first[j], second[4 + j]);        // Key 3.
    EXPECT_EQ(first[4 + j], second[8 + j]);    // The big key.
    EXPECT_EQ(first[8 + j], second[j]);        // Key 0.
    EXPECT_LE(std::abs(first[j]), 0.5f);
  }
  EXPECT_NE(first[0], first[4]);  // Rows differ.
  // A second read gives the same values and makes no row.
  EXPECT_EQ(Read(*a, {3, big, 0}), first);
  EXPECT_EQ(a->rows(), 3);
  // The seed and the table's name are part of a row's values.
  SparseTable::Options other = TableOptions();
  other.seed = 8;
  EXPECT_NE(Read(*NewTable(other), {3}), std::vector<float>(first.begin(), first.begin() + 4));
  other = TableOptions();
  other.name = "other";
  EXPECT_NE(Read(*NewTable(other), {3}), std::vector<float>(first.begin(), first.begin() + 4));
}

TEST(SparseTableTest, SgdUpdatesOnlyTheTouchedRows) {
  SparseTable::Options options = TableOptions();
  options.initializer.set_kind(InitializerConfig::CONSTANT);
  options.initializer.set_scale(1.0f);
  std::unique_ptr<SparseTable> table = NewTable(options);
  std::vector<float> gradient = {1, 2, 3, 4, -1, -2, -3, -4};
  ASSERT_TRUE(table->Update(0.5f, {10, 20}, gradient).ok());
  EXPECT_EQ(Read(*table, {10, 20, 30}),
            (std::vector<float>{0.5f, 0, -0.5f, -1, 1.5f, 2, 2.5f, 3, 1, 1, 1, 1}));
}

// AdaGrad per row and lazy Adam against the formulas, computed by hand in double.
TEST(SparseTableTest, AdagradAndAdamKeepStatePerRowAndCountEachRowsUpdates) {
  SparseTable::Options options = TableOptions(OptimizerConfig::ADAGRAD);
  options.width = 1;
  options.initializer.set_kind(InitializerConfig::ZEROS);
  options.optimizer.set_initial_accumulator(0.1f);
  options.optimizer.set_epsilon(1e-7f);
  std::unique_ptr<SparseTable> adagrad = NewTable(options);
  ASSERT_TRUE(adagrad->Update(0.1f, {1}, std::vector<float>{2}).ok());
  ASSERT_TRUE(adagrad->Update(0.1f, {1, 2}, std::vector<float>{1, 3}).ok());
  // Key 1: a = 0.1 + 4 = 4.1, w = -0.1 * 2 / sqrt(4.1); then a = 5.1, w -= 0.1 * 1 / sqrt(5.1).
  const double w1 = -0.1 * 2 / (std::sqrt(4.1) + 1e-7) - 0.1 * 1 / (std::sqrt(5.1) + 1e-7);
  // Key 2: one update from its own accumulator: a = 0.1 + 9.
  const double w2 = -0.1 * 3 / (std::sqrt(9.1) + 1e-7);
  std::vector<float> values = Read(*adagrad, {1, 2});
  EXPECT_NEAR(values[0], w1, 1e-6);
  EXPECT_NEAR(values[1], w2, 1e-6);

  options.optimizer = OptimizerConfig();
  options.optimizer.set_kind(OptimizerConfig::ADAM);
  std::unique_ptr<SparseTable> adam = NewTable(options);
  // Key 5 updated twice, key 6 once, after key 5's first: key 6's first update has its own
  // t = 1 (lazy Adam), so it moves by lr as key 5's first did.
  ASSERT_TRUE(adam->Update(0.01f, {5}, std::vector<float>{1}).ok());
  ASSERT_TRUE(adam->Update(0.01f, {5, 6}, std::vector<float>{1, 1}).ok());
  values = Read(*adam, {5, 6});
  EXPECT_NEAR(values[1], -0.01, 1e-6);  // m̂ = g, v̂ = g^2 at t = 1: a step of lr.
  EXPECT_NEAR(values[0], -0.02, 1e-6);  // Twice the same gradient: two steps of lr.
}

TEST(SparseTableTest, SavedRowsLoadIntoATableThatThenUpdatesAsTheOriginal) {
  // Adam: values, both moments and each row's own update count must all come back.
  std::unique_ptr<SparseTable> original = NewTable(TableOptions(OptimizerConfig::ADAM));
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 3000; ++k) keys.push_back(k * 1000003);  // Every stripe, many blocks.
  std::vector<float> gradient(keys.size() * 4);
  for (size_t i = 0; i < gradient.size(); ++i) gradient[i] = std::sin(0.1 * i);
  ASSERT_TRUE(original->Update(0.01f, keys, gradient).ok());
  ASSERT_TRUE(original->Update(0.01f, {keys[0], keys[7]}, std::vector<float>(8, 1)).ok());
  const std::string saved = original->SaveRows();
  EXPECT_EQ(saved.size(), keys.size() * static_cast<size_t>(original->SavedRowBytes()));
  EXPECT_EQ(original->SavedRowBytes(), 8 + 4 + 3 * 4 * 4);  // Values and two moments.

  std::unique_ptr<SparseTable> restored = NewTable(TableOptions(OptimizerConfig::ADAM));
  ASSERT_TRUE(restored->LoadRows(saved).ok());
  EXPECT_EQ(restored->rows(), original->rows());
  EXPECT_EQ(restored->SaveRows(), saved);  // Key order: the same bytes.
  // The next update of an old row (its third) and of a new one land the same on both.
  for (SparseTable* table : {original.get(), restored.get()}) {
    ASSERT_TRUE(table->Update(0.01f, {keys[0], 42}, std::vector<float>(8, -0.5f)).ok());
  }
  EXPECT_EQ(Read(*restored, {keys[0], keys[1], 42}), Read(*original, {keys[0], keys[1], 42}));

  // Bytes that are not whole rows, a key twice, or a table with rows: refused, nothing made.
  std::unique_ptr<SparseTable> empty = NewTable(TableOptions(OptimizerConfig::ADAM));
  absl::Status status = empty->LoadRows(absl::string_view(saved).substr(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("not whole rows"));
  const std::string row = saved.substr(0, static_cast<size_t>(empty->SavedRowBytes()));
  status = empty->LoadRows(row + row);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(empty->rows(), 0);
  EXPECT_EQ(restored->LoadRows(row).code(), absl::StatusCode::kFailedPrecondition);
  // Saved under SGD, loaded under Adam: the rows are another size.
  std::unique_ptr<SparseTable> sgd = NewTable(TableOptions());
  ASSERT_TRUE(sgd->Update(0.1f, {1}, std::vector<float>(4, 1)).ok());
  EXPECT_EQ(empty->LoadRows(sgd->SaveRows()).code(), absl::StatusCode::kDataLoss);
}

TEST(SparseTableTest, ABadUpdateChangesNothing) {
  std::unique_ptr<SparseTable> table = NewTable(TableOptions());
  const std::vector<float> before = Read(*table, {1, 2});
  std::vector<float> gradient(8, 1.0f);
  // A repeated key.
  absl::Status status = table->Update(0.1f, {1, 1}, gradient);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("key 1 appears twice"));
  // A row of the wrong width: 7 floats for 2 keys of 4.
  status = table->Update(0.1f, {1, 2}, absl::MakeConstSpan(gradient.data(), 7));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("7 floats"));
  // A NaN, and a new key with it: no row is made either.
  gradient[5] = std::nanf("");
  status = table->Update(0.1f, {1, 3}, gradient);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("NaN in the gradient of key 3 at column 1"));
  EXPECT_EQ(table->rows(), 2);
  EXPECT_EQ(Read(*table, {1, 2}), before);
}

TEST(SparseTableTest, RowsPastTheLimitAreRefusedWithoutMakingAny) {
  SparseTable::Options options = TableOptions();
  options.max_rows = 3;
  std::unique_ptr<SparseTable> table = NewTable(options);
  Read(*table, {1, 2});
  std::vector<float> out(3 * 4);
  absl::Status status = table->Read({1, 3, 4}, absl::MakeSpan(out));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("holds 2 rows; 2 more would pass its limit of 3"));
  EXPECT_EQ(table->rows(), 2);
  EXPECT_TRUE(table->Read({1, 2, 3}, absl::MakeSpan(out)).ok());  // Exactly at the limit.
}

TEST(SparseTableTest, ConcurrentUpdatesOfDisjointAndSharedKeysAddUp) {
  SparseTable::Options options = TableOptions();
  options.width = 2;
  options.initializer.set_kind(InitializerConfig::ZEROS);
  std::unique_ptr<SparseTable> table = NewTable(options);
  constexpr int kThreads = 4, kUpdates = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&table, t] {
      for (int u = 0; u < kUpdates; ++u) {
        // Key 0 shared by all; key 100 + t each thread's own. Gradient -1: each update adds lr.
        std::vector<uint64_t> keys = {0, static_cast<uint64_t>(100 + t)};
        ASSERT_TRUE(table->Update(1.0f, keys, std::vector<float>(4, -1.0f)).ok());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(Read(*table, {0, 100, 103}),
            (std::vector<float>{kThreads * kUpdates, kThreads * kUpdates, kUpdates, kUpdates,
                                kUpdates, kUpdates}));
}

TEST(SparseTableTest, CountsItsOverheadBeyondTheRows) {
  SparseTable::Options options = TableOptions(OptimizerConfig::ADAGRAD);
  options.width = 64;
  std::unique_ptr<SparseTable> table = NewTable(options);
  std::vector<uint64_t> keys(100000);
  std::iota(keys.begin(), keys.end(), uint64_t{1} << 33);
  std::vector<float> out(keys.size() * 64);
  ASSERT_TRUE(table->Read(keys, absl::MakeSpan(out)).ok());
  EXPECT_EQ(table->rows(), 100000);
  EXPECT_EQ(table->RowBytes(), int64_t{100000} * 64 * 2 * 4);  // Values and AdaGrad's slot.
  const double per_row = static_cast<double>(table->OverheadBytes()) / table->rows();
  // The map's slots (16 bytes) and control byte at its load, and a 4-byte count; the blocks'
  // unused tails (64 stripes x up to a block) dominate at this size.
  EXPECT_GT(per_row, 20);
  EXPECT_LT(per_row, 2 * SparseTable::kStripes * SparseTable::kRowsPerBlock * 64 * 2 * 4 / 1e5);
}

TEST(SparseTableTest, RefusesAWidthBelowOne) {
  SparseTable::Options options = TableOptions();
  options.width = 0;
  EXPECT_EQ(SparseTable::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
