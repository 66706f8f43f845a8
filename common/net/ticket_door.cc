#include "common/net/ticket_door.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

namespace ps {
namespace {

}  // namespace

std::string TicketDoor::RandomBytes(int count) {
  std::random_device random;  // The kernel's random numbers (getrandom).
  std::string bytes;
  while (static_cast<int>(bytes.size()) < count) {
    const uint32_t word = random();
    bytes.append(reinterpret_cast<const char*>(&word),
                 std::min<size_t>(sizeof(word), count - bytes.size()));
  }
  return bytes;
}

TicketDoor::TicketDoor(int listen_fd)
    : listen_fd_(listen_fd), wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  PCHECK(wake_fd_ >= 0) << "eventfd";
  server_ = std::thread([this] { Serve(); });
}

TicketDoor::~TicketDoor() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  PCHECK(write(wake_fd_, &one, sizeof(one)) == sizeof(one));
  server_.join();
  close(listen_fd_);
  close(wake_fd_);
}

absl::StatusOr<std::string> TicketDoor::Offer(Admit admit, absl::Duration ttl) {
  std::string ticket = RandomBytes(kTicketBytes);
  absl::MutexLock lock(&mu_);
  if (static_cast<int>(offers_.size()) >= kMaxOffers) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the ps holds ", kMaxOffers, " tickets not presented yet; try again once they are "
        "presented or expire (", absl::FormatDuration(ttl), ")"));
  }
  offers_[ticket] = Held{std::move(admit), absl::Now() + ttl};
  return ticket;
}

int TicketDoor::OffersForTesting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(offers_.size());
}

TicketDoor::Admit TicketDoor::Take(absl::string_view ticket) {
  absl::MutexLock lock(&mu_);
  auto it = offers_.find(ticket);
  if (it == offers_.end()) return nullptr;
  Admit admit = std::move(it->second.admit);
  offers_.erase(it);
  return admit;
}

void TicketDoor::Expire(absl::Time now) {
  absl::MutexLock lock(&mu_);
  for (auto it = offers_.begin(); it != offers_.end();) {
    if (it->second.expires <= now) {
      offers_.erase(it++);
    } else {
      ++it;
    }
  }
}

bool TicketDoor::ReadTicket(Connection* connection) {
  char buffer[kTicketBytes];
  const ssize_t got = recv(connection->fd, buffer, kTicketBytes - connection->ticket.size(),
                           MSG_DONTWAIT);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
    close(connection->fd);  // The peer hung up before sending a whole ticket.
    return true;
  }
  if (got < 0) return false;
  connection->ticket.append(buffer, static_cast<size_t>(got));
  if (static_cast<int>(connection->ticket.size()) < kTicketBytes) return false;
  if (const Admit admit = Take(connection->ticket); admit != nullptr) {
    admit(connection->fd);  // Its fd now.
    return true;
  }
  const char refused = kRefused;
  if (send(connection->fd, &refused, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
    LOG(WARNING) << "ticket door: answering a peer failed: " << std::strerror(errno);
  }
  close(connection->fd);
  return true;
}

void TicketDoor::Serve() {
  std::vector<Connection> connections;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) break;
    }
    std::vector<pollfd> polled = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Connection& connection : connections) polled.push_back({connection.fd, POLLIN, 0});
    if (poll(polled.data(), polled.size(), /*timeout_ms=*/100) < 0 && errno != EINTR) {
      PLOG(ERROR) << "ticket door: poll";
    }
    const absl::Time now = absl::Now();
    Expire(now);
    // The connections in `polled` before this round's accepts, let in, refused or timed out.
    std::vector<Connection> open;
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection& connection = connections[i];
      if (polled[i + 2].revents != 0 && ReadTicket(&connection)) continue;
      if (now >= connection.deadline) {
        close(connection.fd);
      } else {
        open.push_back(std::move(connection));
      }
    }
    connections = std::move(open);
    size_t earlier = connections.size();  // Accepted in earlier rounds.
    if ((polled[1].revents & POLLIN) != 0) {
      for (;;) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          if (errno == EMFILE || errno == ENFILE) {
            // Out of descriptors: the connection waits in the backlog; don't spin on it.
            LOG_EVERY_N(WARNING, 100) << "ticket door: accept: " << std::strerror(errno);
            absl::SleepFor(absl::Milliseconds(50));
          }
          break;
        }
        Connection connection{fd, "", now + kConnectionTimeout};
        if (ReadTicket(&connection)) continue;  // A peer with a ticket sends it as it connects.
        if (static_cast<int>(connections.size()) >= kMaxConnections) {
          // Full: a stranger who has sent nothing since an earlier round goes, the longest
          // waiting first; with none, the newcomer does (it may try again).
          auto idle = std::find_if(connections.begin(), connections.begin() + earlier,
                                   [](const Connection& c) { return c.ticket.empty(); });
          if (idle == connections.begin() + earlier) {
            close(fd);
            continue;
          }
          close(idle->fd);
          connections.erase(idle);
          --earlier;
        }
        connections.push_back(std::move(connection));
      }
    }
  }
  for (const Connection& connection : connections) close(connection.fd);
}

}  // namespace ps
