// A listening socket whose peers get in with a ticket: the way a ps lets in a connection that
// an authenticated gRPC call asked for (the descriptor handout of docs/shared_memory.md, the bulk
// streams of docs/bulk_streams.md).
//
// The ps makes an offer and gets a ticket of 16 random bytes, which it sends to the caller in
// the answer of an authenticated call (TLS, token and job rules as for a push). The caller
// connects, sends the ticket, and the offer's callback takes the connection. A ticket is good
// for one connection within its lifetime; a peer with any other ticket is answered kRefused and
// closed. A peer that connects and sends nothing holds one of kMaxConnections places for at most
// kConnectionTimeout, and gives it up sooner to a newer connection when every place is taken by
// such peers of earlier rounds; a ticket that came with the connection is read at once. So a
// peer with a ticket, which sends it as it connects, gets in past strangers who connect and
// wait.
#ifndef PS_COMMON_NET_TICKET_DOOR_H_
#define PS_COMMON_NET_TICKET_DOOR_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ps {

// Thread-safe.
class TicketDoor {
 public:
  static constexpr int kTicketBytes = 16;
  static constexpr int kMaxConnections = 64;
  static constexpr int kMaxOffers = 1024;
  static constexpr absl::Duration kConnectionTimeout = absl::Seconds(1);
  // The byte a peer is answered with: let in (sent by the offer's callback, which may send more
  // with it), or refused (sent by the door, which then closes the connection).
  static constexpr char kGranted = 'y';
  static constexpr char kRefused = 'n';

  // Serves `listen_fd` (listening, non-blocking; owned from now on) on a thread of its own.
  explicit TicketDoor(int listen_fd);
  // Stops serving (no callback runs after it returns) and closes the listening socket.
  ~TicketDoor();
  TicketDoor(const TicketDoor&) = delete;
  TicketDoor& operator=(const TicketDoor&) = delete;

  // Takes the connection (non-blocking) of the peer that presented the offer's ticket: it owns
  // `fd` from then on, and answers the peer. Runs on the door's thread: must not block for long.
  using Admit = std::function<void(int fd)>;
  // Offers one connection within `ttl` to `admit`; returns the ticket. An offer not taken in
  // time is withdrawn without `admit` running. RESOURCE_EXHAUSTED beyond kMaxOffers at once.
  absl::StatusOr<std::string> Offer(Admit admit, absl::Duration ttl) ABSL_LOCKS_EXCLUDED(mu_);
  // Offers not yet taken nor expired.
  int OffersForTesting() const ABSL_LOCKS_EXCLUDED(mu_);

  // 'count' bytes from the system's random source (tickets, and ids a stranger must not guess).
  static std::string RandomBytes(int count);

 private:
  struct Held {
    Admit admit;
    absl::Time expires;
  };
  // One peer let through the socket, its ticket on the way.
  struct Connection {
    int fd = -1;
    std::string ticket;
    absl::Time deadline;
  };
  // Reads what `connection`'s peer has sent of its ticket, and once whole lets it in or refuses
  // it. True once the door is done with the connection (let in, refused, or hung up: closed).
  bool ReadTicket(Connection* connection) ABSL_LOCKS_EXCLUDED(mu_);
  // Accepts connections, reads their tickets and lets them in or refuses them, until stopping_.
  void Serve();
  // The offer under `ticket`, taken off offer, or null.
  Admit Take(absl::string_view ticket) ABSL_LOCKS_EXCLUDED(mu_);
  void Expire(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  const int listen_fd_;
  const int wake_fd_;  // An eventfd Serve polls: written to stop it.

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Held> offers_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread server_;  // Runs Serve; started last.
};

}  // namespace ps

#endif  // PS_COMMON_NET_TICKET_DOOR_H_
