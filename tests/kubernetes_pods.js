// Turns the pods of rendered Kubernetes manifests into `podman run` arguments, so that a test can
// run each pod's container as the kubelet would (tests/container_test.sh): its command and args,
// environment, host name, user and groups, read-only root, privilege and capability settings,
// memory and CPU limits, and its volumes (ConfigMaps written out read-only, Secrets from
// --secrets (DIR/NAME/KEY, each key a file) with their items and mode, owned by root and the
// pod's fsGroup, emptyDirs, and PersistentVolumeClaims as directories kept under --volumes, one
// per claim, shared by the pods that name it, owned by the pod's fsGroup), with subPath and
// subPathExpr ($(VAR) from the container's environment; the downward API's metadata.name).
//
// Usage: node kubernetes_pods.js --modules=DIR --rendered=FILE --volumes=DIR --out=DIR
//          [--secrets=DIR]
//          --image=NAME=IMAGE --cpus=N POD...
// The pods' image NAME (any tag) is run as IMAGE.
// A POD is a StatefulSet's pod (ps-0: StatefulSet ps, ordinal 0) or job/NAME (the Job NAME's
// pod). Writes OUT/POD.args (job/NAME as job-NAME.args): one podman run argument a line, ending
// with the image, the command and its args; the caller adds its own (network, name, -d) before
// them. Exits 1 naming what it cannot express (a volume kind, an env valueFrom, a pod that is
// not in the manifests); limits the CPUs to --cpus (this machine's), saying so on stderr.
'use strict';

const fs = require('fs');
const path = require('path');

const args = { pods: [] };
for (const a of process.argv.slice(2)) {
  const m = a.match(/^--([a-z_]+)=(.*)$/);
  if (m) args[m[1]] = m[2];
  else args.pods.push(a);
}
const YAML = require('module').createRequire(path.resolve(args.modules) + '/')('yaml');
const [imageName, imageReplacement] = args.image.split('=');

function die(message) {
  console.error(`kubernetes_pods: ${message}`);
  process.exit(1);
}

const objects = YAML.parseAllDocuments(fs.readFileSync(args.rendered, 'utf8'))
  .map((d) => d.toJSON()).filter(Boolean);
const find = (kind, name) => objects.find((o) => o.kind === kind && o.metadata.name === name);

// Kubernetes quantities ("8Gi", "512Mi", "2", "500m") as numbers: bytes, or CPUs.
function quantity(q) {
  const m = String(q).match(/^([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T|m)?$/);
  if (!m) die(`cannot read the quantity ${q}`);
  const scale = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9,
                  T: 1e12, m: 1e-3 }[m[2]] || 1;
  return Number(m[1]) * scale;
}

// The pod template, its claim templates and the pod's name for POD.
function podOf(pod) {
  if (pod.startsWith('job/')) {
    const job = find('Job', pod.slice(4)) || die(`no Job ${pod.slice(4)}`);
    return { template: job.spec.template, claims: [], name: `${job.metadata.name}-pod` };
  }
  const m = pod.match(/^(.*)-(\d+)$/) || die(`${pod} is not <statefulset>-<ordinal>`);
  const set = find('StatefulSet', m[1]) || die(`no StatefulSet ${m[1]}`);
  if (Number(m[2]) >= set.spec.replicas) die(`${pod}: StatefulSet ${m[1]} has ${set.spec.replicas}`);
  return { template: set.spec.template, claims: set.spec.volumeClaimTemplates || [], name: pod };
}

// A directory under --volumes for a volume, made writable by the pod's user and fsGroup.
function volumeDir(relative, owner) {
  const dir = path.join(args.volumes, relative);
  fs.mkdirSync(dir, { recursive: true });
  fs.chownSync(dir, owner.user, owner.group);
  fs.chmodSync(dir, 0o2775);
  return dir;
}

function podmanArgs(pod) {
  const { template, claims, name } = podOf(pod);
  const spec = template.spec;
  if (spec.containers.length !== 1) die(`${pod}: ${spec.containers.length} containers`);
  const c = spec.containers[0];
  const security = { ...(spec.securityContext || {}), ...(c.securityContext || {}) };
  const out = [`--hostname=${name}`];
  const user = security.runAsUser;
  const group = security.runAsGroup === undefined ? user : security.runAsGroup;
  if (security.runAsNonRoot && !(user > 0)) die(`${pod}: runAsNonRoot without a runAsUser`);
  if (user !== undefined) out.push(`--user=${user}:${group}`);
  const fsGroup = spec.securityContext && spec.securityContext.fsGroup;
  if (fsGroup !== undefined) out.push(`--group-add=${fsGroup}`);
  if (security.readOnlyRootFilesystem) out.push('--read-only', '--read-only-tmpfs=false');
  if (security.allowPrivilegeEscalation === false) out.push('--security-opt=no-new-privileges');
  for (const cap of (security.capabilities && security.capabilities.drop) || []) {
    out.push(`--cap-drop=${cap}`);
  }
  for (const cap of (security.capabilities && security.capabilities.add) || []) {
    out.push(`--cap-add=${cap}`);
  }
  const limits = (c.resources && c.resources.limits) || {};
  if (limits.memory) out.push(`--memory=${quantity(limits.memory)}`);
  if (limits.cpu) {
    const cpus = Math.min(quantity(limits.cpu), Number(args.cpus));
    if (cpus < quantity(limits.cpu)) {
      console.error(`kubernetes_pods: ${pod}: limits.cpu ${limits.cpu}, run with ${cpus} ` +
                    '(this machine\'s CPUs)');
    }
    out.push(`--cpus=${cpus}`);
  }
  const env = {};
  for (const e of c.env || []) {
    const field = e.valueFrom && e.valueFrom.fieldRef && e.valueFrom.fieldRef.fieldPath;
    if (field === 'metadata.name') {
      env[e.name] = name;
    } else if (e.value !== undefined) {
      env[e.name] = e.value;
    } else {
      die(`${pod}: env ${e.name} comes from ${JSON.stringify(e.valueFrom)}, which this test ` +
          'does not run');
    }
    out.push(`--env=${e.name}=${env[e.name]}`);
  }
  const owner = { user: user || 0, group: fsGroup !== undefined ? fsGroup : group || 0 };
  for (const m of c.volumeMounts || []) {
    const v = (spec.volumes || []).find((x) => x.name === m.name);
    const claim = claims.find((t) => t.metadata.name === m.name);
    let dir;
    let readOnly = Boolean(m.readOnly);
    if (v && v.configMap) {
      const map = find('ConfigMap', v.configMap.name) || die(`no ConfigMap ${v.configMap.name}`);
      dir = volumeDir(path.join(pod.replace('/', '-'), m.name), owner);
      for (const [file, text] of Object.entries(map.data || {})) {
        fs.writeFileSync(path.join(dir, file), text, { mode: 0o644 });
      }
      readOnly = true;  // The kubelet mounts ConfigMaps read-only.
    } else if (v && v.secret) {
      // As the kubelet writes a Secret: its items (or every key), root's, the fsGroup's group.
      const from = path.join(args.secrets || die(`${pod}: a Secret and no --secrets`),
                             v.secret.secretName);
      fs.existsSync(from) || die(`${pod}: no Secret ${v.secret.secretName} in ${args.secrets}`);
      dir = volumeDir(path.join(pod.replace('/', '-'), m.name), owner);
      const items = v.secret.items || fs.readdirSync(from).map((key) => ({ key, path: key }));
      for (const item of items) {
        const file = path.join(dir, item.path);
        fs.mkdirSync(path.dirname(file), { recursive: true });
        fs.copyFileSync(path.join(from, item.key), file);
        fs.chownSync(file, 0, fsGroup === undefined ? 0 : fsGroup);
        fs.chmodSync(file, item.mode || (v.secret.defaultMode === undefined ? 0o644 :
                                                                              v.secret.defaultMode));
      }
      readOnly = true;
    } else if (v && v.emptyDir) {
      dir = volumeDir(path.join(pod.replace('/', '-'), m.name), owner);
      fs.chmodSync(dir, 0o1777);  // As the kubelet makes them.
    } else if (v && v.persistentVolumeClaim) {
      find('PersistentVolumeClaim', v.persistentVolumeClaim.claimName) ||
        die(`no PersistentVolumeClaim ${v.persistentVolumeClaim.claimName}`);
      dir = volumeDir(path.join('claims', v.persistentVolumeClaim.claimName), owner);
      readOnly = readOnly || Boolean(v.persistentVolumeClaim.readOnly);
    } else if (!v && claim) {
      dir = volumeDir(path.join('claims', `${m.name}-${name}`), owner);
    } else {
      die(`${pod}: volume ${m.name} is of a kind this test does not run: ${JSON.stringify(v)}`);
    }
    const sub = m.subPath ||
                (m.subPathExpr && m.subPathExpr.replace(/\$\((\w+)\)/g, (x, v) => env[v] || ''));
    if (sub) dir = path.join(dir, sub);
    fs.existsSync(dir) || die(`${pod}: ${m.name}'s subpath ${sub} is not in the volume`);
    out.push(`--volume=${dir}:${m.mountPath}${readOnly ? ':ro' : ''}`);
  }
  if (!c.command) die(`${pod}: container ${c.name} has no command`);
  // The manifests' image (whatever its tag) is the one the test built.
  if (c.image.replace(/:[\w][\w.-]*$/, '') !== imageName) die(`${pod}: image ${c.image}`);
  return out.concat([imageReplacement], c.command, c.args || []);
}

fs.mkdirSync(args.out, { recursive: true });
for (const pod of args.pods) {
  fs.writeFileSync(path.join(args.out, `${pod.replace('/', '-')}.args`),
                   podmanArgs(pod).join('\n') + '\n');
}
