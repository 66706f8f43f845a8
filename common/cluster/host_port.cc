#include "common/cluster/host_port.h"

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

bool IsValidHostnameLabel(absl::string_view label) {
  if (label.empty() || label.size() > 63) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  for (char c : label) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
  }
  return true;
}

// RFC 1123 host names; IPv4 literals pass too, since their labels are digits.
bool IsValidHostname(absl::string_view host) {
  if (host.empty() || host.size() > 253) return false;
  if (host.back() == '.') host.remove_suffix(1);  // A fully qualified name may end in '.'.
  size_t start = 0;
  while (true) {
    size_t dot = host.find('.', start);
    absl::string_view label =
        host.substr(start, dot == absl::string_view::npos ? absl::string_view::npos : dot - start);
    if (!IsValidHostnameLabel(label)) return false;
    if (dot == absl::string_view::npos) return true;
    start = dot + 1;
  }
}

// A host made only of digits and dots must be a real IPv4 address ("1.2.3.999" is not).
bool LooksLikeIpv4(absl::string_view host) {
  for (char c : host) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c)) && c != '.') return false;
  }
  return true;
}

bool IsValidIpv4(const std::string& host) {
  in_addr addr;
  return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

bool IsValidIpv6(const std::string& host) {
  in6_addr addr;
  return inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}

}  // namespace

std::string HostPort::ToString() const {
  return is_ipv6 ? absl::StrCat("[", host, "]:", port) : absl::StrCat(host, ":", port);
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view address, bool allow_port_zero) {
  HostPort result;
  absl::string_view port_text;
  if (!address.empty() && address.front() == '[') {
    size_t close = address.find(']');
    if (close == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "malformed address \"", address, "\": '[' without ']'; write IPv6 as \"[::1]:2222\""));
    }
    result.host = std::string(address.substr(1, close - 1));
    result.is_ipv6 = true;
    if (close + 1 >= address.size() || address[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("malformed address \"", address,
                                                     "\": no port after ']'; write \"[",
                                                     result.host, "]:PORT\""));
    }
    port_text = address.substr(close + 2);
    if (!IsValidIpv6(result.host)) {
      return absl::InvalidArgumentError(absl::StrCat("malformed host in \"", address, "\": \"",
                                                     result.host,
                                                     "\" is not an IPv6 address"));
    }
  } else {
    size_t colon = address.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "malformed address \"", address, "\": no port; write it as \"host:port\""));
    }
    if (address.find(':') != colon) {
      return absl::InvalidArgumentError(absl::StrCat(
          "malformed address \"", address,
          "\": more than one ':'; put IPv6 addresses in brackets, as \"[::1]:2222\""));
    }
    result.host = std::string(address.substr(0, colon));
    port_text = address.substr(colon + 1);
    bool valid_host = LooksLikeIpv4(result.host) ? IsValidIpv4(result.host)
                                                  : IsValidHostname(result.host);
    if (!valid_host) {
      return absl::InvalidArgumentError(absl::StrCat(
          "malformed host \"", result.host, "\" in \"", address,
          "\": use a host name (letters, digits, '-', '.'), an IPv4 address, or [IPv6]"));
    }
  }
  int port = 0;
  bool digits_only = !port_text.empty();
  for (char c : port_text) digits_only = digits_only && absl::ascii_isdigit(c);
  int min_port = allow_port_zero ? 0 : 1;
  if (!digits_only || !absl::SimpleAtoi(port_text, &port) || port < min_port || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port \"", port_text, "\" in \"", address,
                                                   "\": the port must be a number from ",
                                                   min_port, " to 65535"));
  }
  result.port = port;
  return result;
}

std::vector<std::string> HostsOf(const std::vector<std::string>& addresses) {
  std::vector<std::string> hosts;
  for (const std::string& address : addresses) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(address);
    hosts.push_back(parsed.ok() ? parsed->host : address);
  }
  return hosts;
}

}  // namespace ps
