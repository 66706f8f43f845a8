#!/usr/bin/env bash
# deploy/systemd's units pass `systemd-analyze verify` with no complaint at all, with ExecStart
# pointing at the binaries this build made (verify checks that they exist). And the check can
# fail: a unit with a misspelt sandboxing key is reported.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

command -v systemd-analyze >/dev/null ||
  skip "no systemd-analyze (Debian's systemd package; tools/setup.sh installs it)"

work="${TEST_TMPDIR}/units"
mkdir -p "$work"

# The units as installed, but for the binaries' paths and an instance name.
for unit in ps_server ps_worker; do
  package=$([[ $unit == ps_server ]] && echo server || echo worker)
  sed "s|/usr/bin/${unit}|${RUNFILES}/${package}/${unit}|" \
    "${RUNFILES}/deploy/systemd/${unit}@.service" >"${work}/${unit}@0.service"
done

verify() {
  # verify reports problems on stderr, some with exit status 0 (unknown keys, bad values).
  local output status=0
  output="$(systemd-analyze verify "$@" 2>&1)" || status=$?
  # Outside a booted systemd (a container), verify may mention that; that is not the units'.
  output="$(grep -v -e "System has not been booted" -e "Failed to connect to bus" <<<"$output" || true)"
  if ((status != 0)) || [[ -n "$output" ]]; then
    echo "$output"
    return 1
  fi
}

verify "${work}/ps_server@0.service" "${work}/ps_worker@0.service" ||
  fail "systemd-analyze verify complains about deploy/systemd's units (above)"
log "ok: both units verify cleanly"

sed 's/^ProtectSystem=/ProtectSytem=/' "${work}/ps_server@0.service" >"${work}/misspelt@0.service"
if complaint="$(verify "${work}/misspelt@0.service")"; then
  fail "systemd-analyze verify did not notice a misspelt key; this test checks nothing"
fi
grep -q "ProtectSytem" <<<"$complaint" || fail "unexpected complaint: $complaint"
log "ok: a misspelt key is reported: $complaint"

# What the sandbox promises: no unit loses these lines unnoticed.
for unit in ps_server ps_worker; do
  for line in DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes Restart=on-failure \
    "CapabilityBoundingSet=" "SystemCallFilter=@system-service"; do
    grep -qx "$line" "${RUNFILES}/deploy/systemd/${unit}@.service" ||
      fail "${unit}@.service lost '${line}'"
  done
done
log "ok: both units keep their restart policy and sandbox"
