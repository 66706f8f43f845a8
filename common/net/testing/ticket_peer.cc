#include "common/net/testing/ticket_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace ps {

TicketPeer PresentTicket(int port, const std::string& ticket) {
  TicketPeer peer;
  peer.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  timeval limit{5, 0};
  setsockopt(peer.fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  if (connect(peer.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(peer.fd);
    peer.fd = -1;
    return peer;
  }
  if (send(peer.fd, ticket.data(), ticket.size(), MSG_NOSIGNAL) !=
          static_cast<ssize_t>(ticket.size()) ||
      recv(peer.fd, &peer.reply, 1, 0) != 1) {
    peer.reply = 0;
  }
  return peer;
}

}  // namespace ps
