#!/usr/bin/env bash
# Builds the container image (deploy/container/build.sh, from this build's binaries) and checks it
# holds the programs and their libraries; then starts 2 ps and 2 worker containers on a podman
# network with the args and environment of deploy/kubernetes/ (overlays/cpu), each under its pod's
# name (ps-0 answers as ps-0.ps, through /etc/hosts), runs the submit Job's psctl and expects the
# job DONE, and psctl prometheus-config to find each daemon's /metrics port. It removes
# every container, the network and the image it made. Where containers cannot run, it says why and
# skips that part after the checks of the image.
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

# The cpu overlay's args (tests/kubernetes_manifests_test.sh checks them against the programs).
sed -n '/cluster.json: |/,$p' deploy/kubernetes/base/cluster.yaml | tail -n +2 | sed 's/^    //' \
  >"$tmp/cluster.json"
mkdir -p "$tmp/job" && cp config/jobs/default.json "$tmp/job/job.json"
for arg in --task_from_hostname --checkpoint_dir=/var/lib/ps/checkpoints --device=cpu \
    --compute_threads=4 --metrics_port=9100 --metrics_port=9101 --insecure \
    --metrics_bind_host=0.0.0.0; do
  grep -Rq -- "- $arg\$" deploy/kubernetes/base deploy/kubernetes/overlays/cpu ||
    fail "$arg is not in the manifests any more"
done
# Fixed addresses and /etc/hosts entries for the pods' DNS names: podman's CNI networks resolve
# no names without the dnsname plugin.
subnet="10.213.$((RANDOM % 200 + 20))"
$podman_cmd network create --subnet "$subnet.0/24" "$network" >/dev/null
common=(--network "$network" --env GRPC_DNS_RESOLVER=native
        -v "$tmp/cluster.json:/etc/ps/cluster/cluster.json:ro"
        --add-host "ps-0.ps:$subnet.10" --add-host "ps-1.ps:$subnet.11"
        --add-host "worker-0.worker:$subnet.20" --add-host "worker-1.worker:$subnet.21")
# shellcheck disable=SC2206
common+=($flags)
for i in 0 1; do
  containers+=("$id-ps-$i" "$id-worker-$i")
  $podman_cmd run -d --name "$id-ps-$i" --hostname "ps-$i" --ip "$subnet.1$i" \
    --tmpfs /var/lib/ps/checkpoints:mode=1777 "${common[@]}" "$image" \
    /usr/bin/ps_server --cluster_spec=/etc/ps/cluster/cluster.json --task_from_hostname \
    --checkpoint_dir=/var/lib/ps/checkpoints --metrics_port=9100 --insecure \
    --metrics_bind_host=0.0.0.0 >/dev/null
  $podman_cmd run -d --name "$id-worker-$i" --hostname "worker-$i" --ip "$subnet.2$i" \
    "${common[@]}" "$image" \
    /usr/bin/ps_worker --cluster_spec=/etc/ps/cluster/cluster.json --task_from_hostname \
    --device=cpu --compute_threads=4 --metrics_port=9101 --insecure \
    --metrics_bind_host=0.0.0.0 >/dev/null
done
containers+=("$id-submit")
if ! $podman_cmd run --name "$id-submit" "${common[@]}" -v "$tmp/job:/etc/ps/job:ro" \
    --tmpfs /results:mode=1777 "$image" /usr/bin/psctl submit \
    --cluster_spec=/etc/ps/cluster/cluster.json --job=/etc/ps/job/job.json \
    --results=/results/default --replace --overwrite >"$tmp/submit.log" 2>&1; then
  cat "$tmp/submit.log"
  for c in "${containers[@]}"; do echo "== $c"; $podman_cmd logs "$c" 2>&1 | tail -5 || true; done
  fail "psctl submit in a container failed"
fi
tail -3 "$tmp/submit.log"
# psctl submit exits 0 only for a job that ended DONE.
grep -q "step 1000/1000" "$tmp/submit.log" || fail "the job did not run its 1000 steps"
for i in 0 1; do
  # The whole log first: grep -q would end the pipe early, and pipefail would see podman's
  # SIGPIPE.
  log="$($podman_cmd logs "$id-ps-$i" 2>&1)"
  grep -q "ps:$i (/etc/ps/cluster/cluster.json, task from host name ps-$i)" <<<"$log" ||
    fail "ps-$i did not run ps:$i"
done
# Each daemon tells psctl its /metrics port (the manifests' 9100 and 9101): the scrape
# configuration names every pod there.
containers+=("$id-prometheus-config")
config="$($podman_cmd run --name "$id-prometheus-config" "${common[@]}" "$image" \
  /usr/bin/psctl prometheus-config --cluster_spec=/etc/ps/cluster/cluster.json 2>&1)" ||
  { echo "$config"; fail "psctl prometheus-config in a container failed"; }
for target in ps-0.ps:9100 ps-1.ps:9100 worker-0.worker:9101 worker-1.worker:9101; do
  [[ "$config" == *"- targets: [\"$target\"]"* ]] ||
    { echo "$config"; fail "the scrape configuration lacks $target"; }
done
log "PASS: 2 ps and 2 worker containers ran the job to DONE ($podman_cmd run $flags); psctl" \
  "prometheus-config found their /metrics ports"
