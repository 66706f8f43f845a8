#include "server/shared_memory_registry.h"

#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "common/net/descriptor_handout.h"
#include "common/net/shared_memory_segment.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

std::unique_ptr<SharedMemoryRegistry> NewRegistry(int64_t max_bytes) {
  absl::StatusOr<std::unique_ptr<SharedMemoryRegistry>> registry =
      SharedMemoryRegistry::Create("/tmp", max_bytes);  // TEST_TMPDIR is too long for a socket.
  CHECK(registry.ok()) << registry.status();
  return *std::move(registry);
}

// Fetches an opened segment's descriptor, as the worker does, and closes it.
absl::Status FetchAndClose(const SharedMemoryRegistry::Opened& opened) {
  absl::StatusOr<int> fd =
      DescriptorHandout::Fetch(opened.socket_path, opened.ticket, absl::Seconds(5));
  if (!fd.ok()) return fd.status();
  close(*fd);
  return absl::OkStatus();
}

// Opens a segment and fetches its descriptor, as the worker does; the segment exists from then.
absl::StatusOr<SharedMemoryRegistry::Opened> OpenAndFetch(SharedMemoryRegistry* registry,
                                                         const std::string& job, int worker,
                                                         int64_t push_floats,
                                                         int64_t pull_floats) {
  absl::StatusOr<SharedMemoryRegistry::Opened> opened =
      registry->Open(job, registry->DropMark(), worker, push_floats, pull_floats);
  if (!opened.ok()) return opened.status();
  absl::Status fetched = FetchAndClose(*opened);
  if (!fetched.ok()) return fetched;
  return opened;
}

TEST(SharedMemoryRegistryTest, ASegmentIsMadeOnlyWhenItsWorkerFetchesIt) {
  std::unique_ptr<SharedMemoryRegistry> registry = NewRegistry(1 << 20);
  absl::StatusOr<SharedMemoryRegistry::Opened> opened = registry->Open("job", 0, 0, 100, 50);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(registry->bytes(), 0);  // A worker on another host never fetches: it costs nothing.
  EXPECT_EQ(registry->Find(opened->segment, "job", 0).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(SharedMemoryRegistryTest, TheWorkerMapsWhatThePsWritesAndTheReverse) {
  std::unique_ptr<SharedMemoryRegistry> registry = NewRegistry(1 << 20);
  absl::StatusOr<SharedMemoryRegistry::Opened> opened = registry->Open("job", 0, 3, 100, 50);
  ASSERT_TRUE(opened.ok()) << opened.status();
  absl::StatusOr<int> fd =
      DescriptorHandout::Fetch(opened->socket_path, opened->ticket, absl::Seconds(5));
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(registry->bytes(), 600);
  EXPECT_EQ(registry->segments(), 1);
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> worker = SharedMemorySegment::Map(*fd, 600);
  ASSERT_TRUE(worker.ok()) << worker.status();

  absl::StatusOr<SharedMemoryRegistry::Region> region = registry->Find(opened->segment, "job", 3);
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_EQ(region->push.size(), 100u);
  ASSERT_EQ(region->pull.size(), 50u);
  (*worker)->Floats(99, 1)[0] = 7.0f;  // The gradient's last value.
  EXPECT_EQ(region->push[99], 7.0f);
  region->pull[0] = -3.0f;  // The values' first.
  EXPECT_EQ((*worker)->Floats(100, 1)[0], -3.0f);
}

TEST(SharedMemoryRegistryTest, AnotherWorkersOrJobsSegmentIsRefused) {
  std::unique_ptr<SharedMemoryRegistry> registry = NewRegistry(1 << 20);
  absl::StatusOr<SharedMemoryRegistry::Opened> opened = OpenAndFetch(registry.get(), "job", 0, 10, 10);
  ASSERT_TRUE(opened.ok());
  EXPECT_EQ(registry->Find(opened->segment, "job", 1).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry->Find(opened->segment, "other-job", 0).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(registry->Find(opened->segment + 1, "job", 0).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(SharedMemoryRegistryTest, AWorkersOpensPastItsRoomDropItsOldest) {
  std::unique_ptr<SharedMemoryRegistry> registry = NewRegistry(1 << 20);
  std::vector<uint64_t> segments;
  for (int i = 0; i < SharedMemoryRegistry::kSegmentsPerWorker; ++i) {
    absl::StatusOr<SharedMemoryRegistry::Opened> opened = OpenAndFetch(registry.get(), "job", 0, 10, 10);
    ASSERT_TRUE(opened.ok());
    segments.push_back(opened->segment);
  }
  absl::StatusOr<SharedMemoryRegistry::Region> in_flight = registry->Find(segments[0], "job", 0);
  ASSERT_TRUE(in_flight.ok());
  ASSERT_TRUE(OpenAndFetch(registry.get(), "job", 1, 10, 10).ok());  // Another worker's room is its own.
  for (uint64_t segment : segments) EXPECT_TRUE(registry->Find(segment, "job", 0).ok());
  absl::StatusOr<SharedMemoryRegistry::Opened> next = OpenAndFetch(registry.get(), "job", 0, 10, 10);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(registry->bytes(), 80 * (SharedMemoryRegistry::kSegmentsPerWorker + 1));
  absl::Status gone = registry->Find(segments[0], "job", 0).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(gone.message().find("send the tensor in the request"), std::string::npos) << gone;
  in_flight->push[9] = 1.0f;  // A call in flight on the dropped one still holds it.
  EXPECT_TRUE(registry->Find(segments[1], "job", 0).ok());
  EXPECT_TRUE(registry->Find(next->segment, "job", 0).ok());
}

TEST(SharedMemoryRegistryTest, SegmentsStayWithinTheirBytesAndLeaveWithTheirJob) {
  std::unique_ptr<SharedMemoryRegistry> registry = NewRegistry(1000);
  ASSERT_TRUE(OpenAndFetch(registry.get(), "a", 0, 100, 100).ok());  // 800 bytes.
  absl::StatusOr<SharedMemoryRegistry::Opened> refused = registry->Open("b", 0, 0, 100, 100);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("--shared_memory_mb"), std::string::npos);
  EXPECT_EQ(registry->bytes(), 800);
  registry->DropJob("a");
  EXPECT_EQ(registry->bytes(), 0);
  absl::StatusOr<SharedMemoryRegistry::Opened> b = OpenAndFetch(registry.get(), "b", 0, 100, 100);
  ASSERT_TRUE(b.ok());
  registry->DropWorker("b", 1);  // Another worker's leaving changes nothing.
  EXPECT_TRUE(registry->Find(b->segment, "b", 0).ok());
  registry->DropWorker("b", 0);
  EXPECT_EQ(registry->Find(b->segment, "b", 0).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(registry->bytes(), 0);
}

// A DeleteJob racing an OpenSharedMemory: the ps took its DropMark and found the job, then the job
// was deleted before the worker fetched its segment, or before the ps opened it. Neither leaves
// a segment under the deleted job's id; a new job of that id opens as before.
TEST(SharedMemoryRegistryTest, AJobDeletedWhileItsSegmentIsOpenedGetsNone) {
  std::unique_ptr<SharedMemoryRegistry> registry = NewRegistry(1 << 20);
  const uint64_t mark = registry->DropMark();
  absl::StatusOr<SharedMemoryRegistry::Opened> opened = registry->Open("job", mark, 0, 100, 50);
  ASSERT_TRUE(opened.ok()) << opened.status();
  registry->DropJob("job");
  EXPECT_FALSE(FetchAndClose(*opened).ok());
  EXPECT_EQ(registry->segments(), 0);
  EXPECT_EQ(registry->bytes(), 0);
  EXPECT_EQ(registry->Find(opened->segment, "job", 0).status().code(),
            absl::StatusCode::kUnavailable);

  absl::StatusOr<SharedMemoryRegistry::Opened> late = registry->Open("job", mark, 0, 100, 50);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("was deleted"), std::string::npos) << late.status();
  EXPECT_EQ(registry->DropMark(), mark + 1);
  // Another job's deletion after the mark changes nothing for this one.
  const uint64_t later = registry->DropMark();
  absl::StatusOr<SharedMemoryRegistry::Opened> next = registry->Open("job", later, 0, 100, 50);
  ASSERT_TRUE(next.ok()) << next.status();
  registry->DropJob("other");
  EXPECT_TRUE(FetchAndClose(*next).ok());
  EXPECT_EQ(registry->segments(), 1);
}

TEST(SharedMemoryRegistryTest, ADroppedSegmentsPagesAreFreedThoughTheWorkerStillMapsThem) {
  std::unique_ptr<SharedMemoryRegistry> registry = NewRegistry(1 << 20);
  absl::StatusOr<SharedMemoryRegistry::Opened> opened = registry->Open("job", 0, 0, 1024, 1024);
  ASSERT_TRUE(opened.ok());
  absl::StatusOr<int> fd =
      DescriptorHandout::Fetch(opened->socket_path, opened->ticket, absl::Seconds(5));
  ASSERT_TRUE(fd.ok()) << fd.status();
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> worker =
      SharedMemorySegment::Map(*fd, 8192);
  ASSERT_TRUE(worker.ok()) << worker.status();
  {
    absl::StatusOr<SharedMemoryRegistry::Region> region =
        registry->Find(opened->segment, "job", 0);
    ASSERT_TRUE(region.ok());
    region->pull[1023] = 5.0f;
  }
  EXPECT_EQ((*worker)->Floats(2047, 1)[0], 5.0f);
  registry->DropJob("job");
  EXPECT_EQ((*worker)->Floats(2047, 1)[0], 0.0f);  // Given back: zeros, no fault.
}

}  // namespace
}  // namespace ps
