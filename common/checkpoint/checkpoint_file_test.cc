#include "common/checkpoint/checkpoint_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/testing/fault_injecting_file_system.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

std::vector<CheckpointBlock> SomeBlocks() {
  std::string floats(4 * 10, '\0');
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<char>(i * 7);
  return {{1, "spec"}, {2, floats}, {7, ""}, {3, std::string(1, '\0')}};
}

void ExpectSameBlocks(const std::vector<CheckpointBlock>& a,
                      const std::vector<CheckpointBlock>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tag, b[i].tag) << i;
    EXPECT_EQ(a[i].payload, b[i].payload) << i;
  }
}

TEST(CheckpointFileTest, BlocksComeBackAsWrittenInOrder) {
  const std::string bytes = EncodeCheckpointFile(SomeBlocks());
  absl::StatusOr<std::vector<CheckpointBlock>> decoded = DecodeCheckpointFile(bytes, "f");
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSameBlocks(*decoded, SomeBlocks());
  EXPECT_EQ(bytes.substr(0, 8), std::string("PSCKPT\r\n"));
  ASSERT_TRUE(DecodeCheckpointFile(EncodeCheckpointFile({}), "empty").ok());
}

TEST(CheckpointFileTest, EveryTruncationIsDataLossNamingTheFile) {
  const std::string bytes = EncodeCheckpointFile(SomeBlocks());
  for (size_t length = 0; length < bytes.size(); ++length) {
    absl::StatusOr<std::vector<CheckpointBlock>> decoded =
        DecodeCheckpointFile(bytes.substr(0, length), "shard-0.ckpt");
    ASSERT_FALSE(decoded.ok()) << length;
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss) << length;
    EXPECT_THAT(decoded.status().message(), HasSubstr("shard-0.ckpt: ")) << length;
  }
  absl::StatusOr<std::vector<CheckpointBlock>> longer =
      DecodeCheckpointFile(bytes + "x", "shard-0.ckpt");
  EXPECT_EQ(longer.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(longer.status().message(), HasSubstr("1 bytes follow the last block"));
}

TEST(CheckpointFileTest, EverySingleFlippedBitIsDetected) {
  const std::string bytes = EncodeCheckpointFile(SomeBlocks());
  for (size_t byte = 0; byte < bytes.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[byte] = static_cast<char>(flipped[byte] ^ (1 << bit));
      EXPECT_FALSE(DecodeCheckpointFile(flipped, "f").ok()) << "byte " << byte << " bit " << bit;
    }
  }
}

TEST(CheckpointFileTest, ANewerFormatIsRefusedNamingBothVersions) {
  std::string bytes = EncodeCheckpointFile(SomeBlocks());
  bytes[8] = 2;  // The version's low byte.
  absl::StatusOr<std::vector<CheckpointBlock>> decoded = DecodeCheckpointFile(bytes, "f");
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(decoded.status().message(), HasSubstr("format version 2; this ps reads version 1"));
  EXPECT_THAT(DecodeCheckpointFile("{\"json\": 1}", "f").status().message(),
              HasSubstr("not a checkpoint file"));
}

TEST(CheckpointFileTest, AWriteReportsTheFilesSizeAndChecksumAndTakesExternalBytes) {
  FileSystem* fs = FileSystem::Default();
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/external.ckpt";
  auto held = std::make_shared<std::string>("held elsewhere");
  CheckpointBlock external = CheckpointBlock::External(7, *held, held);
  std::vector<CheckpointBlock> blocks = SomeBlocks();
  blocks.push_back(external);
  absl::StatusOr<CheckpointFileInfo> info = WriteCheckpointFile(fs, path, blocks);
  ASSERT_TRUE(info.ok()) << info.status();
  absl::StatusOr<std::string> bytes = fs->ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(info->bytes, static_cast<int64_t>(bytes->size()));
  EXPECT_EQ(info->checksum, CheckpointFileChecksum(*bytes));
  EXPECT_EQ(*bytes, EncodeCheckpointFile(blocks));
  absl::StatusOr<std::vector<CheckpointBlock>> read = DecodeCheckpointFile(*bytes, path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->back().payload, "held elsewhere");
}

TEST(CheckpointFileTest, AFailedWriteLeavesThePreviousFile) {
  FaultInjectingFileSystem fs;
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/shard-0.ckpt";
  ASSERT_TRUE(WriteCheckpointFile(&fs, path, SomeBlocks()).ok());
  fs.FailWrites("shard-0.ckpt");
  absl::Status failed = WriteCheckpointFile(&fs, path, {{9, "newer"}}).status();
  EXPECT_EQ(failed.code(), absl::StatusCode::kResourceExhausted);
  fs.ClearFaults();
  absl::StatusOr<std::vector<CheckpointBlock>> read = ReadCheckpointFile(&fs, path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSameBlocks(*read, SomeBlocks());
  fs.HideFiles("shard-0.ckpt");
  EXPECT_EQ(ReadCheckpointFile(&fs, path).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ps
