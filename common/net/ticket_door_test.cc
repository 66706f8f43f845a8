#include "common/net/ticket_door.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/net/testing/ticket_peer.h"

namespace ps {
namespace {

class TicketDoorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    ASSERT_EQ(listen(fd, 16), 0);
    socklen_t length = sizeof(address);
    ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
    port_ = ntohs(address.sin_port);
    door_ = std::make_unique<TicketDoor>(fd);
  }

  // A connection to the door that sent `ticket`; its first byte back (0: closed without one).
  char Present(const std::string& ticket, int* kept = nullptr) const {
    const TicketPeer peer = PresentTicket(port_, ticket);
    EXPECT_GE(peer.fd, 0);
    if (kept != nullptr) {
      *kept = peer.fd;
    } else if (peer.fd >= 0) {
      close(peer.fd);
    }
    return peer.reply;
  }

  // An offer whose callback answers kGranted and keeps the connection in `admitted_`.
  std::string OfferKeeping(absl::Duration ttl = absl::Seconds(10)) {
    absl::StatusOr<std::string> ticket = door_->Offer(
        [this](int fd) {
          const char granted = TicketDoor::kGranted;
          EXPECT_EQ(send(fd, &granted, 1, MSG_NOSIGNAL), 1);
          admitted_fd_ = fd;
          admitted_.Notify();
        },
        ttl);
    EXPECT_TRUE(ticket.ok()) << ticket.status();
    return ticket.value_or("");
  }

  void TearDown() override {
    door_.reset();
    if (admitted_fd_ >= 0) close(admitted_fd_);
  }

  int port_ = 0;
  std::unique_ptr<TicketDoor> door_;
  absl::Notification admitted_;
  std::atomic<int> admitted_fd_{-1};
};

TEST_F(TicketDoorTest, ThePeerWithTheTicketIsLetInOnceAndTheConnectionIsTheOffers) {
  const std::string ticket = OfferKeeping();
  int client = -1;
  EXPECT_EQ(Present(ticket, &client), TicketDoor::kGranted);
  ASSERT_TRUE(admitted_.WaitForNotificationWithTimeout(absl::Seconds(5)));
  // The two ends of one connection.
  const char hello = 'h';
  ASSERT_EQ(send(admitted_fd_, &hello, 1, MSG_NOSIGNAL), 1);
  char got = 0;
  EXPECT_EQ(recv(client, &got, 1, 0), 1);
  EXPECT_EQ(got, 'h');
  close(client);
  EXPECT_EQ(door_->OffersForTesting(), 0);
  // Good for one connection only.
  EXPECT_EQ(Present(ticket), TicketDoor::kRefused);
}

TEST_F(TicketDoorTest, AnyOtherTicketIsRefusedAndTheOfferStays) {
  const std::string ticket = OfferKeeping();
  std::string wrong = ticket;
  wrong[0] = static_cast<char>(wrong[0] ^ 1);
  EXPECT_EQ(Present(wrong), TicketDoor::kRefused);
  EXPECT_EQ(Present(std::string(TicketDoor::kTicketBytes, '\0')), TicketDoor::kRefused);
  EXPECT_EQ(door_->OffersForTesting(), 1);
  EXPECT_EQ(Present(ticket), TicketDoor::kGranted);
}

TEST_F(TicketDoorTest, AnExpiredOfferLetsNoOneIn) {
  const std::string ticket = OfferKeeping(absl::Milliseconds(50));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(Present(ticket), TicketDoor::kRefused);
  EXPECT_FALSE(admitted_.HasBeenNotified());
}

TEST_F(TicketDoorTest, StrangersWhoConnectAndWaitCannotKeepAPeerWithATicketOut) {
  std::vector<int> strangers;
  for (int i = 0; i < TicketDoor::kMaxConnections + 8; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(static_cast<uint16_t>(port_));
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    strangers.push_back(fd);
  }
  absl::SleepFor(absl::Milliseconds(200));  // The door holds every place it has.
  EXPECT_EQ(Present(OfferKeeping()), TicketDoor::kGranted);
  for (int fd : strangers) close(fd);
}

TEST_F(TicketDoorTest, APeerThatSendsTooLittleIsClosedAfterTheTimeout) {
  const absl::Time start = absl::Now();
  EXPECT_EQ(Present("short"), 0);  // Closed without an answer.
  const absl::Duration waited = absl::Now() - start;
  EXPECT_GE(waited, TicketDoor::kConnectionTimeout - absl::Milliseconds(100));
  EXPECT_LT(waited, TicketDoor::kConnectionTimeout + absl::Seconds(2));
}

}  // namespace
}  // namespace ps
