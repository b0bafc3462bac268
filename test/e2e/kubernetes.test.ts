// Not on fixture.ts: the gateway runs as deploy/kubernetes runs it (kubernetes-pod.ts, in a network namespace).
// deploy/kubernetes, as far as a machine without a cluster can check it:
// - every document of every file is a kind the Kubernetes schemas know
//   (kubernetes-models, and its prometheus-operator package for the
//   PodMonitor), valid against its schema, with no field the schema lacks;
// - the ports, paths, variables and names in them are the ones gateway.yaml
//   and the runtime use (read from the manifest's model and the runtime's
//   source, not written twice);
// - the gateway built from gateway.yaml (what deploy/Dockerfile builds), run
//   with the container's environment, its keys Secret laid out as the kubelet
//   does and Redis as the StatefulSet runs it, in a network namespace of its
//   own (kubernetes-pod.ts): it listens where the Service sends traffic,
//   answers the probes and the PodMonitor, reloads an updated Secret, and
//   drains within the grace period.
// Not checked here: an API server's admission, the image build (no container
// engine on this machine) and anything a cluster does (scheduling, DNS,
// kube-proxy, network policies, the Prometheus Operator).
import { describe, expect, it, onTestFinished } from 'vitest';
import { spawn, execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, join, posix } from 'node:path';
import { promisify } from 'node:util';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';
import { loadManifest } from '../../generator/load.ts';
import { validateManifest } from '../../generator/validate.ts';
import { buildModel } from '../../generator/normalize.ts';
import type { GatewayModel } from '../../generator/model.ts';
import { resolveTemplate } from '../../runtime/config/env.ts';
import type { Template } from '../../runtime/types.ts';
import { keysYaml, newKey, ROOT } from './harness.ts';
import type { PodPlan, PodReport } from './kubernetes-pod.ts';

const run = promisify(execFile);
const require = createRequire(import.meta.url);
const DIR = join(ROOT, 'deploy/kubernetes');
const KUSTOMIZATION = 'kustomization.yaml';

/** Manifests are read as plain YAML data. */
type Obj = Record<string, any>;

interface Doc {
  /** FILE#N, N counting the file's documents from 1. */
  readonly where: string;
  readonly value: Obj;
}

/**
 * Every document of a file, read as kubectl reads it (YAML 1.1: 0440 is octal,
 * `yes` a boolean). Documents holding only comments are skipped, as kubectl does.
 */
function documents(file: string, text = readFileSync(join(DIR, file), 'utf8')): Doc[] {
  const out: Doc[] = [];
  parseAllDocuments(text, { version: '1.1' }).forEach((d, i) => {
    const where = `${file}#${i + 1}`;
    if (d.errors.length > 0) throw new Error(`${where}: ${d.errors.map((e) => e.message).join('; ')}`);
    const value = d.toJS() as unknown;
    if (value === null || value === undefined) return;
    if (typeof value !== 'object' || Array.isArray(value)) throw new Error(`${where}: not a mapping`);
    out.push({ where, value: value as Obj });
  });
  return out;
}

const manifestFiles = () => readdirSync(DIR).filter((f) => /\.ya?ml$/.test(f)).sort();
const allDocs = () => manifestFiles().flatMap((f) => documents(f));

/** Where the Kubernetes schemas of an apiVersion are: the core and built-in groups, then the CRD packages. */
const MODEL_PACKAGES = ['kubernetes-models', '@kubernetes-models/prometheus-operator'];

interface ModelClass {
  new (data: Obj): { validate(): void };
  readonly apiVersion: string;
  readonly kind: string;
}

/** The kubernetes-models module and class for a document's apiVersion and kind; null for a kind no package knows. */
function modelOf(apiVersion: string, kind: string): { module: string; cls: ModelClass } | null {
  for (const pkg of MODEL_PACKAGES) {
    const module = `${pkg}/${apiVersion}`;
    let exports: Record<string, unknown>;
    try {
      exports = require(module) as Record<string, unknown>;
    } catch {
      continue;
    }
    const cls = exports[kind] as ModelClass | undefined;
    if (typeof cls === 'function' && cls.apiVersion === apiVersion && cls.kind === kind) return { module, cls };
  }
  return null;
}

/** The last check's program: the next one reuses its parsed declaration files. */
let previous: ts.Program | undefined;

/**
 * Every problem of the documents against the Kubernetes schemas. Two checks:
 * kubernetes-models' validate() (the OpenAPI schema: types, required fields,
 * enums, formats), which lets fields the schema lacks through; and the same
 * package's TypeScript types, whose excess-property check refuses those, as an
 * API server does under kubectl's default strict field validation.
 */
function schemaProblems(docs: readonly Doc[]): string[] {
  const problems: string[] = [];
  const typed: { doc: Doc; module: string; kind: string }[] = [];
  for (const doc of docs) {
    const { apiVersion, kind } = doc.value;
    if (apiVersion === 'kustomize.config.k8s.io/v1beta1' && kind === 'Kustomization') {
      // Read by kubectl -k, never sent to a cluster: no published schema. Only these fields are used.
      const extra = Object.keys(doc.value).filter((k) => !['apiVersion', 'kind', 'resources'].includes(k));
      if (extra.length > 0) problems.push(`${doc.where}: Kustomization fields this check does not know: ${extra.join(', ')}`);
      if (!Array.isArray(doc.value.resources) || !doc.value.resources.every((r: unknown) => typeof r === 'string')) problems.push(`${doc.where}: resources is not a list of file names`);
      continue;
    }
    if (typeof apiVersion !== 'string' || typeof kind !== 'string') {
      problems.push(`${doc.where}: no apiVersion and kind`);
      continue;
    }
    const model = modelOf(apiVersion, kind);
    if (model === null) {
      problems.push(`${doc.where}: unknown kind ${kind} in ${apiVersion}`);
      continue;
    }
    try {
      new model.cls(doc.value).validate();
    } catch (err) {
      problems.push(`${doc.where}: ${(err as Error).message}`);
    }
    typed.push({ doc, module: model.module, kind });
  }
  if (typed.length === 0) return problems;
  // One program, one typed constant per document; the file is virtual, placed in the project so node_modules resolves.
  const file = join(ROOT, '.kubernetes-manifests.ts');
  const imports = typed.map((t, i) => `import type { I${t.kind} as T${i} } from '${t.module}/${t.kind}';`);
  let source = `${imports.join('\n')}\n`;
  let line = imports.length;
  const starts: number[] = [];
  typed.forEach((t, i) => {
    starts.push(line);
    const chunk = `export const d${i}: T${i} = ${JSON.stringify(t.doc.value, null, 1)};\n`;
    source += chunk;
    line += chunk.split('\n').length - 1;
  });
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
  };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) => (name === file ? ts.createSourceFile(name, source, lang) : read(name, lang, ...rest));
  const program = ts.createProgram([file], options, host, previous);
  previous = program;
  const text = source.split('\n');
  for (const d of ts.getPreEmitDiagnostics(program)) {
    if (d.file?.fileName !== file || d.start === undefined) {
      problems.push(`types: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`);
      continue;
    }
    const line = d.file.getLineAndCharacterOfPosition(d.start).line;
    const i = starts.filter((s) => s <= line).length - 1;
    problems.push(`${i === -1 ? 'imports' : typed[i]!.doc.where}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')} (at ${text[line]!.trim()})`);
  }
  return problems;
}

// ------------------------------------------------------------- the cluster's view

function one(docs: readonly Doc[], pred: (v: Obj) => boolean, what: string): Obj {
  const found = docs.filter((d) => pred(d.value));
  expect(found.map((d) => d.where), `exactly one ${what}`).toHaveLength(1);
  return found[0]!.value;
}

/** A label selector's matchLabels (Deployment, PDB, PodMonitor, NetworkPolicy) or a Service's plain selector. */
function selects(selector: Obj | undefined, labels: Obj): boolean {
  const match: Obj = selector?.matchLabels ?? selector ?? {};
  expect(selector?.matchExpressions, 'selectors here use matchLabels only').toBeUndefined();
  return Object.keys(match).length > 0 && Object.entries(match).every(([k, v]) => labels[k] === v);
}

/** The workloads (Deployment, StatefulSet) a selector picks, by name. */
function selected(docs: readonly Doc[], selector: Obj | undefined): string[] {
  return docs.filter((d) => ['Deployment', 'StatefulSet'].includes(d.value.kind) && selects(selector, d.value.spec.template.metadata.labels)).map((d) => d.value.metadata.name as string);
}

function secretData(docs: readonly Doc[], name: string): Record<string, string> {
  const s = one(docs, (v) => v.kind === 'Secret' && v.metadata?.name === name, `Secret ${name}`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries((s.data ?? {}) as Record<string, string>)) out[k] = Buffer.from(v, 'base64').toString('utf8');
  return { ...out, ...(s.stringData as Record<string, string> | undefined) };
}

/** The container's environment as the kubelet makes it: envFrom first, then env, which wins. */
function containerEnv(docs: readonly Doc[], container: Obj): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    expect(Object.keys(from), 'envFrom: secretRef only').toEqual(['secretRef']);
    Object.assign(env, secretData(docs, from.secretRef.name));
  }
  for (const e of container.env ?? []) {
    expect(e.valueFrom, `${e.name}: a value written out, which this test can resolve`).toBeUndefined();
    env[e.name] = String(e.value);
  }
  return env;
}

/** A probe's or Service's port (a number or a container port's name) as the container port number. */
function portNumber(container: Obj, port: number | string): number {
  if (typeof port === 'number') return port;
  const p = (container.ports as Obj[]).find((c) => c.name === port);
  expect(p, `container port named ${port}`).toBeDefined();
  return p!.containerPort as number;
}

/** Every ${VAR} the manifest's model names anywhere (listeners, admin, keys, upstream URLs and headers). */
function templateVars(value: unknown, out = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) templateVars(v, out);
  else if (value !== null && typeof value === 'object') {
    const o = value as Obj;
    if (Array.isArray(o.parts)) for (const p of o.parts as Template['parts']) if (typeof p === 'object') out.add(p.env);
    for (const v of Object.values(o)) templateVars(v, out);
  }
  return out;
}

/** The variables the runtime reads from the environment itself (process.env.NAME in runtime/). */
function runtimeVars(): Set<string> {
  const out = new Set<string>();
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else if (e.name.endsWith('.ts')) for (const m of readFileSync(join(dir, e.name), 'utf8').matchAll(/process\.env(?:\.([A-Z_][A-Z0-9_]*)|\[['"]([A-Z_][A-Z0-9_]*)['"]\])/g)) out.add(m[1] ?? m[2]!);
    }
  };
  walk(join(ROOT, 'runtime'));
  return out;
}

function gatewayModel(): GatewayModel {
  const loaded = loadManifest(join(ROOT, 'gateway.yaml'));
  expect(validateManifest(loaded)).toEqual([]);
  return buildModel(loaded.value, 'gateway.yaml', loaded.text);
}

/** server.ts's shutdown: after the drain it waits up to this long for connections to close. */
const CLOSE_WAIT_S = 1;

/** Everything the gateway's pod is made of, read from the files. */
function gatewayPod(docs: readonly Doc[]) {
  const deployment = one(docs, (v) => v.kind === 'Deployment', 'Deployment');
  const pod = deployment.spec.template.spec as Obj;
  expect((pod.containers as Obj[]).length, 'one container: the gateway').toBe(1);
  const container = pod.containers[0] as Obj;
  const env = containerEnv(docs, container);
  const model = gatewayModel();
  const service = one(docs, (v) => v.kind === 'Service' && selected(docs, v.spec.selector).includes(deployment.metadata.name), "the gateway's Service");
  const redisSet = one(docs, (v) => v.kind === 'StatefulSet', 'StatefulSet (Redis)');
  return { deployment, pod, container, env, model, service, redisSet, labels: deployment.spec.template.metadata.labels as Obj };
}

describe('deploy/kubernetes: the Kubernetes schemas', () => {
  it('every document of every file is a kind the schemas know, valid against its schema, with no field the schema lacks', { timeout: 60_000 }, () => {
    const docs = allDocs();
    expect(manifestFiles().length).toBeGreaterThan(1);
    for (const f of manifestFiles()) expect(documents(f).length, `${f} has documents`).toBeGreaterThan(0);
    expect(schemaProblems(docs)).toEqual([]);
    // Every kind present was checked by a schema (or is the kustomization).
    expect(new Set(docs.map((d) => d.value.kind))).toEqual(new Set(['Kustomization', 'Deployment', 'PodDisruptionBudget', 'Service', 'Secret', 'StatefulSet', 'PodMonitor', 'NetworkPolicy']));
  });

  it('the check refuses an unknown kind, an unknown apiVersion, a value of the wrong type and a field the schema lacks', { timeout: 60_000 }, () => {
    const bad = documents(
      'bad.yaml',
      [
        'apiVersion: v1\nkind: Sevrice\nmetadata: { name: a }',
        'apiVersion: example.com/v1\nkind: Widget\nmetadata: { name: b }',
        'apiVersion: v1\nkind: Service\nmetadata: { name: c }\nspec:\n  ports: [{ name: rpc, port: eighty }]',
        'apiVersion: v1\nkind: Pod\nmetadata: { name: d }\nspec:\n  containers: [{ name: x, image: busybox, readinessProbes: { httpGet: { path: /readyz, port: 1 } } }]',
        'apiVersion: v1\nkind: Pod\nmetadata: { name: e }\nspec:\n  containers: [{ name: x, image: busybox }]',
      ].join('\n---\n'),
    );
    const problems = schemaProblems(bad);
    const of = (n: number) => problems.filter((p) => p.startsWith(`bad.yaml#${n}:`));
    expect(of(1)).toEqual(['bad.yaml#1: unknown kind Sevrice in v1']);
    expect(of(2)).toEqual(['bad.yaml#2: unknown kind Widget in example.com/v1']);
    expect(of(3).join('\n')).toContain('data/spec/ports/0/port must be integer');
    expect(of(4)).toHaveLength(1);
    expect(of(4)[0]).toContain(`'"readinessProbes"' does not exist in type 'IContainer'`);
    expect(of(5), 'a valid document among them').toEqual([]);
    expect(problems.length).toBe(of(1).length + of(2).length + of(3).length + of(4).length);
  });

  it('kustomization.yaml lists every other file of the folder, and nothing else', () => {
    const [k] = documents(KUSTOMIZATION);
    expect((k!.value.resources as string[]).slice().sort()).toEqual(manifestFiles().filter((f) => f !== KUSTOMIZATION));
  });
});

describe('deploy/kubernetes against gateway.yaml and the runtime', () => {
  it('container ports are the listeners’ ports under the container’s environment; the Service has the public listeners, not admin', () => {
    const docs = allDocs();
    const { container, env, model, service } = gatewayPod(docs);
    const ports = new Map((container.ports as Obj[]).map((p) => [p.name as string, p.containerPort as number]));
    const listeners = model.listeners.map((l) => l.name);
    expect([...ports.keys()].sort(), 'a container port per listener, named after it, and admin').toEqual([...listeners, 'admin'].sort());
    for (const l of model.listeners) {
      expect(ports.get(l.name), `listener ${l.name}`).toBe(Number(resolveTemplate(l.port, l.name, env)));
      // A listener on loopback could not be reached through the Service.
      expect(['0.0.0.0', '::'], `listener ${l.name} binds every address`).toContain(resolveTemplate(l.host, l.name, env));
    }
    expect(model.admin).not.toBeNull();
    expect(ports.get('admin')).toBe(Number(resolveTemplate(model.admin!.port, 'admin', env)));
    expect(['0.0.0.0', '::'], 'admin listener reachable by the kubelet and Prometheus on the pod address').toContain(resolveTemplate(model.admin!.host, 'admin', env));
    expect((service.spec.ports as Obj[]).map((p) => p.name).sort()).toEqual([...listeners].sort());
    for (const p of service.spec.ports as Obj[]) expect(portNumber(container, p.targetPort), `Service port ${p.name}`).toBe(ports.get(p.name));
  });

  it('probes and the PodMonitor are on the admin port; the grace period outlasts preStop plus the manifest’s drainTimeoutMs', () => {
    const docs = allDocs();
    const { pod, container, model, env, labels } = gatewayPod(docs);
    const admin = Number(resolveTemplate(model.admin!.port, 'admin', env));
    for (const name of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      expect(container[name]?.httpGet, name).toBeDefined();
      expect(portNumber(container, container[name].httpGet.port), `${name} on the admin listener`).toBe(admin);
    }
    const monitor = one(docs, (v) => v.kind === 'PodMonitor', 'PodMonitor');
    expect(selects(monitor.spec.selector, labels), 'the PodMonitor selects the gateway pods').toBe(true);
    expect(monitor.spec.podMetricsEndpoints).toHaveLength(1);
    expect(portNumber(container, monitor.spec.podMetricsEndpoints[0].port)).toBe(admin);
    // The drain: the kubelet runs preStop, then SIGTERM; the gateway drains for up to drainTimeoutMs and
    // closes; at terminationGracePeriodSeconds (counted from the start of preStop) it is killed.
    const preStop = container.lifecycle.preStop.sleep.seconds as number;
    expect(preStop).toBeGreaterThan(0);
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStop + model.drainTimeoutMs / 1000 + CLOSE_WAIT_S);
  });

  it('every variable set is one the runtime or gateway.yaml reads; every upstream URL variable is set; no GATEWAY_WORKERS', () => {
    const docs = allDocs();
    const { env, model } = gatewayPod(docs);
    const known = new Set([...runtimeVars(), ...templateVars(model)]);
    expect(runtimeVars()).toContain('REDIS_URL');
    expect(Object.keys(env).filter((k) => !known.has(k)), 'variables nothing reads').toEqual([]);
    // Their defaults in gateway.yaml are 127.0.0.1: in a pod, the pod itself.
    const upstreamVars = [...templateVars(model.chains.map((c) => c.upstreams))].sort();
    expect(upstreamVars.length).toBeGreaterThan(0);
    expect(upstreamVars.filter((v) => env[v] === undefined), 'upstream variables left to their loopback defaults').toEqual([]);
    // With workers the primary serves admin without /readyz: the readiness probe would never pass.
    expect(env.GATEWAY_WORKERS).toBeUndefined();
  });

  it('the keys file is in the keys Secret, mounted as a directory (no subPath), where GATEWAY_KEYS_FILE points', () => {
    const docs = allDocs();
    const { pod, container, env, model } = gatewayPod(docs);
    // runtime/config/env.ts keysSource(): GATEWAY_KEYS, else GATEWAY_KEYS_FILE, else the manifest's keys.
    const path = env.GATEWAY_KEYS ?? env.GATEWAY_KEYS_FILE ?? resolveTemplate(model.keysFile, 'keys', env);
    expect(posix.isAbsolute(path)).toBe(true);
    const mount = (container.volumeMounts as Obj[]).find((m) => m.mountPath === posix.dirname(path));
    expect(mount, `a volume mounted at ${posix.dirname(path)}`).toBeDefined();
    expect(mount!.subPath, 'a subPath mount never sees a Secret update').toBeUndefined();
    expect(mount!.readOnly).toBe(true);
    const volume = (pod.volumes as Obj[]).find((v) => v.name === mount!.name);
    expect(Object.keys(secretData(docs, volume!.secret.secretName))).toContain(posix.basename(path));
    expect(volume!.secret.items, 'every key of the Secret, as files').toBeUndefined();
    expect(volume!.secret.defaultMode).toBe(0o440);
    expect(pod.securityContext.fsGroup, 'the group the Secret files are readable by').toBe(pod.securityContext.runAsGroup);
  });

  it('REDIS_URL names the Redis Service and its port, which leads to the StatefulSet’s redis-server --port', () => {
    const docs = allDocs();
    const { env, redisSet } = gatewayPod(docs);
    const url = new URL(env.REDIS_URL!);
    expect(url.protocol).toBe('redis:');
    const service = one(docs, (v) => v.kind === 'Service' && v.metadata.name === url.hostname.split('.')[0], `Service ${url.hostname}`);
    expect(selected(docs, service.spec.selector)).toEqual([redisSet.metadata.name]);
    expect(redisSet.spec.serviceName).toBe(service.metadata.name);
    const port = (service.spec.ports as Obj[]).find((p) => p.port === Number(url.port || 6379));
    expect(port, `Service port ${url.port}`).toBeDefined();
    const container = redisSet.spec.template.spec.containers[0] as Obj;
    const args = container.args as string[];
    expect(portNumber(container, port!.targetPort)).toBe(Number(args[args.indexOf('--port') + 1]));
  });

  it('selectors: the Deployment’s and StatefulSet’s own, the PDB’s, and each NetworkPolicy’s, whose ports are every port of what it selects', () => {
    const docs = allDocs();
    const { deployment } = gatewayPod(docs);
    for (const w of docs.filter((d) => ['Deployment', 'StatefulSet'].includes(d.value.kind))) {
      expect(selects(w.value.spec.selector, w.value.spec.template.metadata.labels), `${w.where} selects its own pods`).toBe(true);
    }
    const pdb = one(docs, (v) => v.kind === 'PodDisruptionBudget', 'PodDisruptionBudget');
    expect(selected(docs, pdb.spec.selector)).toEqual([deployment.metadata.name]);
    expect(pdb.spec.minAvailable).toBeLessThan(deployment.spec.replicas);
    expect(deployment.spec.replicas).toBe(2);
    const policies = docs.filter((d) => d.value.kind === 'NetworkPolicy');
    for (const w of docs.filter((d) => ['Deployment', 'StatefulSet'].includes(d.value.kind))) {
      const mine = policies.filter((p) => selected(docs, p.value.spec.podSelector).includes(w.value.metadata.name));
      expect(mine, `${w.where}: one NetworkPolicy`).toHaveLength(1);
      const open = (mine[0]!.value.spec.ingress as Obj[]).flatMap((r) => (r.ports as Obj[]).map((p) => p.port));
      const ports = (w.value.spec.template.spec.containers as Obj[]).flatMap((c) => (c.ports as Obj[]).map((p) => p.name));
      expect(open.slice().sort(), `${mine[0]!.where}: every port of ${w.value.metadata.name}, by name`).toEqual(ports.slice().sort());
    }
  });

  it('the image is chain-gateway at the package’s version, run with its own CMD', () => {
    const { container } = gatewayPod(allDocs());
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(container.image).toBe(`chain-gateway:${pkg.version}`);
    expect(container.command).toBeUndefined();
    expect(container.args).toBeUndefined();
  });
});

/** The Dockerfile's final stage: its WORKDIR and CMD. */
function dockerImage(): { workdir: string; cmd: string[] } {
  const text = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
  const final = text.slice(text.lastIndexOf('\nFROM '));
  return { workdir: /^WORKDIR\s+(\S+)/m.exec(final)![1]!, cmd: JSON.parse(/^CMD\s+(\[.*\])$/m.exec(final)![1]!) as string[] };
}

describe('deploy/kubernetes, one pod run on this machine', () => {
  it(
    'the gateway built from gateway.yaml, with the container’s environment, the keys Secret and Redis: listens on the Service’s ports, passes the probes, serves the PodMonitor, reloads a Secret update, drains within the grace period',
    { timeout: 120_000 },
    async () => {
      const docs = allDocs();
      const { pod, container, env, model, service, redisSet } = gatewayPod(docs);
      const scratch = mkdtempSync(join(tmpdir(), 'gateway-k8s-'));
      onTestFinished(() => rmSync(scratch, { recursive: true, force: true }));
      // The image: what deploy/Dockerfile's build stage makes (`npm run build`: gateway.yaml), at its WORKDIR.
      const image = dockerImage();
      const workdir = join(scratch, 'image', image.workdir);
      mkdirSync(workdir, { recursive: true });
      const bundle = image.cmd.at(-1)!;
      await run(process.execPath, [join(ROOT, 'bin/gateway.mjs'), 'build', 'gateway.yaml', '--out', join(scratch, 'image', bundle)], { cwd: ROOT });
      // Paths in the pod: the mounts map to scratch folders, everything else into the image.
      const mounts = new Map<string, string>();
      for (const m of [...(container.volumeMounts as Obj[]), ...(redisSet.spec.template.spec.containers[0].volumeMounts as Obj[])]) {
        const dir = join(scratch, 'mounts', m.name as string);
        mkdirSync(dir, { recursive: true });
        mounts.set(m.mountPath as string, dir);
      }
      const inPod = (p: string): string => {
        for (const [at, dir] of mounts) if (p === at || p.startsWith(`${at}/`)) return dir + p.slice(at.length);
        return p;
      };
      // The cluster's DNS and kube-proxy: a Service's name leads to its pods' target port, here on loopback.
      const services = docs.filter((d) => d.value.kind === 'Service').map((d) => d.value);
      const viaServices = (value: string): string => {
        if (!/^[a-z]+:\/\//.test(value)) return value;
        const u = new URL(value);
        const svc = services.find((s) => s.metadata.name === u.hostname.split('.')[0]);
        if (svc === undefined) return value;
        const port = (svc.spec.ports as Obj[]).find((p) => p.port === Number(u.port));
        const target = docs.find((d) => ['Deployment', 'StatefulSet'].includes(d.value.kind) && selects(svc.spec.selector, d.value.spec.template.metadata.labels))!;
        u.hostname = '127.0.0.1';
        u.port = String(portNumber(target.value.spec.template.spec.containers[0], port!.targetPort));
        return u.toString().replace(/\/$/, '');
      };
      const podEnv = Object.fromEntries(Object.entries(env).map(([k, v]) => [k, viaServices(inPod(v))]));

      const redisContainer = redisSet.spec.template.spec.containers[0] as Obj;
      const keysMount = (container.volumeMounts as Obj[]).find((m) => m.name === (pod.volumes as Obj[]).find((v) => v.secret !== undefined)!.name)!;
      const keysSecret = (pod.volumes as Obj[]).find((v) => v.name === keysMount.name)!.secret.secretName as string;
      const keysFile = basename(env.GATEWAY_KEYS_FILE!);
      const key = newKey();
      const listenerPort = (name: string) => Number(resolveTemplate(model.listeners.find((l) => l.name === name)!.port, name, env));
      const upstreamVar = (c: GatewayModel['chains'][number]): string => {
        const parts = c.upstreams[0]!.url.parts;
        expect(c.upstreams, `${c.path}: one upstream, its URL one variable`).toHaveLength(1);
        expect(parts.length === 1 && typeof parts[0] === 'object').toBe(true);
        return (parts[0] as { env: string }).env;
      };
      const probePort = (name: string) => portNumber(container, container[name].httpGet.port);
      const monitor = one(docs, (v) => v.kind === 'PodMonitor', 'PodMonitor').spec.podMetricsEndpoints[0] as Obj;
      const podIp = '10.244.1.5';
      const plan: PodPlan = {
        podIp,
        workdir,
        cmd: [...image.cmd.slice(0, -1), join(scratch, 'image', bundle)],
        env: podEnv,
        secretDir: mounts.get(keysMount.mountPath as string)!,
        secretFiles: secretData(docs, keysSecret),
        secretUpdate: { ...secretData(docs, keysSecret), [keysFile]: keysYaml([{ id: 'k8s-test', key }]) },
        key,
        redis: { command: redisContainer.command[0], args: (redisContainer.args as string[]).map(inPod), port: redisContainer.ports[0].containerPort },
        chains: model.chains.map((c) => ({
          path: c.path,
          interface: c.interface,
          listener: c.listener,
          port: listenerPort(c.listener),
          urlVar: upstreamVar(c),
          ...(c.chainId === undefined ? {} : { chainId: c.chainId }),
          ...(c.network === undefined ? {} : { network: c.network }),
          ...(c.coin === undefined ? {} : { coin: c.coin }),
        })),
        probes: {
          startup: { port: probePort('startupProbe'), path: container.startupProbe.httpGet.path },
          liveness: { port: probePort('livenessProbe'), path: container.livenessProbe.httpGet.path },
          readiness: { port: probePort('readinessProbe'), path: container.readinessProbe.httpGet.path },
        },
        metrics: { port: portNumber(container, monitor.port), path: monitor.path },
        report: join(scratch, 'report.json'),
      };
      const planFile = join(scratch, 'plan.json');
      writeFileSync(planFile, JSON.stringify(plan));

      // A network namespace of its own, as a pod has: loopback up, and the pod's address.
      const child = spawn(
        'unshare',
        ['--net', '--map-root-user', '--', 'sh', '-c', `ip link set lo up && ip addr add ${podIp}/32 dev lo && exec "$@"`, 'sh', process.execPath, '--import', 'tsx', join(ROOT, 'test/e2e/kubernetes-pod.ts'), planFile],
        { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      onTestFinished(() => void (child.exitCode === null && child.signalCode === null && child.kill('SIGKILL')));
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
      child.stdout!.resume();
      const code = await new Promise<number | null>((r) => child.once('exit', (c) => r(c)));
      expect(code, `the pod's run failed:\n${stderr}`).toBe(0);
      const report = JSON.parse(readFileSync(plan.report, 'utf8')) as PodReport;

      // It listens where the Service sends traffic, and admin where the probes and Prometheus go.
      const bound = Object.fromEntries(report.listeners.map((l) => [l.listener, l.port]));
      for (const p of service.spec.ports as Obj[]) expect(bound[p.name], `Service port ${p.name}`).toBe(portNumber(container, p.targetPort));
      expect(bound.admin).toBe(probePort('readinessProbe'));
      expect(report.probes).toEqual({ startup: 200, liveness: 200, readiness: 200 });
      expect(report.readyBody).toMatchObject({ status: 'ready' });
      expect(report.metrics.status).toBe(200);
      expect(report.metrics.contentType).toMatch(/^text\/plain/);
      expect(report.metrics.body).toContain('# TYPE gateway_requests_total counter');
      // Every chain through its listener's port: refused before the Secret update, served after it.
      expect(Object.values(report.before).filter((s) => s === 200), 'answers with a key the Secret did not hold yet').toEqual([]);
      expect(report.after).toEqual(Object.fromEntries(model.chains.map((c) => [c.path, 200])));
      expect(report.chainIds).toEqual(Object.fromEntries(model.chains.filter((c) => c.chainId !== undefined).map((c) => [c.path, `0x${c.chainId!.toString(16)}`])));
      expect(report.reloaded).toMatchObject({ reason: 'file changed', keys: 1 });
      // SIGTERM: the readiness probe fails at once; the process is done well within the grace period.
      expect(report.readinessDraining === 0 || report.readinessDraining >= 400, `readiness while draining: ${report.readinessDraining}`).toBe(true);
      expect(report.exitCode).toBe(0);
      expect(report.stopMs).toBeLessThan((pod.terminationGracePeriodSeconds - container.lifecycle.preStop.sleep.seconds) * 1000);
      // The replicas' shared counts reached Redis through REDIS_URL.
      expect(report.redisKeys.some((k) => k.startsWith('gw:usage:k8s-test:')), report.redisKeys.join(' ')).toBe(true);
    },
  );
});
