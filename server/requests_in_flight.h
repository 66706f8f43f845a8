// The requests in flight from each peer of a server, bounded (ps_server --max_requests_per_peer)
// so that one peer cannot hold an unbounded number of calls (and their buffers) open. A call
// takes a Slot before anything of its request is decoded and gives it back as it is finished;
// a call beyond the limit is refused with RESOURCE_EXHAUSTED naming the limit and its flag.
//
// Who is a peer (PeerKey): under mutual TLS, the identity of the certificate it presented
// ("task 10.0.0.3", "user alice"), whatever its connections, so that a holder of one certificate
// cannot open more room for itself with more connections; every task of one host shares its
// host's certificate, and so its room. Without mutual TLS nothing names a caller but its
// connection: the address gRPC reports ("ipv4:127.0.0.1:53412"), one peer per TCP connection
// (a token names a role, not a caller, and does not change this).
#ifndef PS_SERVER_REQUESTS_IN_FLIGHT_H_
#define PS_SERVER_REQUESTS_IN_FLIGHT_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/security/peer_identity.h"

namespace ps {

// What counts as one peer: `peer` (PeerOf) made the call over the connection gRPC reports as
// `address` (ServerContextBase::peer()).
std::string PeerKey(const Peer& peer, absl::string_view address);

// Thread-safe. Must outlive its slots.
class RequestsInFlight {
 public:
  // One call's place among its peer's requests in flight, from Take until it is released or
  // destroyed. Move-only; an empty Slot holds nothing.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    ~Slot() { Release(); }

    // Gives the place back now (no-op when empty): call it before finishing the call, so that a
    // client that has the answer can always make its next call.
    void Release();

   private:
    friend class RequestsInFlight;
    using Entry = std::pair<const std::string, int>;
    Slot(RequestsInFlight* owner, Entry* entry) : owner_(owner), entry_(entry) {}

    RequestsInFlight* owner_ = nullptr;
    Entry* entry_ = nullptr;  // The peer's count in owner_->counts_ (stable: a node map).
  };

  // `max_per_peer` >= 1 calls of one peer at once; `server` ("ps:0") names this server in
  // refusals.
  RequestsInFlight(int max_per_peer, std::string server);

  // A slot for a call of `peer` (PeerKey), or RESOURCE_EXHAUSTED when it already has
  // max_per_peer calls in flight: "ps:0 has 1024 requests in flight from ipv4:...; the limit
  // is --max_requests_per_peer=1024".
  absl::StatusOr<Slot> Take(const std::string& peer) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls of `peer` in flight now, and the number of peers with any; for tests.
  int InFlight(const std::string& peer) const ABSL_LOCKS_EXCLUDED(mu_);
  int NumPeers() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Give(Slot::Entry* entry) ABSL_LOCKS_EXCLUDED(mu_);

  const int max_per_peer_;
  const std::string server_;

  mutable absl::Mutex mu_;
  // Peers with at least one call in flight: an entry goes when its count reaches 0, so the map
  // does not grow with every peer ever seen.
  absl::node_hash_map<std::string, int> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_REQUESTS_IN_FLIGHT_H_
