#include "common/cluster/host_port.h"

#include <gtest/gtest.h>

namespace ps {
namespace {

struct ValidCase {
  const char* address;
  const char* host;
  int port;
  bool is_ipv6;
};

TEST(HostPortTest, ParsesValidAddresses) {
  const ValidCase kCases[] = {
      {"localhost:2222", "localhost", 2222, false},
      {"127.0.0.1:1", "127.0.0.1", 1, false},
      {"ps-0.cluster.example.com:65535", "ps-0.cluster.example.com", 65535, false},
      {"[::1]:2222", "::1", 2222, true},
      {"[fe80::1:2]:80", "fe80::1:2", 80, true},
  };
  for (const ValidCase& c : kCases) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.address);
    ASSERT_TRUE(parsed.ok()) << c.address << ": " << parsed.status();
    EXPECT_EQ(parsed->host, c.host);
    EXPECT_EQ(parsed->port, c.port);
    EXPECT_EQ(parsed->is_ipv6, c.is_ipv6);
    EXPECT_EQ(parsed->ToString(), c.address);
  }
}

struct InvalidCase {
  const char* address;
  const char* expected_message_part;
};

TEST(HostPortTest, RejectsInvalidAddressesWithAFix) {
  const InvalidCase kCases[] = {
      {"localhost", "no port"},
      {"localhost:", "bad port"},
      {"localhost:0", "bad port"},
      {"localhost:65536", "from 1 to 65535"},
      {"localhost:22a", "bad port"},
      {"localhost:+22", "bad port"},
      {"::1:2222", "put IPv6 addresses in brackets"},
      {"[::1:2222", "without ']'"},
      {"[::1]2222", "no port after ']'"},
      {"[not-v6]:2222", "is not an IPv6 address"},
      {"bad_host:2222", "malformed host"},
      {"-lead.example:2222", "malformed host"},
      {"a..b:2222", "malformed host"},
      {"1.2.3.999:2222", "malformed host"},
      {":2222", "malformed host"},
  };
  for (const InvalidCase& c : kCases) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.address);
    ASSERT_FALSE(parsed.ok()) << c.address;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(c.expected_message_part), absl::string_view::npos)
        << c.address << " gave: " << parsed.status().message();
  }
}

TEST(HostPortTest, PortZeroOnlyWhenAllowed) {
  EXPECT_FALSE(ParseHostPort("localhost:0").ok());
  absl::StatusOr<HostPort> parsed = ParseHostPort("localhost:0", /*allow_port_zero=*/true);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->port, 0);
}

}  // namespace
}  // namespace ps
