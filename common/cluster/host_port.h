// "host:port" network addresses as they appear in ClusterSpecs and flags.
#ifndef PS_COMMON_CLUSTER_HOST_PORT_H_
#define PS_COMMON_CLUSTER_HOST_PORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// A parsed address. `host` is a DNS name, an IPv4 literal, or an IPv6 literal without its
// brackets; ToString() puts the brackets back.
struct HostPort {
  std::string host;
  int port = 0;
  bool is_ipv6 = false;

  // "host:port", or "[v6]:port" for IPv6 literals; the form gRPC dials.
  std::string ToString() const;
};

// Parses "host:port", "1.2.3.4:port" or "[::1]:port". The port must be 1..65535 (0 is
// allowed only with `allow_port_zero`, for servers that bind a free port). Hosts follow
// RFC 1123 (letters, digits, '-', '.'). Errors are INVALID_ARGUMENT and say how to fix the
// address; they do not name where it came from (the caller adds that).
absl::StatusOr<HostPort> ParseHostPort(absl::string_view address,
                                       bool allow_port_zero = false);

// The host of each address (ParseHostPort's), in order; an address that does not parse stands
// for itself.
std::vector<std::string> HostsOf(const std::vector<std::string>& addresses);

}  // namespace ps

#endif  // PS_COMMON_CLUSTER_HOST_PORT_H_
