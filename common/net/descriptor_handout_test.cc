#include "common/net/descriptor_handout.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include "common/net/shared_memory_segment.h"
#include "glog/logging.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

// A directory of its own under /tmp (a test's TEST_TMPDIR is often too long for a socket's
// path), removed with what is in it when the tests end.
std::string TestDirectory() {
  // Never destroyed, so that the exit handler still finds it.
  static const std::string* const directory = [] {
    char name[] = "/tmp/handout-test-XXXXXX";  // mkdtemp fills in the X's.
    CHECK(mkdtemp(name) != nullptr);
    auto* made = new std::string(name);
    std::atexit([] { std::filesystem::remove_all(TestDirectory()); });
    return made;
  }();
  return *directory;
}

class DescriptorHandoutTest : public testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<DescriptorHandout>> started =
        DescriptorHandout::Start(TestDirectory());
    ASSERT_TRUE(started.ok()) << started.status();
    handout_ = *std::move(started);
    absl::StatusOr<std::unique_ptr<SharedMemorySegment>> segment =
        SharedMemorySegment::Create(4096, "test");
    ASSERT_TRUE(segment.ok()) << segment.status();
    segment_ = *std::move(segment);
  }

  // An offer of a copy of the segment's descriptor, made when fetched.
  DescriptorHandout::MakeDescriptor Copy() const {
    return [fd = segment_->fd()]() -> absl::StatusOr<int> {
      return fcntl(fd, F_DUPFD_CLOEXEC, 0);
    };
  }

  std::unique_ptr<DescriptorHandout> handout_;
  std::unique_ptr<SharedMemorySegment> segment_;
};

TEST_F(DescriptorHandoutTest, ATicketFetchesTheOfferedSegmentOnce) {
  absl::StatusOr<std::string> ticket = handout_->Offer(Copy(), absl::Seconds(10));
  ASSERT_TRUE(ticket.ok()) << ticket.status();
  absl::StatusOr<int> fd =
      DescriptorHandout::Fetch(handout_->socket_path(), *ticket, absl::Seconds(5));
  ASSERT_TRUE(fd.ok()) << fd.status();
  absl::StatusOr<std::unique_ptr<SharedMemorySegment>> mapped = SharedMemorySegment::Map(*fd, 4096);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  segment_->Floats(3, 1)[0] = 42.0f;
  EXPECT_EQ((*mapped)->Floats(3, 1)[0], 42.0f);
  EXPECT_EQ(handout_->OffersForTesting(), 0);

  absl::StatusOr<int> again =
      DescriptorHandout::Fetch(handout_->socket_path(), *ticket, absl::Seconds(5));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kPermissionDenied) << again.status();
}

TEST_F(DescriptorHandoutTest, AStrangersTicketGetsNothing) {
  ASSERT_TRUE(handout_->Offer(Copy(), absl::Seconds(10)).ok());
  absl::StatusOr<int> fd = DescriptorHandout::Fetch(
      handout_->socket_path(), std::string(DescriptorHandout::kTicketBytes, 'x'),
      absl::Seconds(5));
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied) << fd.status();
  EXPECT_EQ(handout_->OffersForTesting(), 1);  // The real offer is still there for its owner.
  EXPECT_EQ(DescriptorHandout::Fetch(handout_->socket_path(), "short", absl::Seconds(5))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DescriptorHandoutTest, AnOfferNotFetchedInTimeIsWithdrawn) {
  absl::StatusOr<std::string> ticket = handout_->Offer(Copy(), absl::Milliseconds(1));
  ASSERT_TRUE(ticket.ok());
  absl::SleepFor(absl::Milliseconds(300));  // The handout expires offers every 100 ms.
  EXPECT_EQ(handout_->OffersForTesting(), 0);
  absl::StatusOr<int> fd =
      DescriptorHandout::Fetch(handout_->socket_path(), *ticket, absl::Seconds(5));
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied) << fd.status();
}

TEST_F(DescriptorHandoutTest, ASilentPeerDoesNotHoldUpOthers) {
  // Connected, sending nothing: the handout serves others meanwhile.
  const int silent = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, handout_->socket_path().c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(connect(silent, reinterpret_cast<const sockaddr*>(&address), sizeof(address)), 0);
  absl::StatusOr<std::string> ticket = handout_->Offer(Copy(), absl::Seconds(10));
  ASSERT_TRUE(ticket.ok());
  absl::StatusOr<int> fd =
      DescriptorHandout::Fetch(handout_->socket_path(), *ticket, absl::Seconds(5));
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  // The silent peer is let go after kConnectionTimeout: its connection reads end of file.
  char byte;
  timeval limit = absl::ToTimeval(absl::Seconds(10));
  setsockopt(silent, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  EXPECT_EQ(recv(silent, &byte, 1, 0), 0);
  close(silent);
}

TEST_F(DescriptorHandoutTest, NoSocketMeansAnotherHost) {
  absl::StatusOr<int> fd = DescriptorHandout::Fetch(
      TestDirectory() + "/absent.sock", std::string(DescriptorHandout::kTicketBytes, 'x'),
      absl::Seconds(1));
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kFailedPrecondition) << fd.status();
  EXPECT_NE(fd.status().message().find("another host"), std::string::npos);
}

TEST_F(DescriptorHandoutTest, StoppingRemovesTheSocketAndClosesOffers) {
  const std::string path = handout_->socket_path();
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_TRUE(S_ISSOCK(info.st_mode));
  EXPECT_EQ(info.st_mode & 0777, 0666u);
  ASSERT_TRUE(handout_->Offer(Copy(), absl::Seconds(10)).ok());
  handout_.reset();
  EXPECT_NE(stat(path.c_str(), &info), 0);
}

TEST_F(DescriptorHandoutTest, AnOfferWhoseDescriptorCannotBeMadeRefusesItsTicket) {
  bool made = false;
  absl::StatusOr<std::string> ticket = handout_->Offer(
      [&made]() -> absl::StatusOr<int> {
        made = true;
        return absl::ResourceExhaustedError("no room");
      },
      absl::Seconds(10));
  ASSERT_TRUE(ticket.ok());
  absl::StatusOr<int> fd =
      DescriptorHandout::Fetch(handout_->socket_path(), *ticket, absl::Seconds(5));
  EXPECT_EQ(fd.status().code(), absl::StatusCode::kPermissionDenied) << fd.status();
  EXPECT_TRUE(made);
}

TEST_F(DescriptorHandoutTest, OffersBeyondTheirLimitAreRefused) {
  for (int i = 0; i < DescriptorHandout::kMaxOffers; ++i) {
    ASSERT_TRUE(handout_->Offer(Copy(), absl::Seconds(10)).ok());
  }
  EXPECT_EQ(handout_->Offer(Copy(), absl::Seconds(10)).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(DescriptorHandoutStartTest, ADirectoryOthersMayChangeIsRefused) {
  const std::string directory = TestDirectory() + "/open-to-all";
  ASSERT_EQ(mkdir(directory.c_str(), 0777), 0);
  ASSERT_EQ(chmod(directory.c_str(), 0777), 0);  // Not sticky: anyone may swap the socket.
  absl::StatusOr<std::unique_ptr<DescriptorHandout>> started = DescriptorHandout::Start(directory);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition) << started.status();
  ASSERT_EQ(chmod(directory.c_str(), 01777), 0);  // Sticky, as /tmp: only the owner may remove.
  EXPECT_TRUE(DescriptorHandout::Start(directory).ok());
}

TEST(DescriptorHandoutStartTest, ATooLongDirectoryIsRefusedSayingSo) {
  absl::StatusOr<std::unique_ptr<DescriptorHandout>> started =
      DescriptorHandout::Start(TestDirectory() + "/" + std::string(120, 'd'));
  EXPECT_EQ(started.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(started.status().message().find("shorter directory"), std::string::npos);
}

}  // namespace
}  // namespace ps
