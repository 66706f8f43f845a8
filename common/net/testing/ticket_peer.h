// A peer of a TicketDoor (common/net/ticket_door.h) on loopback, for tests: connects, presents a
// ticket, reads the door's answer.
#ifndef PS_COMMON_NET_TESTING_TICKET_PEER_H_
#define PS_COMMON_NET_TESTING_TICKET_PEER_H_

#include <string>

namespace ps {

struct TicketPeer {
  int fd = -1;      // The connection (the caller closes it); -1 where it could not connect.
  char reply = 0;   // The door's answer: TicketDoor::kGranted, kRefused, or 0 (closed, none).
};

// Connects to 127.0.0.1:`port` and sends `ticket` (whatever its size); waits up to 5 s for the
// answer's first byte.
TicketPeer PresentTicket(int port, const std::string& ticket);

}  // namespace ps

#endif  // PS_COMMON_NET_TESTING_TICKET_PEER_H_
