#include "common/net/shared_memory_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <memory>

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(SharedMemorySegmentTest, BothMappingsSeeTheSameFloats) {
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> created =
      SharedMemorySegment::Create(4096, "test");
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> mapped =
      SharedMemorySegment::Map(fcntl((*created)->fd(), F_DUPFD_CLOEXEC, 0), 4096);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ((*created)->Floats(0, 1024)[7], 0.0f);  // New segments are zeroed.
  (*created)->Floats(0, 1024)[7] = 2.5f;
  EXPECT_EQ((*mapped)->Floats(7, 1)[0], 2.5f);
  (*mapped)->Floats(1000, 24)[23] = -1.0f;
  EXPECT_EQ((*created)->Floats(0, 1024)[1023], -1.0f);
}

TEST(SharedMemorySegmentTest, ItsSizeCannotBeCutShortByThePeer) {
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> created =
      SharedMemorySegment::Create(8192, "test");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_NE(ftruncate((*created)->fd(), 4096), 0);
  EXPECT_NE(ftruncate((*created)->fd(), 16384), 0);
  EXPECT_NE(fcntl((*created)->fd(), F_ADD_SEALS, F_SEAL_WRITE), 0);  // Sealed against new seals.
  (*created)->Floats(2047, 1)[0] = 1.0f;  // The last float is still there.
}

TEST(SharedMemorySegmentTest, MapRefusesAFileWhoseSizeIsNotSealed) {
  const int fd = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> mapped = SharedMemorySegment::Map(fd, 4096);
  EXPECT_EQ(mapped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(mapped.status().message().find("not sealed"), std::string::npos) << mapped.status();
}

TEST(SharedMemorySegmentTest, MapRefusesASegmentSmallerThanExpected) {
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> created =
      SharedMemorySegment::Create(4096, "test");
  ASSERT_TRUE(created.ok()) << created.status();
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> mapped =
      SharedMemorySegment::Map(fcntl((*created)->fd(), F_DUPFD_CLOEXEC, 0), 8192);
  EXPECT_EQ(mapped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(mapped.status().message().find("4096 bytes, not the 8192"), std::string::npos)
      << mapped.status();
}

TEST(SharedMemorySegmentTest, HoldsChecksRangesWithoutOverflow) {
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> created =
      SharedMemorySegment::Create(4096, "test");
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_TRUE((*created)->Holds(0, 1024));
  EXPECT_TRUE((*created)->Holds(1024, 0));
  EXPECT_FALSE((*created)->Holds(1, 1024));
  EXPECT_FALSE((*created)->Holds(-1, 1));
  EXPECT_FALSE((*created)->Holds(1, std::numeric_limits<int64_t>::max()));
  EXPECT_EQ(SharedMemorySegment::Create(0, "test").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
