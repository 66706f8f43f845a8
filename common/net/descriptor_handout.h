// Hands open file descriptors (shared memory segments) to processes on this host that present a
// ticket: the way a ps gives a worker the segment it opened for it (docs/shared_memory.md).
//
// The ps offers a descriptor and gets a ticket of 16 random bytes, which it sends to the worker
// in the answer of an authenticated gRPC call (OpenSharedMemory: TLS, token and job rules as for
// a push). The worker connects to the handout's Unix socket, sends the ticket and receives the
// descriptor (SCM_RIGHTS). Reaching the socket at all proves the worker shares this host's
// file system and kernel; the ticket, good for one fetch within its lifetime, proves it is the
// caller the ps answered. Anyone on the host may connect; without a live ticket they get nothing.
//
// Peers that connect and send nothing are closed after kConnectionTimeout, the longest waiting
// first when all kMaxConnections places are taken (common/net/ticket_door.h).
#ifndef PS_COMMON_NET_DESCRIPTOR_HANDOUT_H_
#define PS_COMMON_NET_DESCRIPTOR_HANDOUT_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/net/ticket_door.h"

namespace ps {

// Thread-safe.
class DescriptorHandout {
 public:
  static constexpr int kTicketBytes = TicketDoor::kTicketBytes;
  static constexpr int kMaxConnections = TicketDoor::kMaxConnections;
  static constexpr int kMaxOffers = TicketDoor::kMaxOffers;
  static constexpr absl::Duration kConnectionTimeout = TicketDoor::kConnectionTimeout;

  // Listens on a new socket in `directory` (made if missing), which every local user may
  // connect to. INVALID_ARGUMENT where the path would not fit a socket address;
  // FAILED_PRECONDITION where the directory is not one that only this user or root may change
  // (or, writable by others, sticky, as /tmp): another user could put their socket in place.
  static absl::StatusOr<std::unique_ptr<DescriptorHandout>> Start(const std::string& directory);
  // Stops serving (no offer's `make` runs after it returns) and removes the socket.
  ~DescriptorHandout();

  const std::string& socket_path() const { return socket_path_; }

  // What an offer hands out: a descriptor made when the ticket is presented (the handout
  // closes it once sent), or why none is (the peer is refused).
  using MakeDescriptor = std::function<absl::StatusOr<int>()>;
  // Offers what `make` makes for one Fetch within `ttl`; returns the ticket. An offer not
  // fetched in time is withdrawn without `make` running. RESOURCE_EXHAUSTED beyond kMaxOffers
  // offers at once. `make` runs on the handout's thread.
  absl::StatusOr<std::string> Offer(MakeDescriptor make, absl::Duration ttl);
  // Offers not yet fetched nor expired.
  int OffersForTesting() const { return door_->OffersForTesting(); }

  // The client's side: the descriptor offered under `ticket` at `socket_path`, waiting at most
  // `timeout`; the caller owns it. FAILED_PRECONDITION where there is no socket at the path
  // (the ps is on another host or in another container), PERMISSION_DENIED where the ticket is
  // not on offer (unknown, fetched already, expired, or its descriptor could not be made),
  // UNAVAILABLE or DEADLINE_EXCEEDED where the handout did not answer (busy: worth another try).
  static absl::StatusOr<int> Fetch(const std::string& socket_path, absl::string_view ticket,
                                   absl::Duration timeout);

 private:
  DescriptorHandout(int listen_fd, std::string socket_path)
      : socket_path_(std::move(socket_path)), door_(std::make_unique<TicketDoor>(listen_fd)) {}

  const std::string socket_path_;
  std::unique_ptr<TicketDoor> door_;  // Reset first in the destructor.
};

}  // namespace ps

#endif  // PS_COMMON_NET_DESCRIPTOR_HANDOUT_H_
