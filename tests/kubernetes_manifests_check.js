// Checks deploy/kubernetes/ (tests/kubernetes_manifests_test.sh runs it):
//   1. reads base/ and each overlay as kustomize rendered them (NAME.yaml in --rendered, NAME's
//      slashes written as dots), and validates every object against the Kubernetes OpenAPI
//      schemas (the kubernetes-models npm package);
//      the TFJob against the training operator's CRD schema (tests/testdata/tfjob_v1_schema.json,
//      with ajv) and each replica's pod template with kubernetes-models;
//   2. checks what the schemas cannot: selectors that match the pods, Services and ConfigMaps
//      and claims that exist, probes on the served port, a ClusterSpec that names each
//      StatefulSet pod in a generated ConfigMap (its name hashed, so that a change restarts the
//      pods), the job file equal to config/jobs/default.json, the operator's rules for a TFJob,
//      /metrics on every ps and worker (--metrics_port, the port named "metrics" and the pod's
//      prometheus.io annotations agreeing), a tagged image and a program for every container,
//      a volume at every worker's --data_root, and results kept in a claim;
//   3. with --binaries, checks every container's flags against the program's --helpfull, and
//      with --run, starts ps_server and ps_worker with the args and environment each manifest
//      gives its pods (the pod's host name faked with --task_hostname, TF_CONFIG as the operator
//      writes it), on free loopback ports, and checks each resolves its task and serves
//      /metrics; then stops them.
// Usage: node kubernetes_manifests_check.js --modules=DIR --rendered=DIR --tfjob=FILE --schema=FILE
//          --trainjob=FILE --trainer_schema=FILE
//          --default_job=FILE [--binaries=ps_server=P,ps_worker=P,psctl=P] [--run --tmp=DIR]
// Exits 1 with every problem found, one a line.
'use strict';

const childProcess = require('child_process');
const fs = require('fs');
const http = require('http');
const path = require('path');

const args = Object.fromEntries(process.argv.slice(2).map((a) => {
  const m = a.match(/^--([a-z_]+)(?:=(.*))?$/);
  if (!m) throw new Error(`bad argument ${a}`);
  return [m[1], m[2] === undefined ? true : m[2]];
}));
const load = require('module').createRequire(path.resolve(args.modules) + '/');
const YAML = load('yaml');
const Ajv = load('ajv');

const problems = [];
function problem(where, message) {
  problems.push(`${where}: ${message}`);
}

// ---- Reading ----------------------------------------------------------------------------

function readDocuments(file) {
  if (!fs.existsSync(file)) {
    problem(file, 'does not exist');
    return [];
  }
  const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
  const objects = [];
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      problem(file, `YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
      continue;
    }
    const value = doc.toJSON();
    if (value !== null) objects.push({ file, object: value });
  }
  return objects;
}

// ---- Validation ---------------------------------------------------------------------------

function formatErrors(e) {
  return (e.errors || []).map((x) => `${x.instancePath} ${x.message}`).join('; ') || e.message;
}

function modelOf(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : [null, apiVersion];
  const module = group ? `kubernetes-models/${group}/${version}/${kind}` :
                         `kubernetes-models/${version}/${kind}`;
  try {
    return load(module)[kind];
  } catch (e) {
    return null;
  }
}

function validateSchema(where, object) {
  const Model = modelOf(object.apiVersion, object.kind);
  if (!Model) return problem(where, `no schema for ${object.apiVersion} ${object.kind}`);
  try {
    new Model(object).validate();
  } catch (e) {
    problem(where, `${object.kind} ${object.metadata && object.metadata.name}: ${formatErrors(e)}`);
  }
}

const ajv = new Ajv({ allErrors: true });
const validateTfJob = ajv.compile(JSON.parse(fs.readFileSync(args.schema, 'utf8')));
const trainerSchemas = JSON.parse(fs.readFileSync(args.trainer_schema, 'utf8'));
const validateTrainer = {
  TrainJob: ajv.compile(trainerSchemas.TrainJob),
  TrainingRuntime: ajv.compile(trainerSchemas.TrainingRuntime),
};
const { PodTemplateSpec } = load('kubernetes-models/v1/PodTemplateSpec');
const { JobTemplateSpec } = load('kubernetes-models/batch/v1/JobTemplateSpec');

function matches(selector, labels) {
  return Object.entries(selector || {}).every(([k, v]) => (labels || {})[k] === v);
}

function containerPorts(podSpec) {
  return podSpec.containers.flatMap((c) => (c.ports || []).map((p) => p.containerPort));
}

function checkPodSpec(where, podSpec, objects) {
  const volumes = new Set((podSpec.volumes || []).map((v) => v.name));
  const exists = (kind, name) => objects.some((o) => o.kind === kind && o.metadata.name === name);
  // The programs never call the API server; a token that may read Secrets would give a pod
  // every task's key.
  if (podSpec.automountServiceAccountToken !== false) {
    problem(where, 'automountServiceAccountToken is not false: the pod would hold an API token ' +
            'it never needs');
  }
  for (const v of podSpec.volumes || []) {
    const mode = v.secret && v.secret.defaultMode;
    if (v.secret && (mode === undefined || (mode & 0o007) !== 0 ||
                     (v.secret.items || []).some((i) => ((i.mode || 0) & 0o007) !== 0))) {
      problem(where, `the Secret ${v.secret.secretName} is readable by every user in the ` +
              `container (defaultMode ${mode === undefined ? '0644, the default' :
                                       mode.toString(8)}): give its files to the fsGroup only`);
    }
    const sources = Object.keys(v).filter((k) => k !== 'name');
    if (sources.length !== 1) {
      problem(where, `volume ${v.name} has ${sources.length} sources (${sources.join(', ')}); ` +
              'a volume has one');
    }
    if (v.configMap && objects && !exists('ConfigMap', v.configMap.name)) {
      problem(where, `volume ${v.name} names ConfigMap ${v.configMap.name}, which is missing`);
    }
    const claim = v.persistentVolumeClaim;
    if (claim && objects && !exists('PersistentVolumeClaim', claim.claimName)) {
      problem(where, `volume ${v.name} names PersistentVolumeClaim ${claim.claimName}, which ` +
              'is missing');
    }
  }
  return volumes;
}

// The volume mounted at `dir` or above it in container `c` of `podSpec`, or undefined.
function volumeAt(podSpec, c, dir) {
  const mounts = (c.volumeMounts || []).filter((m) => `${dir}/`.startsWith(`${m.mountPath}/`));
  const m = mounts.sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
  return m && (podSpec.volumes || []).find((v) => v.name === m.name);
}

// The value of --name=VALUE in container `c`'s args (the last, which the program takes), or
// undefined.
function flagValue(c, name) {
  const a = (c.args || []).filter((x) => x.startsWith(`--${name}=`)).pop();
  return a && a.slice(name.length + 3);
}

function checkContainers(where, podSpec, volumes) {
  const ports = containerPorts(podSpec);
  for (const c of podSpec.containers) {
    for (const m of c.volumeMounts || []) {
      if (!volumes.has(m.name)) problem(where, `container ${c.name} mounts ${m.name}, no volume`);
    }
    // The image has no entry point, and a rebuilt image must be told apart by its tag.
    if (!c.command || c.command.length === 0) {
      problem(where, `container ${c.name} has no command (the image has no entry point)`);
    }
    if (!/:[\w][\w.-]*$/.test((c.image || '').split('/').pop())) {
      problem(where, `container ${c.name}'s image ${c.image} has no tag (images: in the ` +
              'kustomization sets it)');
    }
    // A daemon in a pod serves on the pod's address, not loopback: plaintext there is refused
    // unless said aloud (--insecure), and TLS needs its certificates.
    const daemon = c.command && ['ps_server', 'ps_worker'].includes(path.basename(c.command[0]));
    const args = c.args || [];
    const insecure = args.filter((a) => /^--insecure(=|$)/.test(a)).pop();
    if (daemon && !['--insecure', '--insecure=true'].includes(insecure) &&
        !args.some((a) => /^--(certs|tls_cert)=/.test(a))) {
      problem(where, `container ${c.name} would refuse to start: it serves plaintext on the ` +
              "pod's address without --insecure (or TLS with --certs=DIR)");
    }
    // A worker reads jobs' data under --data_root: a volume must be there.
    const dataRoot = flagValue(c, 'data_root');
    if (c.command && path.basename(c.command[0]) === 'ps_worker' && dataRoot === undefined) {
      problem(where, `container ${c.name} has no --data_root: no job could read a data file`);
    } else if (dataRoot !== undefined && !volumeAt(podSpec, c, dataRoot)) {
      problem(where, `container ${c.name}: --data_root=${dataRoot} but no volume is mounted there`);
    }
    // psctl's results outlive the pod.
    const results = flagValue(c, 'results');
    const resultsVolume = results !== undefined && volumeAt(podSpec, c, results);
    if (results !== undefined && !(resultsVolume && resultsVolume.persistentVolumeClaim)) {
      problem(where, `container ${c.name}: --results=${results} is not on a PersistentVolumeClaim ` +
              '(the results would go with the pod)');
    }
    for (const probe of [c.readinessProbe, c.livenessProbe].filter(Boolean)) {
      if (probe.grpc && !ports.includes(probe.grpc.port)) {
        problem(where, `container ${c.name}: the gRPC probe's port ${probe.grpc.port} is not served`);
      }
    }
  }
}

// Every ps and worker container serves /metrics (--metrics_port=N) on its port named "metrics",
// N, and the pod's annotations point Prometheus's pod discovery at N.
function checkMetrics(where, template) {
  const annotations = (template.metadata && template.metadata.annotations) || {};
  for (const c of template.spec.containers) {
    const flag = (c.args || []).map((a) => a.match(/^--metrics_port=(\d+)$/)).find(Boolean);
    const port = (c.ports || []).find((p) => p.name === 'metrics');
    if (!flag) {
      problem(where, `container ${c.name} serves no /metrics (no --metrics_port=PORT)`);
      continue;
    }
    const n = Number(flag[1]);
    if (!port) {
      problem(where, `container ${c.name}: --metrics_port=${n} but no port named metrics`);
    } else if (port.containerPort !== n) {
      problem(where, `container ${c.name}: --metrics_port=${n} but its port named metrics is ` +
              `${port.containerPort}`);
    }
    // The daemons serve /metrics on loopback unless told otherwise: Prometheus scrapes the
    // pod's address.
    const bindHost = flagValue(c, 'metrics_bind_host');
    if (bindHost === undefined || /^(127\.|localhost$|::1$)/.test(bindHost)) {
      problem(where, `container ${c.name}: /metrics on loopback (--metrics_bind_host=` +
              `${bindHost || '127.0.0.1, the default'}): Prometheus could not scrape it`);
    }
    const scrape = annotations['prometheus.io/scrape'];
    const annotated = annotations['prometheus.io/port'];
    if (scrape !== 'true' || annotated !== String(n)) {
      problem(where, `container ${c.name}: --metrics_port=${n} but the pod's annotations are ` +
              `prometheus.io/scrape ${JSON.stringify(scrape)}, prometheus.io/port ` +
              `${JSON.stringify(annotated)}`);
    }
  }
}

// A StatefulSet whose daemons take TLS from a Secret (--certs=DIR): each pod must see only its
// own directory of it (subPathExpr $(POD_NAME), POD_NAME the pod's name), holding its own
// certificate and key, the CA's certificate and no other key; ca.key and psctl's key in no
// daemon's Secret; probes that need no TLS.
function checkTlsPods(where, s) {
  const podSpec = s.spec.template.spec;
  for (const c of podSpec.containers) {
    const certs = flagValue(c, 'certs');
    if (certs === undefined) continue;
    const mount = (c.volumeMounts || []).find((m) => m.mountPath === certs);
    const volume = mount && (podSpec.volumes || []).find((v) => v.name === mount.name);
    if (!volume || !volume.secret) {
      problem(where, `container ${c.name}: --certs=${certs} but no Secret is mounted there`);
      continue;
    }
    for (const probe of [c.readinessProbe, c.livenessProbe].filter(Boolean)) {
      if (probe.grpc) {
        problem(where, `container ${c.name}: a gRPC probe under TLS (kubelet's speaks no TLS; ` +
                'use tcpSocket)');
      }
    }
    const podName = (c.env || []).find((e) => e.valueFrom && e.valueFrom.fieldRef &&
                                              e.valueFrom.fieldRef.fieldPath === 'metadata.name');
    if (!podName || mount.subPathExpr !== `$(${podName.name})` || !volume.secret.items) {
      problem(where, `container ${c.name}: every pod would see every task's key (mount the ` +
              "Secret with items per pod and subPathExpr: $(POD_NAME), POD_NAME the pod's name)");
      continue;
    }
    for (const item of volume.secret.items) {
      if (['ca.key', 'psctl.key'].includes(item.key)) {
        problem(where, `the Secret ${volume.secret.secretName} gives the pods ${item.key} ` +
                '(it stays with the operator and psctl)');
      }
    }
    for (let i = 0; i < s.spec.replicas; i++) {
      const pod = `${s.metadata.name}-${i}`;
      const seen = volume.secret.items.filter((x) => x.path.startsWith(`${pod}/`));
      const files = seen.map((x) => x.path.slice(pod.length + 1));
      for (const want of [`${pod}.crt`, `${pod}.key`, 'ca.crt']) {
        const item = seen.find((x) => x.path === `${pod}/${want}`);
        if (!item || item.key !== want) problem(where, `${pod} would not see its ${want}`);
      }
      for (const x of seen.filter((y) => y.key.endsWith('.key') && y.key !== `${pod}.key`)) {
        problem(where, `${pod} would see ${x.key}, another task's key`);
      }
      if (files.length === 0) problem(where, `${pod} has no directory in ${volume.secret.secretName}`);
    }
  }
}

function checkRender(name, rendered) {
  const objects = rendered.map((r) => r.object);
  const where = (o) => `${name}: ${o.kind} ${o.metadata.name}`;
  for (const r of rendered) validateSchema(`${name} (${r.file})`, r.object);
  const byKind = (kind) => objects.filter((o) => o.kind === kind);
  const statefulSets = byKind('StatefulSet');
  for (const s of statefulSets) {
    const labels = s.spec.template.metadata.labels;
    if (!matches(s.spec.selector.matchLabels, labels)) {
      problem(where(s), 'the selector does not match the pod template\'s labels');
    }
    const service = byKind('Service').find((v) => v.metadata.name === s.spec.serviceName);
    if (!service) {
      problem(where(s), `serviceName ${s.spec.serviceName} names no Service`);
    } else {
      if (service.spec.clusterIP !== 'None') problem(where(service), 'not headless (clusterIP: None)');
      if (!matches(service.spec.selector, labels)) {
        problem(where(service), `the selector does not match StatefulSet ${s.metadata.name}'s pods`);
      }
      const named = s.spec.template.spec.containers.flatMap((c) => (c.ports || []).map((p) => p.name));
      for (const p of service.spec.ports) {
        if (typeof p.targetPort === 'string' && !named.includes(p.targetPort)) {
          problem(where(service), `targetPort ${p.targetPort} names no container port`);
        }
      }
    }
    // docs/DEPLOY.md's PodMonitor selects the pods by this label.
    if (labels['app.kubernetes.io/part-of'] !== 'ps') {
      problem(where(s), 'its pods lack app.kubernetes.io/part-of: ps, which the PodMonitor selects');
    }
    const volumes = checkPodSpec(where(s), s.spec.template.spec, objects);
    for (const t of s.spec.volumeClaimTemplates || []) volumes.add(t.metadata.name);
    checkContainers(where(s), s.spec.template.spec, volumes);
    checkMetrics(where(s), s.spec.template);
    checkTlsPods(where(s), s);
  }
  for (const j of byKind('Job')) {
    checkContainers(where(j), j.spec.template.spec, checkPodSpec(where(j), j.spec.template.spec, objects));
  }
  for (const b of byKind('PodDisruptionBudget')) {
    if (!statefulSets.some((s) => matches(b.spec.selector.matchLabels, s.spec.template.metadata.labels))) {
      problem(where(b), 'the selector matches no StatefulSet\'s pods');
    }
  }
  // The ClusterSpec names every pod of each StatefulSet, <name>-<i>.<service>:<port>, in a
  // ConfigMap whose name kustomize hashed from its content (configMapGenerator), so that
  // applying a changed ClusterSpec restarts the pods that read it.
  const clusterMap = byKind('ConfigMap').find((c) => /^ps-cluster(-[a-z0-9]+)?$/.test(c.metadata.name));
  if (!clusterMap) return problem(name, 'no ConfigMap ps-cluster');
  if (!/^ps-cluster-[a-z0-9]{10}$/.test(clusterMap.metadata.name)) {
    problem(where(clusterMap), 'not generated (configMapGenerator): its name has no content ' +
            'hash, so the pods would go on with the old ClusterSpec after it changed');
  }
  let cluster;
  try {
    cluster = JSON.parse(clusterMap.data['cluster.json']).cluster;
  } catch (e) {
    return problem(where(clusterMap), `cluster.json: ${e.message}`);
  }
  for (const job of ['ps', 'worker']) {
    const s = statefulSets.find((x) => x.metadata.name === job);
    if (!s) {
      problem(name, `no StatefulSet ${job}`);
      continue;
    }
    const port = containerPorts(s.spec.template.spec)[0];
    const want = Array.from({ length: s.spec.replicas }, (_, i) => `${job}-${i}.${s.spec.serviceName}:${port}`);
    if (JSON.stringify(cluster[job]) !== JSON.stringify(want)) {
      problem(where(clusterMap), `cluster.json's "${job}" is ${JSON.stringify(cluster[job])}; ` +
              `StatefulSet ${job}'s pods are ${JSON.stringify(want)}`);
    }
  }
  checkJobFile(where(byKind('ConfigMap').find((c) => c.metadata.name === 'ps-job') || clusterMap),
               byKind('ConfigMap').find((c) => c.metadata.name === 'ps-job'));
}

// The job ConfigMap holds config/jobs/default.json, or the job file its annotation ps/job-file
// names as the release installs it (tools/package.sh: a program job's example runs with
// python3 from /usr/share/ps/examples).
function checkJobFile(where, configMap) {
  if (!configMap) return problem(where, 'no job ConfigMap');
  const named = (configMap.metadata.annotations || {})['ps/job-file'];
  const file = named ? path.join(path.dirname(args.default_job), '..', '..', named) : args.default_job;
  if (!fs.existsSync(file)) return problem(where, `ps/job-file ${named} does not exist`);
  const installed = fs.readFileSync(file, 'utf8').replace(
      /"tools\/ps_python", "examples\//g, '"python3", "/usr/share/ps/examples/');
  const want = JSON.parse(installed);
  try {
    if (JSON.stringify(JSON.parse(configMap.data['job.json'])) !== JSON.stringify(want)) {
      problem(where, `job.json differs from ${named || 'config/jobs/default.json'}`);
    }
  } catch (e) {
    problem(where, `job.json: ${e.message}`);
  }
}

function checkTfJob(file, rendered) {
  const objects = rendered.map((r) => r.object);
  const tfjob = objects.find((o) => o.kind === 'TFJob');
  if (!tfjob) return problem(file, 'no TFJob');
  for (const o of objects.filter((x) => x !== tfjob)) validateSchema(file, o);
  const where = `${file}: TFJob ${tfjob.metadata.name}`;
  if (!validateTfJob(tfjob)) {
    return problem(where, validateTfJob.errors.map((e) => `${e.instancePath} ${e.message}` +
                                                      (e.params.propertyName ? ` (${e.params.propertyName})` : '')).join('; '));
  }
  checkJobFile(where, objects.find((o) => o.kind === 'ConfigMap'));
  if (tfjob.spec.enableDynamicWorker) problem(where, 'enableDynamicWorker must be false');
  const specs = tfjob.spec.tfReplicaSpecs;
  for (const type of ['PS', 'Worker', 'Chief']) if (!specs[type]) problem(where, `no ${type} replicas`);
  if (specs.Evaluator) problem(where, 'an Evaluator replica would refuse to start: worker 0 evaluates');
  for (const [type, spec] of Object.entries(specs)) {
    try {
      new PodTemplateSpec(spec.template).validate();
    } catch (e) {
      problem(`${where} ${type}`, `template: ${formatErrors(e)}`);
      continue;
    }
    // The operator's rules (pkg/apis/kubeflow.org/v1 validation, GetPortFromTFJob).
    const c = spec.template.spec.containers.find((x) => x.name === 'tensorflow');
    if (!c) {
      problem(`${where} ${type}`, 'no container named "tensorflow" (the operator requires it)');
      continue;
    }
    if (!(c.ports || []).some((p) => p.name === 'tfjob-port')) {
      problem(`${where} ${type}`, 'no port named "tfjob-port" (TF_CONFIG\'s addresses use it)');
    }
    if ((type === 'Chief' || type === 'Master') && spec.replicas !== 1) {
      problem(`${where} ${type}`, 'a TFJob has one chief');
    }
    checkContainers(`${where} ${type}`, spec.template.spec,
                    checkPodSpec(`${where} ${type}`, spec.template.spec, objects));
    if (type === 'PS' || type === 'Worker') checkMetrics(`${where} ${type}`, spec.template);
  }
}

// The Kubeflow Trainer's TrainJob and its TrainingRuntime (trainer.kubeflow.org/v1alpha1): the
// CRD schemas (tests/testdata/trainer_v1alpha1_schema.json), each replicated Job's template
// (kubernetes-models), and what the Trainer and JobSet do with them: the trainer Job "node"
// (labelled the trainer ancestor, its container "node", one node), the ps and worker Jobs Indexed
// with one pod per task of the ClusterSpec, whose addresses are JobSet's host names
// <trainjob>-<job>-0-<index>.<subdomain>, and a success policy that waits for psctl alone.
function checkTrainJob(file, objects) {
  const trainJob = objects.find((o) => o.kind === 'TrainJob');
  const runtime = objects.find((o) => o.kind === 'TrainingRuntime');
  if (!trainJob || !runtime) return problem(file, 'no TrainJob and TrainingRuntime');
  for (const o of objects.filter((x) => x !== trainJob && x !== runtime)) validateSchema(file, o);
  for (const o of [trainJob, runtime]) {
    const validate = validateTrainer[o.kind];
    if (!validate(o)) {
      return problem(`${file}: ${o.kind} ${o.metadata.name}`, validate.errors.map((e) =>
        `${e.instancePath} ${e.message}` + (e.params.additionalProperty ?
          ` (${e.params.additionalProperty})` : '')).join('; '));
    }
  }
  const where = `${file}: TrainJob ${trainJob.metadata.name}`;
  const ref = trainJob.spec.runtimeRef;
  if (ref.kind !== 'TrainingRuntime' || ref.name !== runtime.metadata.name) {
    problem(where, `runtimeRef names ${ref.kind || 'ClusterTrainingRuntime'} ${ref.name}, not ` +
            `TrainingRuntime ${runtime.metadata.name}`);
  }
  const spec = runtime.spec.template.spec;
  const jobs = Object.fromEntries(spec.replicatedJobs.map((j) => [j.name, j]));
  const missing = ['ps', 'worker', 'node'].filter((name) => !jobs[name]);
  for (const name of missing) problem(where, `the runtime has no replicated Job "${name}"`);
  if (missing.length > 0) return;
  for (const j of spec.replicatedJobs) {
    const w = `${where}: Job ${j.name}`;
    try {
      new JobTemplateSpec(j.template).validate();
    } catch (e) {
      problem(w, `template: ${formatErrors(e)}`);
      continue;
    }
    const podSpec = j.template.spec.template.spec;
    checkContainers(w, podSpec, checkPodSpec(w, podSpec, objects));
    if (j.name !== 'node') checkMetrics(w, j.template.spec.template);
  }
  const labels = (jobs.node.template.metadata || {}).labels || {};
  if (labels['trainer.kubeflow.org/trainjob-ancestor-step'] !== 'trainer') {
    problem(`${where}: Job node`, 'not labelled trainer.kubeflow.org/trainjob-ancestor-step: ' +
            'trainer (the Trainer would find no trainer)');
  }
  if (!jobs.node.template.spec.template.spec.containers.some((c) => c.name === 'node')) {
    problem(`${where}: Job node`, 'no container named "node" (the Trainer sets its fields there)');
  }
  if (runtime.spec.mlPolicy.numNodes !== 1) {
    problem(where, `mlPolicy.numNodes is ${runtime.spec.mlPolicy.numNodes}: psctl runs once`);
  }
  const success = spec.successPolicy || {};
  if (JSON.stringify(success.targetReplicatedJobs) !== '["node"]') {
    problem(where, 'successPolicy must target the Job node alone: the daemons never finish, so ' +
            'the JobSet would never succeed');
  }
  // psctl's end of the job (exit 1, 2, 4: its Job failed by its podFailurePolicy) ends the
  // JobSet; without such a rule JobSet restarts everything, and psctl --replace re-runs the job.
  const rules = (spec.failurePolicy && spec.failurePolicy.rules) || [];
  if (!rules.some((r) => r.action === 'FailJobSet' &&
                         JSON.stringify(r.targetReplicatedJobs) === '["node"]' &&
                         (r.onJobFailureReasons || []).includes('PodFailurePolicy'))) {
    problem(where, 'no failurePolicy rule FailJobSet for the Job node failed by its ' +
            'podFailurePolicy: a job psctl ended (bad input, diverged, stopped) would restart ' +
            'the JobSet and re-run the job');
  }
  const network = spec.network || {};
  if (network.enableDNSHostnames === false) problem(where, 'enableDNSHostnames is false');
  const subdomain = network.subdomain || trainJob.metadata.name;
  const clusterMap = objects.find((o) => o.kind === 'ConfigMap' &&
      jobs.ps.template.spec.template.spec.volumes.some((v) => v.configMap &&
                                                             v.configMap.name === o.metadata.name));
  if (!clusterMap) return problem(where, 'the ps pods mount no ClusterSpec ConfigMap');
  let cluster;
  try {
    cluster = JSON.parse(clusterMap.data['cluster.json']).cluster;
  } catch (e) {
    return problem(`${where}: ConfigMap ${clusterMap.metadata.name}`, `cluster.json: ${e.message}`);
  }
  for (const name of ['ps', 'worker']) {
    const job = jobs[name].template.spec;
    const w = `${where}: Job ${name}`;
    if (job.completionMode !== 'Indexed' || job.parallelism !== job.completions) {
      problem(w, 'must be Indexed with parallelism equal to completions (one pod per task)');
    }
    if ((jobs[name].replicas || 1) !== 1) problem(w, 'replicas must be 1 (one Job of N pods)');
    const c = job.template.spec.containers[0];
    if (flagValue(c, 'task') !== `${name}:$(JOB_COMPLETION_INDEX)`) {
      problem(w, `--task must be ${name}:$(JOB_COMPLETION_INDEX), the pod's index`);
    }
    const port = containerPorts(job.template.spec)[0];
    const want = Array.from({ length: job.parallelism },
                            (_, i) => `${trainJob.metadata.name}-${name}-0-${i}.${subdomain}:${port}`);
    if (JSON.stringify(cluster[name]) !== JSON.stringify(want)) {
      problem(`${where}: ConfigMap ${clusterMap.metadata.name}`, `cluster.json's "${name}" is ` +
              `${JSON.stringify(cluster[name])}; JobSet names the pods ${JSON.stringify(want)}`);
    }
  }
  checkJobFile(where, objects.find((o) => o.kind === 'ConfigMap' && o.data['job.json']));
}

// Starts the ps and worker programs of `objects`' TrainingRuntime as their pods would run them,
// each with the JOB_COMPLETION_INDEX Kubernetes gives an Indexed Job's pods.
async function runTrainJob(file, objects) {
  const runtime = objects.find((o) => o.kind === 'TrainingRuntime');
  for (const j of runtime.spec.template.spec.replicatedJobs.filter((x) => x.name !== 'node')) {
    const podSpec = j.template.spec.template.spec;
    for (const i of [0, j.template.spec.parallelism - 1]) {
      await runPod(`${file}: Job ${j.name}`, `${j.name}-${i}`, podSpec.containers[0],
                   podSpec.volumes || [], objects, { JOB_COMPLETION_INDEX: String(i) },
                   { log: [`${j.name}:${i} (`] });
    }
  }
}

// ---- The programs -------------------------------------------------------------------------

const binaries = Object.fromEntries((args.binaries || '').split(',').filter(Boolean)
                                      .map((b) => b.split('=')));
const helpCache = {};
function flagsOf(program) {
  if (!helpCache[program]) {
    const r = childProcess.spawnSync(binaries[program], ['--helpfull'], { encoding: 'utf8' });
    helpCache[program] = new Set([...(r.stdout + r.stderr).matchAll(/^\s+-(\w+) \(/gm)].map((m) => m[1]));
  }
  return helpCache[program];
}

function checkFlags(where, container) {
  if (!container.command) return;  // Said by checkContainers.
  const program = path.basename(container.command[0]);
  if (!binaries[program]) return problem(where, `runs ${container.command[0]}, not one of ours`);
  for (const a of container.args || []) {
    const m = a.match(/^--?([a-z_0-9]+)/);
    if (m && !flagsOf(program).has(m[1])) problem(where, `${program} has no flag --${m[1]}`);
  }
}

// The operator's TF_CONFIG for replica (type, index) of `tfjob` in namespace "default":
// Go's json.Marshal of {cluster (keys sorted), task, environment}.
function operatorTfConfig(tfjob, type, index) {
  const cluster = {};
  for (const t of Object.keys(tfjob.spec.tfReplicaSpecs).map((x) => x.toLowerCase()).sort()) {
    const spec = Object.entries(tfjob.spec.tfReplicaSpecs).find(([k]) => k.toLowerCase() === t)[1];
    cluster[t] = Array.from({ length: spec.replicas }, (_, i) =>
      `${tfjob.metadata.name}-${t}-${i}.default.svc:2222`);
  }
  return JSON.stringify({ cluster, task: { type, index }, environment: 'cloud' });
}

let runCount = 0;
// Starts `container` as pod `pod` would run it, checks it resolves `task` (or fails saying
// `refusal`), and stops it.
function runPod(where, pod, container, volumes, objects, extraEnv, expect) {
  const dir = path.join(args.tmp, `pod${runCount++}`);
  fs.mkdirSync(dir, { recursive: true });
  const mounts = [];
  for (const m of container.volumeMounts || []) {
    const target = path.join(dir, m.name);
    fs.mkdirSync(target, { recursive: true });
    const volume = volumes.find((v) => v.name === m.name);
    const configMap = volume && volume.configMap &&
                      objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === volume.configMap.name);
    for (const [file, text] of Object.entries((configMap && configMap.data) || {})) {
      fs.writeFileSync(path.join(target, file), text);
    }
    mounts.push([m.mountPath, target]);
  }
  const env = { PATH: '/usr/bin:/bin' };
  for (const e of container.env || []) env[e.name] = e.value;
  Object.assign(env, extraEnv);
  // $(NAME) in args is the container's variable NAME, as the kubelet expands it.
  const podArgs = (container.args || [])
    .map((a) => mounts.reduce((x, [from, to]) => x.split(from).join(to), a))
    .map((a) => a.replace(/\$\((\w+)\)/g, (m, name) => (name in env ? env[name] : m)));
  const portFile = path.join(dir, 'port');
  podArgs.push('--port=0', `--port_file=${portFile}`, '--bind_host=127.0.0.1');
  // /metrics on a free port too, written to a file.
  const metricsFile = path.join(dir, 'metrics_port');
  const metrics = podArgs.findIndex((a) => a.startsWith('--metrics_port='));
  if (metrics >= 0) {
    podArgs.splice(metrics, 1, '--metrics_port=0', `--metrics_port_file=${metricsFile}`);
  }
  if (podArgs.includes('--task_from_hostname')) podArgs.push(`--task_hostname=${pod}`);
  const log = path.join(dir, 'log');
  const out = fs.openSync(log, 'w');
  const child = childProcess.spawn(binaries[path.basename(container.command[0])], podArgs,
                                   { env, stdio: ['ignore', out, out] });
  const deadline = Date.now() + 30000;
  let exited = null;
  child.on('exit', (code) => { exited = code; });
  return new Promise((resolve) => {
    const poll = () => {
      const text = fs.readFileSync(log, 'utf8');
      if (expect.refusal) {
        if (exited !== null) {
          if (exited !== 2 || !text.includes(expect.refusal)) {
            problem(where, `${pod}: expected exit 2 saying "${expect.refusal}", got ${exited}: ${text}`);
          }
          return resolve();
        }
      } else if (fs.existsSync(portFile) && fs.readFileSync(portFile, 'utf8').trim() !== '') {
        for (const want of expect.log) {
          if (!text.includes(want)) problem(where, `${pod}: the log lacks "${want}": ${text}`);
        }
        const checked = metrics >= 0 ? checkMetricsPage(`${where}: ${pod}`, metricsFile) :
                                       Promise.resolve();
        return checked.then(() => {
          if (exited !== null) {
            problem(where, `${pod}: exited ${exited} while running`);
            return resolve();
          }
          child.kill('SIGTERM');
          child.on('exit', (code) => {
            if (code !== 0) problem(where, `${pod}: exit ${code} after SIGTERM`);
            resolve();
          });
        });
      } else if (exited !== null) {
        problem(where, `${pod}: exited ${exited} before listening: ${text}`);
        return resolve();
      }
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        problem(where, `${pod}: not listening after 30 s: ${text}`);
        return resolve();
      }
      setTimeout(poll, 100);
    };
    poll();
  });
}

// GET /metrics on the port the daemon wrote to `portFile` (soon after its gRPC port file): a
// Prometheus page with the process families.
function checkMetricsPage(where, portFile) {
  return new Promise((resolve) => {
    const deadline = Date.now() + 5000;
    const poll = () => {
      const port = fs.existsSync(portFile) ? fs.readFileSync(portFile, 'utf8').trim() : '';
      if (port === '') {
        if (Date.now() > deadline) {
          problem(where, `no --metrics_port_file ${portFile} after 5 s`);
          return resolve();
        }
        return setTimeout(poll, 50);
      }
      http.get(`http://127.0.0.1:${port}/metrics`, (response) => {
        let body = '';
        response.on('data', (chunk) => { body += chunk; });
        response.on('end', () => {
          if (response.statusCode !== 200 || !body.includes('\nprocess_cpu_seconds_total ')) {
            problem(where, `GET /metrics on port ${port}: ${response.statusCode}: ` +
                    body.slice(0, 200));
          }
          resolve();
        });
      }).on('error', (e) => {
        problem(where, `GET /metrics on port ${port}: ${e.message}`);
        resolve();
      });
    };
    poll();
  });
}

async function runStatefulSets(name, objects) {
  for (const s of objects.filter((o) => o.kind === 'StatefulSet')) {
    const c = s.spec.template.spec.containers[0];
    if (flagValue(c, 'device') === 'cuda:0') continue;  // Needs a GPU; flags checked.
    // Its Secrets (TLS): tests/container_test.sh runs these pods with them.
    if ((s.spec.template.spec.volumes || []).some((v) => v.secret)) continue;
    for (const i of [0, s.spec.replicas - 1]) {
      const pod = `${s.metadata.name}-${i}`;
      await runPod(`${name}: StatefulSet ${s.metadata.name}`, pod, c, s.spec.template.spec.volumes || [],
                   objects, {}, { log: [`${s.metadata.name}:${i} (`, `task from host name ${pod}`] });
    }
  }
}

async function runTfJob(file, objects) {
  const tfjob = objects.find((o) => o.kind === 'TFJob');
  const specs = tfjob.spec.tfReplicaSpecs;
  for (const [type, task] of [['PS', 'ps'], ['Worker', 'worker']]) {
    for (const i of [0, specs[type].replicas - 1]) {
      const c = specs[type].template.spec.containers[0];
      await runPod(`${file}: ${type}`, `${tfjob.metadata.name}-${task}-${i}`, c,
                   specs[type].template.spec.volumes || [], objects,
                   { TF_CONFIG: operatorTfConfig(tfjob, task, i) },
                   { log: [`${task}:${i} (TF_CONFIG)`] });
    }
  }
  // An Evaluator replica (if one were added) is refused, saying why.
  const worker = specs.Worker.template.spec.containers[0];
  const withEvaluator = { ...tfjob, spec: { ...tfjob.spec, tfReplicaSpecs: { ...specs, Evaluator: { replicas: 1 } } } };
  await runPod(`${file}: Evaluator`, `${tfjob.metadata.name}-evaluator-0`, worker, [], objects,
               { TF_CONFIG: operatorTfConfig(withEvaluator, 'evaluator', 0) },
               { refusal: 'this service has no evaluator' });
  // The chief's psctl reads its TF_CONFIG: psctl check lists the ps and worker tasks from it.
  const r = childProcess.spawnSync(binaries.psctl, ['check'], {
    encoding: 'utf8',
    env: { PATH: '/usr/bin:/bin', TF_CONFIG: operatorTfConfig(tfjob, 'chief', 0) },
  });
  const want = `ps:0\t${tfjob.metadata.name}-ps-0.default.svc:2222`;
  if (r.status !== 0 || !r.stdout.includes(want)) {
    problem(`${file}: Chief`, `psctl check with the chief's TF_CONFIG: exit ${r.status}: ${r.stdout}${r.stderr}`);
  }
}

// ---- Main ---------------------------------------------------------------------------------

async function main() {
  const renders = {};
  for (const file of fs.readdirSync(args.rendered).filter((f) => f.endsWith('.yaml')).sort()) {
    renders[file.slice(0, -'.yaml'.length).split('.').join('/')] =
        readDocuments(path.join(args.rendered, file));
  }
  const tfjobFile = args.tfjob;
  const tfjob = readDocuments(tfjobFile);
  const trainJob = readDocuments(args.trainjob).map((r) => r.object);
  for (const [name, rendered] of Object.entries(renders)) checkRender(name, rendered);
  checkTfJob(tfjobFile, tfjob);
  checkTrainJob('trainjob.yaml', trainJob);
  const gpu = (renders['overlays/gpu'] || []).map((r) => r.object).find((o) => o.kind === 'StatefulSet' && o.metadata.name === 'worker');
  if (!renders['overlays/gpu']) {
    // Not rendered this time (a broken copy of another part).
  } else if (!gpu || !(gpu.spec.template.spec.containers[0].resources.limits || {})['nvidia.com/gpu']) {
    problem('overlays/gpu', 'the workers request no nvidia.com/gpu');
  } else if (flagValue(gpu.spec.template.spec.containers[0], 'device') !== 'cuda:0') {
    problem('overlays/gpu', `the workers' --device is ` +
            `${flagValue(gpu.spec.template.spec.containers[0], 'device')}, not cuda:0 (the last ` +
            '--device is the one taken)');
  }
  if (Object.keys(binaries).length > 0) {
    const pods = [];
    for (const [name, rendered] of Object.entries(renders)) {
      for (const o of rendered.map((r) => r.object)) {
        if (o.spec && o.spec.template) pods.push([`${name}: ${o.kind} ${o.metadata.name}`, o.spec.template.spec]);
      }
    }
    for (const o of tfjob.map((r) => r.object).filter((x) => x.kind === 'TFJob')) {
      for (const [type, spec] of Object.entries(o.spec.tfReplicaSpecs || {})) {
        pods.push([`tfjob.yaml: ${type}`, spec.template.spec]);
      }
    }
    for (const j of trainJob.filter((x) => x.kind === 'TrainingRuntime')
                          .flatMap((r) => r.spec.template.spec.replicatedJobs)) {
      pods.push([`trainjob.yaml: Job ${j.name}`, j.template.spec.template.spec]);
    }
    for (const [where, spec] of pods) {
      for (const c of spec.containers) checkFlags(where, c);
    }
  }
  if (args.run && problems.length === 0) {
    for (const [name, rendered] of Object.entries(renders)) {
      await runStatefulSets(name, rendered.map((r) => r.object));
    }
    await runTfJob('tfjob.yaml', tfjob.map((r) => r.object));
    await runTrainJob('trainjob.yaml', trainJob);
  }
  if (problems.length > 0) {
    console.log(problems.join('\n'));
    process.exit(1);
  }
  console.log(`valid: ${Object.keys(renders).join(', ')}, tfjob.yaml, trainjob.yaml` +
              (args.run ? '; every pod\'s program started, resolved its task and served ' +
                          '/metrics' : ''));
}

main();
