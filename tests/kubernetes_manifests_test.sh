#!/usr/bin/env bash
# Validates deploy/kubernetes/ (tests/kubernetes_manifests_check.js says what it checks): the
# StatefulSets, Services, PodDisruptionBudgets, ConfigMaps and the submit Job of base/ and of
# each overlay against the Kubernetes OpenAPI schemas (the npm package kubernetes-models), the
# TFJob against the training operator's CRD schema (tests/testdata/tfjob_v1_schema.json, ajv),
# every container's flags against the programs, /metrics on every daemon (flag, port and
# prometheus.io annotations agreeing), and each pod's program started with its args and
# environment (its /metrics fetched). Then it breaks copies of the manifests one way at a time
# and expects each to fail.
#
# The validator's npm packages are installed once, pinned, into a cache outside the repository
# ($PS_KUBERNETES_VALIDATOR_DIR, default /tmp/ps-kubernetes-validator-$UID). Where node or npm's
# registry is unavailable and nothing is cached, the test skips, saying why.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

readonly PACKAGES=(kubernetes-models@4.5.1 yaml@2.9.1 ajv@8.20.0)
manifests="$RUNFILES/deploy/kubernetes"
check="$RUNFILES/tests/kubernetes_manifests_check.js"
schema="$RUNFILES/tests/testdata/tfjob_v1_schema.json"
default_job="$RUNFILES/config/jobs/default.json"
binaries="ps_server=$PS_SERVER,ps_worker=$PS_WORKER,psctl=$PSCTL"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"

command -v node >/dev/null || skip "node is not installed (apt-get install nodejs npm)"
cache="${PS_KUBERNETES_VALIDATOR_DIR:-/tmp/ps-kubernetes-validator-$(id -u)}"
stamp="$cache/installed-${PACKAGES[*]// /_}"
stamp="${stamp// /+}"
if [[ ! -e "$stamp" ]]; then
  echo "installing ${PACKAGES[*]} into $cache"
  staging="$(mktemp -d "${cache%/*}/ps-kubernetes-validator.XXXXXX")"
  # Bazel runs tests with HOME elsewhere, so the user's npmrc is not read: trust the system's CAs
  # (a proxy that re-signs TLS is in them) unless npm_config_cafile says otherwise.
  if [[ -z "${npm_config_cafile:-}" && -r /etc/ssl/certs/ca-certificates.crt ]]; then
    export npm_config_cafile=/etc/ssl/certs/ca-certificates.crt
  fi
  if ! npm install --prefix "$staging" --cache "$staging/.npm" --no-audit --no-fund \
      "${PACKAGES[@]}" >"$tmp/npm.log" 2>&1; then
    rm -rf "$staging"
    skip "npm cannot install ${PACKAGES[*]} (no registry?): $(tail -n 5 "$tmp/npm.log")"
  fi
  rm -rf "$cache" && mv "$staging" "$cache" && touch "$stamp"
fi

validate() {  # validate MANIFESTS_DIR [--run]
  node "$check" --modules="$cache" --manifests="$1" --schema="$schema" \
    --default_job="$default_job" --binaries="$binaries" --tmp="$tmp/run" "${@:2}"
}

echo "== the manifests as they are, each pod's program started"
mkdir -p "$tmp/run"
validate "$manifests" --run

# Each case: a file under deploy/kubernetes/, a sed expression that breaks it, and what the
# failure must say.
cases=(
  "base/ps.yaml|s/containerPort: 2222/containerPort: \"2222\"/|containerPort must be integer"
  "base/worker.yaml|s/imagePullPolicy: IfNotPresent/imagePullPolicy: Sometimes/|imagePullPolicy must be equal to one of the allowed values"
  "base/ps.yaml|s/^  serviceName: ps/  serviceName: ps-headless/|serviceName ps-headless names no Service"
  "base/worker.yaml|0,/component: worker/s//component: workers/|the selector does not match"
  "base/ps.yaml|s/port: 2222$/port: 2223/|the gRPC probe's port 2223 is not served"
  "base/cluster.yaml|s/, \"ps-1.ps:2222\"//|cluster.json's \"ps\" is [\"ps-0.ps:2222\"]"
  "base/cluster.yaml|s/\"worker\": \\[/\"worker\": [[/|cluster.json:"
  "base/submit.yaml|s/\"steps\": 1000/\"steps\": 999/|job.json differs from config/jobs/default.json"
  "base/submit.yaml|s/^            name: ps-job$/            name: ps-jobs/|names ConfigMap ps-jobs, which is missing"
  "base/ps.yaml|s/--task_from_hostname/--task_from_host/|ps_server has no flag --task_from_host"
  "base/worker.yaml|s/^  replicas: 2/\\treplicas: 2/|YAML"
  "overlays/gpu/worker-gpu.yaml|s/name: ps-worker/name: worker/|the patch names \"worker\", which the base lacks"
  "overlays/gpu/worker-gpu.yaml|s/nvidia.com\\/gpu: 1/nvidia.com\\/gpu: one/|nvidia.com~1gpu must"
  "overlays/cpu/kustomization.yaml|s/worker-cpu.yaml/worker-cpus.yaml/|worker-cpus.yaml: does not exist"
  "overlays/pytorch/job-pytorch.yaml|s/\"epochs\": 6/\"epochs\": 5/|job.json differs from config/jobs/pytorch_fashion_mnist.json"
  "overlays/pytorch/worker-pytorch.yaml|s/--allow_programs/--allow_program/|ps_worker has no flag --allow_program"
  "tfjob.yaml|0,/replicas: 2/s//replicas: two/|/spec/tfReplicaSpecs/PS/replicas must be integer"
  "tfjob.yaml|s/^    PS:/    ParameterServer:/|property name must be valid (ParameterServer)"
  "tfjob.yaml|s/restartPolicy: OnFailure/restartPolicy: Sometimes/|restartPolicy must be equal to one of the allowed values"
  "tfjob.yaml|s/cleanPodPolicy: Running/cleanPodPolicys: Running/|must NOT have additional properties"
  "tfjob.yaml|0,/- name: tensorflow/s//- name: tf/|no container named \"tensorflow\""
  "tfjob.yaml|s/name: tfjob-port/name: grpc/|no port named \"tfjob-port\""
  "tfjob.yaml|s/      replicas: 1/      replicas: 2/|a TFJob has one chief"
  "tfjob.yaml|s/    Worker:/    Evaluator:/|no Worker replicas"
  "tfjob.yaml|s/--device=auto/--devices=auto/|ps_worker has no flag --devices"
  "tfjob.yaml|0,/memory: 2Gi/s//memory: 2 GiB/|memory must"
  "base/ps.yaml|s/--metrics_port=9100/--metrics_port=9102/|--metrics_port=9102 but its port named metrics is 9100"
  "base/worker.yaml|s/prometheus.io\\/port: \"9101\"/prometheus.io\\/port: \"9100\"/|prometheus.io/port \"9100\""
  "base/ps.yaml|s/targetPort: metrics/targetPort: metric/|targetPort metric names no container port"
  "overlays/cpu/worker-cpu.yaml|/--metrics_port=9101/d|container ps-worker serves no /metrics"
  "tfjob.yaml|0,/name: metrics/s//name: prom/|--metrics_port=9100 but no port named metrics"
  "base/kustomization.yaml|/includeTemplates: true/d|its pods lack app.kubernetes.io/part-of: ps"
)
failures=0
for c in "${cases[@]}"; do
  IFS='|' read -r file expression want <<<"$c"
  broken="$tmp/broken"
  rm -rf "$broken" && cp -r "$manifests" "$broken" && chmod -R u+w "$broken"
  sed -i -e "$expression" "$broken/$file"
  if cmp -s "$manifests/$file" "$broken/$file"; then
    echo "FAIL: $file: the expression $expression changed nothing"
    failures=$((failures + 1))
    continue
  fi
  if output="$(validate "$broken" 2>&1)"; then
    echo "FAIL: $file broken by $expression was accepted"
    failures=$((failures + 1))
  elif [[ "$output" != *"$want"* ]]; then
    echo "FAIL: $file broken by $expression: the output lacks \"$want\":"
    echo "$output"
    failures=$((failures + 1))
  else
    echo "ok: $file broken by $expression: $(grep -F -m1 -- "$want" <<<"$output" || true)"
  fi
done
((failures == 0)) || fail "$failures broken manifests were not caught"
log "PASS: the manifests are valid, and ${#cases[@]} broken copies were each refused"
