#include "server/shard_sparse_tables.h"

#include <vector>

#include "common/checkpoint/shard_checkpoint.h"
#include "common/job/partitioner.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// A job with one zero-initialized table "emb" of width 2, under plain SGD.
ParameterSpec OneTable() {
  ParameterSpec spec;
  spec.set_job_id("j");
  SparseTableDef* table = spec.add_sparse_tables();
  table->set_name("emb");
  table->set_width(2);
  return spec;
}

SparseRows Rows(std::vector<uint64_t> keys, const std::string& table = "emb") {
  SparseRows rows;
  rows.set_table(table);
  for (uint64_t key : keys) rows.add_keys(key);
  return rows;
}

ShardSparseTables::Entries Entries(std::vector<SparseRows> rows) {
  ShardSparseTables::Entries entries;
  for (SparseRows& row : rows) *entries.Add() = std::move(row);
  return entries;
}

// The first keys SparseShardOf places on `ps` of `num_ps`.
std::vector<uint64_t> KeysOn(int ps, int num_ps, int count) {
  std::vector<uint64_t> keys;
  for (uint64_t key = 0; static_cast<int>(keys.size()) < count; ++key) {
    if (SparseShardOf(key, num_ps) == ps) keys.push_back(key);
  }
  return keys;
}

TEST(ShardSparseTablesTest, ChecksTablesKeysAndRepeats) {
  auto tables = ShardSparseTables::Create(OneTable(), /*num_ps=*/2, /*ps_index=*/0);
  ASSERT_TRUE(tables.ok()) << tables.status();
  const std::vector<uint64_t> here = KeysOn(0, 2, 2), there = KeysOn(1, 2, 1);
  EXPECT_TRUE((*tables)->Check(Entries({Rows(here)}), /*distinct=*/true).ok());
  EXPECT_EQ((*tables)->Floats(Entries({Rows(here)})), 4);

  absl::Status unknown = (*tables)->Check(Entries({Rows(here, "nope")}), false);
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("no sparse table \"nope\""), std::string::npos) << unknown;
  absl::Status elsewhere = (*tables)->Check(Entries({Rows(there)}), false);
  EXPECT_NE(elsewhere.message().find("is on ps:1, not ps:0"), std::string::npos) << elsewhere;
  const std::vector<uint64_t> twice = {here[0], here[0]};
  EXPECT_TRUE((*tables)->Check(Entries({Rows(twice)}), /*distinct=*/false).ok());  // A pull.
  absl::Status repeated = (*tables)->Check(Entries({Rows(twice)}), /*distinct=*/true);
  EXPECT_NE(repeated.message().find("appears twice in one push"), std::string::npos) << repeated;
}

TEST(ShardSparseTablesTest, FindsTheFirstNonFiniteValue) {
  auto tables = ShardSparseTables::Create(OneTable(), 1, 0);
  ASSERT_TRUE(tables.ok());
  const std::vector<float> rows = {1, 2, 3, std::nanf("")};
  EXPECT_EQ((*tables)->FindNonFinite(Entries({Rows({4, 9})}), rows),
            "NaN in sparse table \"emb\" at key 9, column 1");
  EXPECT_EQ((*tables)->FindNonFinite(Entries({Rows({4})}), rows), "");
}

TEST(ShardSparseTablesTest, AppliesRowsAndScaledSums) {
  auto tables = ShardSparseTables::Create(OneTable(), 1, 0);
  ASSERT_TRUE(tables.ok());
  ShardSparseTables& t = **tables;
  t.Apply(/*learning_rate=*/1.0f, Entries({Rows({7})}), std::vector<float>{1, 2});
  // An aggregate of two pushes: key 7 twice, key 8 once; its mean applied at rate 1.
  t.Accumulate(Entries({Rows({7, 8})}), std::vector<float>{2, 2, 4, 4}, /*first=*/true);
  t.Accumulate(Entries({Rows({7})}), std::vector<float>{2, 0}, /*first=*/false);
  t.ApplySums(1.0f, /*scale=*/0.5f);
  std::vector<float> out(4);
  t.Read(Entries({Rows({7, 8})}), absl::MakeSpan(out));
  EXPECT_EQ(out, (std::vector<float>{-3, -3, -2, -2}));
  EXPECT_EQ(t.RowCounts().at("emb"), 2);
  // The sums were cleared: applying again changes nothing.
  t.ApplySums(1.0f, 0.5f);
  t.Read(Entries({Rows({7})}), absl::MakeSpan(out).subspan(0, 2));
  EXPECT_EQ(out[0], -3);
}

TEST(ShardSparseTablesTest, SavesAndLoadsRowsAndOpenSums) {
  auto saved = ShardSparseTables::Create(OneTable(), 1, 0);
  ASSERT_TRUE(saved.ok());
  (*saved)->Apply(1.0f, Entries({Rows({3})}), std::vector<float>{1, 1});
  (*saved)->Accumulate(Entries({Rows({5, 3})}), std::vector<float>{1, 2, 3, 4}, true);
  std::vector<CheckpointBlock> rows, sums;
  for (std::string& bytes : (*saved)->SaveRows()) rows.emplace_back(kSparseRowsBlock, bytes);
  for (std::string& bytes : (*saved)->SaveSums()) sums.emplace_back(kSparseSumBlock, bytes);

  auto loaded = ShardSparseTables::Create(OneTable(), 1, 0);
  ASSERT_TRUE(loaded.ok());
  // Sums with no open aggregate are not the job's.
  EXPECT_EQ((*loaded)->LoadSums(sums, /*open=*/false).code(), absl::StatusCode::kDataLoss);
  ASSERT_TRUE((*loaded)->LoadRows(rows).ok());
  ASSERT_TRUE((*loaded)->LoadSums(sums, /*open=*/true).ok());
  EXPECT_EQ((*loaded)->SaveRows(), (*saved)->SaveRows());
  EXPECT_EQ((*loaded)->SaveSums(), (*saved)->SaveSums());

  // A block of the wrong kind, or cut short, is DATA_LOSS naming the table.
  auto fresh = ShardSparseTables::Create(OneTable(), 1, 0);
  ASSERT_TRUE(fresh.ok());
  std::vector<CheckpointBlock> wrong = {CheckpointBlock(kSumBlock, std::string(rows[0].bytes()))};
  absl::Status status = (*fresh)->LoadRows(wrong);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("sparse table \"emb\""), std::string::npos) << status;
  std::vector<CheckpointBlock> cut = {
      CheckpointBlock(kSparseSumBlock, std::string(sums[0].bytes().substr(1)))};
  EXPECT_EQ((*fresh)->LoadSums(cut, true).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
