#!/bin/bash
# Test hosts on one machine, for tests that source tests/shell_testing.sh first: network
# namespaces, each a "host" with its own address on a private /24 (10.77.N.0/24, N chosen per
# run) behind a Linux bridge in a namespace of its own; the root namespace has 10.77.N.1 on the
# bridge, so psctl reaches every host from where the test runs.
#
#   netns_setup TAG COUNT   creates hosts 1..COUNT (host h is $NET.(10+h), namespace ${TAG}hH)
#                           or skips (exit 0, saying why) where it cannot: not root, no `ip`, no
#                           namespaces or bridges; sets NET and NETNS_HOSTS.
#   netns_cleanup           removes what netns_setup made (call it from the test's on_exit).
#
# Traffic goes only to 10.77.N.x and loopback.

NET=""
NETNS_TAG=""
NETNS_HOSTS=()  # Host namespaces created so far.

# gRPC honors proxy variables; this traffic must go straight to the bridge.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY grpc_proxy no_proxy no_grpc_proxy

netns_cleanup() {
  [ -n "$NETNS_TAG" ] || return 0
  ip link del "${NETNS_TAG}r" 2>/dev/null
  for ns in "${NETNS_HOSTS[@]}" "${NETNS_TAG}b"; do ip netns del "$ns" 2>/dev/null; done
  return 0
}

netns_setup() {  # TAG COUNT
  local tag=$1 count=$2 bridge_ns="$1b" root_veth="$1r" error candidate try h ns
  [ "$(id -u)" = 0 ] || skip "not root: creating network namespaces needs CAP_NET_ADMIN"
  command -v ip >/dev/null || skip "no ip command (iproute2)"
  NETNS_TAG=$tag
  if ! error=$(ip netns add "$bridge_ns" 2>&1); then
    skip "cannot create a network namespace (ip netns add: $error)"
  fi
  if ! error=$(ip -n "$bridge_ns" link add br0 type bridge 2>&1); then
    skip "cannot create a Linux bridge (ip link add type bridge: $error)"
  fi
  # A /24 of 10.77.0.0/16 that this machine does not use yet (parallel runs pick others).
  for try in $(seq 0 199); do
    candidate=$(( ($$ + try) % 200 + 20 ))
    if ! ip -4 -o addr show | grep -q " 10\.77\.$candidate\." &&
       [ -z "$(ip -4 route show "10.77.$candidate.0/24")" ]; then
      NET="10.77.$candidate"
      break
    fi
  done
  [ -n "$NET" ] || fail "no free /24 in 10.77.0.0/16"
  log "hosts on $NET.0/24 (namespaces $tag*)"
  ip -n "$bridge_ns" link set lo up
  ip -n "$bridge_ns" link set br0 up
  ip link add "$root_veth" type veth peer name root netns "$bridge_ns"
  ip -n "$bridge_ns" link set root master br0 up
  ip addr add "$NET.1/24" dev "$root_veth"
  ip link set "$root_veth" up
  for h in $(seq 1 "$count"); do
    ns="${tag}h$h"
    ip netns add "$ns"
    NETNS_HOSTS+=("$ns")
    ip -n "$ns" link add eth0 type veth peer name "host$h" netns "$bridge_ns"
    ip -n "$bridge_ns" link set "host$h" master br0 up
    ip -n "$ns" addr add "$NET.$((10 + h))/24" dev eth0
    ip -n "$ns" link set lo up
    ip -n "$ns" link set eth0 up
  done
}
