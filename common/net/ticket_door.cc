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

// One peer let through the socket, its ticket on the way.
struct Connection {
  int fd = -1;
  std::string ticket;
  absl::Time deadline;
};

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
      bool closed = false;
      if (polled[i + 2].revents != 0) {
        char buffer[kTicketBytes];
        const ssize_t got = recv(connection.fd, buffer, kTicketBytes - connection.ticket.size(),
                                 MSG_DONTWAIT);
        if (got > 0) {
          connection.ticket.append(buffer, static_cast<size_t>(got));
          if (static_cast<int>(connection.ticket.size()) == kTicketBytes) {
            if (const Admit admit = Take(connection.ticket); admit != nullptr) {
              admit(connection.fd);  // Its fd now.
              continue;
            }
            const char refused = kRefused;
            if (send(connection.fd, &refused, 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
              LOG(WARNING) << "ticket door: answering a peer failed: " << std::strerror(errno);
            }
            closed = true;
          }
        } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
          closed = true;  // The peer hung up before sending a whole ticket.
        }
      }
      if (!closed && now >= connection.deadline) closed = true;
      if (closed) {
        close(connection.fd);
      } else {
        open.push_back(std::move(connection));
      }
    }
    connections = std::move(open);
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
        if (static_cast<int>(connections.size()) >= kMaxConnections) {
          // Full: the longest waiting goes. A peer with a ticket sends it as it connects, so
          // strangers who connect and wait cannot keep it out.
          close(connections.front().fd);
          connections.erase(connections.begin());
        }
        connections.push_back(Connection{fd, "", now + kConnectionTimeout});
      }
    }
  }
  for (const Connection& connection : connections) close(connection.fd);
}

}  // namespace ps
