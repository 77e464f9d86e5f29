/**
 * No cluster runs here, so the Knative wiring under knative/ is checked statically: every
 * manifest parses and is listed by the kustomization, permissions are exactly what each
 * component needs (no wildcards, no built-in admin roles, Secrets only in edgeai-system), each
 * Trigger routes only catalogued types to the one function that handles them, each PingSource's
 * ticks reach only the function it is the clock of, the sources and their ServiceAccounts agree,
 * each function's environment passes that function's own config loader, and Redis takes only
 * authenticated connections from the functions that use it. Field names were checked against
 * Knative's API types; see docs/deploying.md.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  asetSchedulerDefinition,
  loadAsetSchedulerConfig,
  loadScenario,
  readTrainedNetwork,
} from '../../shared/aset/index.js';
import type { AsetScheduler } from '../../shared/aset/index.js';
import { loadConfig } from '../../shared/config/index.js';
import type { Env } from '../../shared/config/index.js';
import { loadControllerConfig } from '../../shared/controller/index.js';
import {
  aggregatorWorker,
  desiredFederated,
  federatedLabels,
} from '../../shared/controller/federated-desired.js';
import { desiredGraph, graphLabels } from '../../shared/controller/graph-desired.js';
import { labels, managerName } from '../../shared/controller/types.js';
import { eventTypes } from '../../shared/events/index.js';
import type { KubeObject } from '../../shared/k8s/index.js';
import { loadUpstreamConfig } from '../../shared/status/index.js';
import { loadSyncConfig } from '../../shared/sync/index.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const knativeDir = join(root, 'knative');
const systemNamespace = 'edgeai-system';
const image = 'edgeai';
const functionNames = [
  'reconcile-tick',
  'downstream-sync',
  'upstream-status',
  'aset-scheduler',
] as const;
type FunctionName = (typeof functionNames)[number];

type Obj = Record<string, unknown>;

interface Manifest {
  /** Path under knative/, with forward slashes. */
  file: string;
  doc: Obj;
}

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Reads a field path, failing with the path and file when a step is not an object. */
function field(m: Manifest, path: string): unknown {
  let current: unknown = m.doc;
  for (const step of path.split('.')) {
    if (!isObj(current)) throw new Error(`${where(m)}: ${path} is not an object at "${step}"`);
    current = current[step];
  }
  return current;
}

function str(m: Manifest, path: string): string {
  const value = field(m, path);
  if (typeof value !== 'string') throw new Error(`${where(m)}: ${path} must be a string`);
  return value;
}

function objects(m: Manifest, path: string): Obj[] {
  const value = field(m, path) ?? [];
  if (!Array.isArray(value) || !value.every(isObj)) {
    throw new Error(`${where(m)}: ${path} must be a list of objects`);
  }
  return value;
}

function strings(value: unknown, what: string): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw new Error(`${what} must be a list of strings`);
  }
  return value;
}

function where(m: Manifest): string {
  const name = isObj(m.doc['metadata']) ? String(m.doc['metadata']['name']) : '?';
  return `${m.file} ${String(m.doc['kind'])}/${name}`;
}

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(entry.name) ? [relative(knativeDir, path).split(sep).join('/')] : [];
  });
}

function load(file: string): Manifest[] {
  const text = readFileSync(join(knativeDir, file), 'utf8');
  return parseAllDocuments(text).flatMap((document, index) => {
    if (document.errors.length > 0) {
      throw new Error(`${file} document ${index}: ${document.errors[0]?.message ?? 'error'}`);
    }
    const doc: unknown = document.toJS();
    if (doc === null || doc === undefined) return [];
    if (!isObj(doc)) throw new Error(`${file} document ${index}: not a mapping`);
    return [{ file, doc }];
  });
}

const kustomizationFile = 'kustomization.yaml';
const kustomization = parse(readFileSync(join(knativeDir, kustomizationFile), 'utf8')) as unknown;
const kustomize = isObj(kustomization) ? kustomization : {};
/** Transformer configurations: kustomize input, not Kubernetes objects. */
const configurationFiles = strings(kustomize['configurations'], 'kustomization configurations');
const allFiles = yamlFiles(knativeDir).sort();
const manifestFiles = allFiles.filter(
  (f) => f !== kustomizationFile && !configurationFiles.includes(f),
);
const all = manifestFiles.flatMap(load);
const isUnder = (m: Manifest, dir: string) => m.file.startsWith(`${dir}/`);
/** What kubectl apply -k creates, less the generated CRDs. */
const controlPlane = all.filter(
  (m) => !['crds', 'samples', 'serving'].some((dir) => isUnder(m, dir)),
);

const name = (m: Manifest) => str(m, 'metadata.name');
const namespace = (m: Manifest) => field(m, 'metadata.namespace');
const ofKind = (kind: string, apiVersion?: string) =>
  controlPlane.filter(
    (m) =>
      m.doc['kind'] === kind && (apiVersion === undefined || m.doc['apiVersion'] === apiVersion),
  );
const knativeServices = () => ofKind('Service', 'serving.knative.dev/v1');
const triggers = () => ofKind('Trigger', 'eventing.knative.dev/v1');
const apiServerSources = () => ofKind('ApiServerSource', 'sources.knative.dev/v1');
const pingSources = () => ofKind('PingSource', 'sources.knative.dev/v1');

function knativeService(fn: FunctionName): Manifest {
  const found = knativeServices().find((m) => name(m) === fn);
  if (found === undefined) throw new Error(`no Knative Service named ${fn}`);
  return found;
}

function container(m: Manifest): Obj {
  const containers = objects(m, 'spec.template.spec.containers');
  expect(containers, `${where(m)}: exactly one container`).toHaveLength(1);
  return containers[0]!;
}

function envOf(m: Manifest): Obj[] {
  const env = container(m)['env'] ?? [];
  if (!Array.isArray(env) || !env.every(isObj)) throw new Error(`${where(m)}: env is not a list`);
  return env;
}

/**
 * Secrets the operator creates by hand (docs/deploying.md), so that no credential is in git:
 * name -> keys. The test stands in a placeholder for their values.
 */
const operatorSecrets: Record<string, readonly string[]> = {
  'edgeai-redis-auth': [
    'password',
    'worker-password',
    'mlgraph-password',
    'fl-aggregator-password',
    'reconcile-tick-password',
  ],
  // Optional (aset-scheduler's report route answers 403 without it).
  'edgeai-aset-report-token': ['token'],
};

/** A Secret's key, from stringData or base64 data, as the kubelet would resolve it. */
function secretValue(secretName: string, key: string): string | undefined {
  const secret = ofKind('Secret').find(
    (m) => name(m) === secretName && namespace(m) === systemNamespace,
  );
  if (secret === undefined) {
    return operatorSecrets[secretName]?.includes(key) ? `<${secretName}/${key}>` : undefined;
  }
  const plain = field(secret, 'stringData');
  if (isObj(plain) && typeof plain[key] === 'string') return plain[key];
  const encoded = field(secret, 'data');
  if (isObj(encoded) && typeof encoded[key] === 'string') {
    return Buffer.from(encoded[key], 'base64').toString('utf8');
  }
  return undefined;
}

/** A ConfigMap's key in edgeai-system. */
function configMapValue(mapName: string, key: string): string | undefined {
  const map = ofKind('ConfigMap').find(
    (m) => name(m) === mapName && namespace(m) === systemNamespace,
  );
  const data = map === undefined ? undefined : field(map, 'data');
  return isObj(data) && typeof data[key] === 'string' ? data[key] : undefined;
}

/**
 * The environment a container would start with (Knative adds PORT). A reference marked
 * `optional: true` is left unset, as the kubelet does when its Secret or ConfigMap is missing,
 * unless `optionals` is "present" (the operator created them).
 */
function resolveEnv(
  env: readonly Obj[],
  where: string,
  optionals: 'absent' | 'present' = 'absent',
): Env {
  const resolved: Record<string, string> = { PORT: '8080' };
  for (const entry of env) {
    const key = String(entry['name']);
    if (typeof entry['value'] === 'string') {
      resolved[key] = entry['value'];
      continue;
    }
    const from = isObj(entry['valueFrom']) ? entry['valueFrom'] : {};
    const secret = from['secretKeyRef'];
    const map = from['configMapKeyRef'];
    const ref = isObj(secret) ? secret : isObj(map) ? map : {};
    // An optional ConfigMap key is read from the ConfigMap in git: absent when it has no such key.
    if (ref['optional'] === true && optionals === 'absent' && !isObj(map)) continue;
    const value = isObj(secret)
      ? secretValue(String(secret['name']), String(secret['key']))
      : isObj(map)
        ? configMapValue(String(map['name']), String(map['key']))
        : undefined;
    if (value === undefined && ref['optional'] === true) continue;
    if (value === undefined) {
      throw new Error(`${where}: env ${key} has no value, or refers to a missing key`);
    }
    resolved[key] = value;
  }
  return resolved;
}

const resolvedEnv = (m: Manifest, optionals: 'absent' | 'present' = 'absent'): Env =>
  resolveEnv(envOf(m), where(m), optionals);

// --- RBAC -----------------------------------------------------------------------------------

/** One permission, as "<scope> <group>/<resource> <verb>"; scope is "cluster" or a namespace. */
type Grant = string;

function rulesGrants(role: Manifest, scope: string): Grant[] {
  return objects(role, 'rules').flatMap((rule, i) => {
    const what = `${where(role)} rules[${i}]`;
    const groups = strings(rule['apiGroups'], `${what}.apiGroups`);
    const resources = strings(rule['resources'], `${what}.resources`);
    const verbs = strings(rule['verbs'], `${what}.verbs`);
    return groups.flatMap((g) =>
      resources.flatMap((r) => verbs.map((v) => `${scope} ${g === '' ? 'core' : g}/${r} ${v}`)),
    );
  });
}

function roleFor(binding: Manifest): Manifest | undefined {
  const kind = str(binding, 'roleRef.kind');
  const roleName = str(binding, 'roleRef.name');
  return ofKind(kind).find(
    (m) => name(m) === roleName && (kind === 'ClusterRole' || namespace(m) === namespace(binding)),
  );
}

function boundTo(binding: Manifest, serviceAccount: string): boolean {
  return objects(binding, 'subjects').some(
    (s) =>
      s['kind'] === 'ServiceAccount' &&
      s['name'] === serviceAccount &&
      s['namespace'] === systemNamespace,
  );
}

/** Everything a ServiceAccount in edgeai-system may do, through every binding here. */
function grantsOf(serviceAccount: string): Grant[] {
  const bindings = [...ofKind('ClusterRoleBinding'), ...ofKind('RoleBinding')];
  const granted = bindings
    .filter((b) => boundTo(b, serviceAccount))
    .flatMap((binding) => {
      const role = roleFor(binding);
      if (role === undefined) throw new Error(`${where(binding)}: its role is not defined here`);
      const scope = binding.doc['kind'] === 'ClusterRoleBinding' ? 'cluster' : namespace(binding);
      return rulesGrants(role, String(scope));
    });
  return [...new Set(granted)].sort();
}

const grants = (scope: string, resource: string, verbs: readonly string[]): Grant[] =>
  verbs.map((verb) => `${scope} ${resource} ${verb}`);

/** The permissions each function needs (docs/control-plane.md and docs/deploying.md "What is in knative/"), and nothing else. */
const functionGrants: Record<FunctionName, Grant[]> = {
  'reconcile-tick': [
    ...grants('cluster', 'edgeai.io/jointinferenceservices', ['get', 'list']),
    // patch: a federated learning job's aggregationWorker Model gets the global model.
    ...grants('cluster', 'edgeai.io/models', ['get', 'list', 'patch']),
    ...grants('cluster', 'edgeai.io/mlgraphs', ['get', 'list']),
    ...grants('cluster', 'edgeai.io/federatedlearningjobs', ['get', 'list']),
    ...grants('cluster', 'edgeai.io/datasets', ['get', 'list']),
    ...grants('cluster', 'edgeai.io/jointinferenceservices/status', ['get', 'patch']),
    ...grants('cluster', 'edgeai.io/mlgraphs/status', ['get', 'patch']),
    ...grants('cluster', 'edgeai.io/federatedlearningjobs/status', ['get', 'patch']),
    // blockOwnerDeletion on the workers' ownerReference, under OwnerReferencesPermissionEnforcement.
    ...grants('cluster', 'edgeai.io/jointinferenceservices/finalizers', ['update']),
    ...grants('cluster', 'edgeai.io/mlgraphs/finalizers', ['update']),
    ...grants('cluster', 'edgeai.io/federatedlearningjobs/finalizers', ['update']),
    ...grants('cluster', 'core/nodes', ['get', 'list']),
    // delete: the Service of a node removed from its MLGraph.
    ...grants('cluster', 'serving.knative.dev/services', [
      'get',
      'list',
      'create',
      'patch',
      'delete',
    ]),
    ...grants('cluster', 'core/events', ['create']),
  ],
  'downstream-sync': [
    ...grants('cluster', 'edgeai.io/jointinferenceservices', ['get', 'list']),
    ...grants('cluster', 'core/nodes', ['get', 'list']),
  ],
  'upstream-status': [
    ...grants('cluster', 'edgeai.io/jointinferenceservices', ['get']),
    ...grants('cluster', 'edgeai.io/jointinferenceservices/status', ['get', 'patch']),
    ...grants('cluster', 'core/nodes', ['get']),
    ...grants(systemNamespace, 'core/secrets', ['get']),
  ],
  // State in Redis only: it never calls the Kubernetes API.
  'aset-scheduler': [],
};

// --- Eventing -------------------------------------------------------------------------------

const apiServerTypes: readonly string[] = [
  eventTypes.apiServerAdd,
  eventTypes.apiServerUpdate,
  eventTypes.apiServerDelete,
];

/**
 * aset-scheduler's definition, for the event types it declares. Its handlers never run here,
 * so no scheduler stands behind them.
 */
const asetDefinition = asetSchedulerDefinition({
  scheduler: {} as AsetScheduler,
  reportToken: undefined,
  readiness: [],
});

/** The event types each function handles (its definition's onEvent list). */
const functionEvents: Record<FunctionName, string[]> = {
  // flRoundCompleted: a federated job's aggregator announces a round's end (FL_EVENTS_URL).
  'reconcile-tick': [eventTypes.pingTick, ...apiServerTypes, eventTypes.flRoundCompleted],
  'downstream-sync': [eventTypes.pingTick, ...apiServerTypes],
  'upstream-status': [eventTypes.workerStatusReported],
  'aset-scheduler': asetDefinition.events.map((e) => e.type),
};

/** The event types each function answers with (reply events the Broker re-ingests). */
const functionReplies: Partial<Record<FunctionName, string[]>> = {
  'aset-scheduler': asetDefinition.events.flatMap((e) => e.replies),
};

/** What each function's ApiServerSource must watch: "<apiVersion> <Kind>[ <selector>]". */
const functionWatches: Partial<Record<FunctionName, string[]>> = {
  'reconcile-tick': [
    'edgeai.io/v1alpha1 JointInferenceService',
    'edgeai.io/v1alpha1 Model',
    'edgeai.io/v1alpha1 MLGraph',
    'edgeai.io/v1alpha1 FederatedLearningJob',
    'edgeai.io/v1alpha1 Dataset',
    'serving.knative.dev/v1 Service app.kubernetes.io/managed-by=edgeai',
  ],
  'downstream-sync': ['edgeai.io/v1alpha1 JointInferenceService'],
};

/** Exact-match attribute filters of a Trigger, in either dialect, as [attribute, value]. */
function exactFilters(trigger: Manifest): Array<[string, string]> {
  const found: Array<[string, string]> = [];
  const attributes = field(trigger, 'spec.filter.attributes');
  if (isObj(attributes)) {
    for (const [key, value] of Object.entries(attributes)) found.push([key, String(value)]);
  }
  // The newer `filters` dialect: only exact (possibly under all) can be checked statically.
  const visit = (expression: unknown, path: string): void => {
    if (!isObj(expression)) throw new Error(`${where(trigger)}: ${path} is not an expression`);
    const dialects = Object.keys(expression);
    for (const dialect of dialects) {
      const body = expression[dialect];
      if (dialect === 'exact' && isObj(body)) {
        for (const [key, value] of Object.entries(body)) found.push([key, String(value)]);
      } else if (dialect === 'all' && Array.isArray(body)) {
        body.forEach((inner, i) => visit(inner, `${path}.all[${i}]`));
      } else {
        throw new Error(
          `${where(trigger)}: ${path}.${dialect}: only exact and all can be checked against the catalogue`,
        );
      }
    }
  };
  const filters = field(trigger, 'spec.filters');
  if (filters !== undefined) {
    if (!Array.isArray(filters)) throw new Error(`${where(trigger)}: spec.filters is not a list`);
    filters.forEach((f, i) => visit(f, `spec.filters[${i}]`));
  }
  return found;
}

const filterValue = (trigger: Manifest, attribute: string): string | undefined => {
  const values = exactFilters(trigger)
    .filter(([key]) => key === attribute)
    .map(([, value]) => value);
  expect(new Set(values).size, `${where(trigger)}: one value for ${attribute}`).toBeLessThan(2);
  return values[0];
};

const subscriberOf = (trigger: Manifest) => str(trigger, 'spec.subscriber.ref.name');

/** Whether the Broker hands an event with these attributes to the Trigger (every filter equal). */
const triggerMatches = (trigger: Manifest, attributes: Readonly<Record<string, string>>) =>
  exactFilters(trigger).every(([key, value]) => attributes[key] === value);

/** A PingSource's CloudEvent source attribute (sources/v1 PingSourceSource). */
const pingSourceSource = (ping: Manifest) =>
  `/apis/v1/namespaces/${String(namespace(ping))}/pingsources/${name(ping)}`;

function watchesOf(source: Manifest): string[] {
  return objects(source, 'spec.resources').map((r) => {
    const selector = isObj(r['selector']) ? r['selector']['matchLabels'] : undefined;
    const labels = isObj(selector)
      ? Object.entries(selector).map(([k, v]) => ` ${k}=${String(v)}`)
      : [];
    return `${String(r['apiVersion'])} ${String(r['kind'])}${labels.join('')}`;
  });
}

/** The resource name Knative derives from a kind (meta.UnsafeGuessKindToResource). */
function plural(kind: string): string {
  const lower = kind.toLowerCase();
  if (lower.endsWith('s')) return `${lower}es`;
  if (lower.endsWith('y')) return `${lower.slice(0, -1)}ies`;
  return `${lower}s`;
}

/** The one Broker of the control plane (eventing/broker.yaml). */
function theBroker(): Manifest {
  const [broker, ...more] = ofKind('Broker', 'eventing.knative.dev/v1');
  expect(more, 'one Broker').toEqual([]);
  if (broker === undefined) throw new Error('no Broker');
  return broker;
}

/**
 * Where a Broker of the MTChannelBasedBroker class takes events over HTTP (its
 * status.address.url): Knative Eventing's shared ingress, by the Broker's namespace and name.
 */
const brokerIngress = (broker: Manifest) =>
  `http://broker-ingress.knative-eventing.svc.cluster.local/${String(namespace(broker))}/${name(broker)}`;

function sinkIsTheBroker(source: Manifest): void {
  expect(field(source, 'spec.sink.ref'), `${where(source)}: sink is the Broker "default"`).toEqual({
    apiVersion: 'eventing.knative.dev/v1',
    kind: 'Broker',
    name: 'default',
  });
}

/** Whether a NetworkPolicy's podSelector (matchLabels, matchExpressions) selects `labels`. */
function selects(selector: unknown, labels: Obj): boolean {
  if (!isObj(selector)) return false;
  const match = isObj(selector['matchLabels']) ? selector['matchLabels'] : {};
  const expressions = Array.isArray(selector['matchExpressions'])
    ? selector['matchExpressions']
    : [];
  return (
    Object.entries(match).every(([key, value]) => labels[key] === value) &&
    expressions.every((e: unknown) => {
      if (!isObj(e)) return false;
      const present = Object.hasOwn(labels, String(e['key']));
      const value = labels[String(e['key'])];
      const values = strings(e['values'], 'matchExpressions values');
      switch (e['operator']) {
        case 'Exists':
          return present;
        case 'DoesNotExist':
          return !present;
        case 'In':
          return present && values.includes(String(value));
        case 'NotIn':
          return !present || !values.includes(String(value));
        default:
          throw new Error(`matchExpressions operator ${String(e['operator'])}`);
      }
    })
  );
}

/**
 * The Redis container's ACL users (its `--user <name> <rule>...` arguments) by name, with their
 * rules and the variable their password comes from (`>$(VAR)`, which the kubelet expands).
 */
function aclUsers(
  args: readonly string[],
): Map<string, { rules: string[]; passwordVariable: string }> {
  const users = new Map<string, { rules: string[]; passwordVariable: string }>();
  args.forEach((arg, i) => {
    if (arg !== '--user') return;
    const end = args.findIndex((a, j) => j > i && a.startsWith('--'));
    const [userName, ...rules] = args.slice(i + 1, end === -1 ? undefined : end);
    const passwords = rules.flatMap((r) => /^>\$\((\w+)\)$/.exec(r)?.[1] ?? []);
    expect(passwords, `ACL user ${String(userName)}: one password, from a variable`).toHaveLength(
      1,
    );
    users.set(String(userName), { rules, passwordVariable: passwords[0]! });
  });
  return users;
}

// Asymmetric matchers are typed any; held as unknown so they can sit in expected objects.
const anyString: unknown = expect.any(String);
const anyNumber: unknown = expect.any(Number);
/** An ISO 8601 duration, as Knative's delivery backoffDelay takes (PT0.5S). */
const isoDuration: unknown = expect.stringMatching(
  /^P(?!$)(\d+D)?(T(?=\d)(\d+H)?(\d+M)?(\d+(\.\d+)?S)?)?$/,
);

// --- Tests ----------------------------------------------------------------------------------

describe('knative/ manifests', () => {
  it('parse, and every document has apiVersion, kind and metadata.name', () => {
    expect(all.length).toBeGreaterThan(20);
    for (const m of all) {
      expect(typeof m.doc['apiVersion'], `${m.file}: apiVersion`).toBe('string');
      expect(typeof m.doc['kind'], `${m.file}: kind`).toBe('string');
      expect(typeof field(m, 'metadata.name'), `${m.file}: metadata.name`).toBe('string');
    }
  });

  it('put every namespaced object in edgeai-system', () => {
    const clusterScoped = new Set([
      'Namespace',
      'ClusterRole',
      'ClusterRoleBinding',
      'CustomResourceDefinition',
    ]);
    for (const m of controlPlane) {
      const kind = String(m.doc['kind']);
      if (clusterScoped.has(kind)) {
        expect(namespace(m), `${where(m)} is cluster-scoped`).toBeUndefined();
      } else {
        expect(namespace(m), `${where(m)} must be in ${systemNamespace}`).toBe(systemNamespace);
      }
    }
    for (const m of all.filter((x) => isUnder(x, 'serving'))) {
      expect(namespace(m), `${where(m)} patches Knative Serving`).toBe('knative-serving');
    }
    expect(ofKind('Namespace').map(name)).toEqual([systemNamespace]);
  });

  it('never label a control-plane object as a worker the controller manages', () => {
    // The reconcile-tick ApiServerSource and the controller's list both select on this label.
    for (const m of controlPlane) {
      const labels = field(m, 'metadata.labels');
      const managedBy = isObj(labels) ? labels['app.kubernetes.io/managed-by'] : undefined;
      expect(managedBy, `${where(m)}: managed-by=edgeai marks worker Services`).not.toBe('edgeai');
    }
  });
});

describe('RBAC', () => {
  const roles = () => [...ofKind('Role'), ...ofKind('ClusterRole')];
  const bindings = () => [...ofKind('RoleBinding'), ...ofKind('ClusterRoleBinding')];

  it('names no wildcard in apiGroups, resources, verbs or resourceNames', () => {
    expect(roles().length).toBeGreaterThan(0);
    for (const role of roles()) {
      objects(role, 'rules').forEach((rule, i) => {
        for (const key of ['apiGroups', 'resources', 'verbs', 'resourceNames', 'nonResourceURLs']) {
          const values = strings(rule[key], `${where(role)} rules[${i}].${key}`);
          expect(
            values.filter((v) => v.includes('*')),
            `${where(role)} rules[${i}].${key} must not use *`,
          ).toEqual([]);
        }
      });
    }
  });

  it('binds only roles defined here, never the built-in admin roles, to ServiceAccounts defined here', () => {
    const serviceAccounts = new Set(ofKind('ServiceAccount').map(name));
    for (const binding of bindings()) {
      const roleName = str(binding, 'roleRef.name');
      expect(
        ['cluster-admin', 'admin', 'edit'],
        `${where(binding)} binds ${roleName}`,
      ).not.toContain(roleName);
      expect(
        roleFor(binding),
        `${where(binding)}: role ${roleName} is not defined here`,
      ).toBeDefined();
      for (const subject of objects(binding, 'subjects')) {
        expect(subject['kind'], `${where(binding)}: subjects are ServiceAccounts`).toBe(
          'ServiceAccount',
        );
        expect(subject['namespace'], `${where(binding)}: subject namespace`).toBe(systemNamespace);
        expect(
          serviceAccounts.has(String(subject['name'])),
          `${where(binding)}: ServiceAccount ${String(subject['name'])} is not defined here`,
        ).toBe(true);
      }
    }
  });

  it('grants Secrets only through a Role in edgeai-system', () => {
    for (const role of roles()) {
      const touchesSecrets = objects(role, 'rules').some((rule) =>
        strings(rule['resources'], `${where(role)} resources`).some(
          (r) => r === 'secrets' || r.startsWith('secrets/'),
        ),
      );
      if (!touchesSecrets) continue;
      expect(role.doc['kind'], `${where(role)}: secrets only in a namespaced Role`).toBe('Role');
      expect(namespace(role), `${where(role)}: secrets only in ${systemNamespace}`).toBe(
        systemNamespace,
      );
    }
    // A RoleBinding elsewhere, or to a ClusterRole, would widen that: none may carry secrets.
    for (const sa of ofKind('ServiceAccount').map(name)) {
      const leaked = grantsOf(sa).filter(
        (g) => g.includes(' core/secrets') && !g.startsWith(`${systemNamespace} `),
      );
      expect(leaked, `${sa}: Secrets outside ${systemNamespace}`).toEqual([]);
    }
  });

  it.each(functionNames)('gives %s exactly the permissions it needs', (fn) => {
    const sa = str(knativeService(fn), 'spec.template.spec.serviceAccountName');
    expect(grantsOf(sa), `${fn} (ServiceAccount ${sa})`).toEqual(
      [...new Set(functionGrants[fn])].sort(),
    );
  });

  it('gives aset-scheduler a ServiceAccount that mounts no token and is bound to no role', () => {
    const ksvc = knativeService('aset-scheduler');
    const sa = str(ksvc, 'spec.template.spec.serviceAccountName');
    expect(sa).toBe('edgeai-aset-scheduler');
    const [account, ...more] = ofKind('ServiceAccount').filter((m) => name(m) === sa);
    expect(more, `one ServiceAccount ${sa}`).toEqual([]);
    expect(account, `ServiceAccount ${sa}`).toBeDefined();
    expect(field(account!, 'automountServiceAccountToken'), `${sa}: no token`).toBe(false);
    // The pod says so too (Knative accepts only false here), whatever the account says later.
    expect(field(ksvc, 'spec.template.spec.automountServiceAccountToken'), 'pod: no token').toBe(
      false,
    );
    const bound = bindings().filter((b) =>
      objects(b, 'subjects').some((s) => s['kind'] === 'ServiceAccount' && s['name'] === sa),
    );
    expect(bound.map(where), `${sa} is a subject of no binding`).toEqual([]);
    expect(grantsOf(sa)).toEqual([]);
  });
});

describe('Knative Services', () => {
  it('are exactly the control-plane functions', () => {
    expect(knativeServices().map(name).sort()).toEqual([...functionNames].sort());
  });

  it('each run as a ServiceAccount of their own that exists', () => {
    const accounts = functionNames.map((fn) =>
      str(knativeService(fn), 'spec.template.spec.serviceAccountName'),
    );
    expect(new Set(accounts).size, 'one ServiceAccount per function').toBe(accounts.length);
    const defined = ofKind('ServiceAccount').map(name);
    for (const sa of accounts) expect(defined, `ServiceAccount ${sa}`).toContain(sa);
    const sourceAccounts = apiServerSources().map((s) => str(s, 'spec.serviceAccountName'));
    for (const sa of accounts) {
      expect(sourceAccounts, `${sa} is also an ApiServerSource's identity`).not.toContain(sa);
    }
  });

  it('publish only upstream-status outside the cluster', () => {
    const visibility = (fn: FunctionName) => {
      const labels = field(knativeService(fn), 'metadata.labels');
      return isObj(labels) ? labels['networking.knative.dev/visibility'] : undefined;
    };
    for (const fn of functionNames.filter((f) => f !== 'upstream-status')) {
      expect(visibility(fn), `${fn} is cluster-local`).toBe('cluster-local');
    }
    expect(visibility('upstream-status'), 'edge nodes must reach upstream-status').toBeUndefined();
  });

  it('keeps one aset-scheduler replica warm, and lets it scale out', () => {
    const annotations = field(
      knativeService('aset-scheduler'),
      'spec.template.metadata.annotations',
    );
    expect(annotations, 'revision annotations').toMatchObject({
      'autoscaling.knative.dev/min-scale': '1',
    });
    // Replicas share their state in Redis; unlike reconcile-tick it is not capped at one.
    const maxScale = isObj(annotations) ? annotations['autoscaling.knative.dev/max-scale'] : '?';
    expect(maxScale, 'no max-scale').toBeUndefined();
  });

  it.each(functionNames)('run %s from the one image, as a non-root user, with probes', (fn) => {
    const m = knativeService(fn);
    const c = container(m);
    expect(c['image'], `${fn}: image must be "${image}" (kustomize images: rewrites it)`).toBe(
      image,
    );
    const env = resolvedEnv(m);
    expect(env['FUNCTION_TARGET'], `${fn}: FUNCTION_TARGET`).toBe(fn);
    expect(existsSync(join(root, 'functions', fn, 'index.ts')), `functions/${fn}/index.ts`).toBe(
      true,
    );
    expect(
      envOf(m).map((e) => e['name']),
      `${fn}: PORT is set by Knative`,
    ).not.toContain('PORT');
    expect(field(m, 'spec.template.spec.containers'), `${fn}: probes`).toMatchObject([
      {
        readinessProbe: { httpGet: { path: '/health/readiness' } },
        livenessProbe: { httpGet: { path: '/health/liveness' } },
      },
    ]);
    expect(c['securityContext'], `${fn}: securityContext`).toMatchObject({
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
    });
    const runAs = isObj(c['securityContext']) ? c['securityContext']['runAsUser'] : undefined;
    expect(runAs, `${fn}: runAsUser must be numeric and not 0`).toBeGreaterThan(0);
    expect(c['resources'], `${fn}: resources`).toMatchObject({
      requests: { cpu: anyString, memory: anyString },
      limits: { memory: anyString },
    });
  });

  it('give each function an environment its own config loader accepts', () => {
    for (const fn of functionNames) {
      const env = resolvedEnv(knativeService(fn));
      expect(() => loadConfig(env), `${fn}: runtime config`).not.toThrow();
    }
    const tick = resolvedEnv(knativeService('reconcile-tick'));
    expect(() => loadControllerConfig(tick), 'reconcile-tick config').not.toThrow();
    expect(tick['KUBECONFIG'], 'reconcile-tick uses the in-cluster ServiceAccount').toBeUndefined();
    expect(tick['WORKER_IMAGE'], 'WORKER_IMAGE is the image kustomize rewrites').toBe(image);
    expect(tick['WORKER_SECRET']).toBe('edgeai-worker');
    // Graph Services log in to Redis as their own user (docs/deploying.md step 6).
    expect(loadControllerConfig(tick).graphs.workerSecret).toBe('edgeai-mlgraph');
    expect(new URL(tick['UPSTREAM_STATUS_URL'] ?? '').hostname).toMatch(
      /^upstream-status\.edgeai-system\./,
    );
    const sync = resolvedEnv(knativeService('downstream-sync'));
    expect(() => loadSyncConfig(sync), 'downstream-sync config').not.toThrow();
    const status = resolvedEnv(knativeService('upstream-status'));
    expect(loadUpstreamConfig(status).tokenNamespace, 'node tokens are in edgeai-system').toBe(
      systemNamespace,
    );
    for (const env of [tick, sync, status, resolvedEnv(knativeService('aset-scheduler'))]) {
      expect(env['REDIS_URL']).toBe('redis://edgeai-redis.edgeai-system.svc.cluster.local:6379');
    }
    // A federated job's aggregator logs in to Redis as its own user (docs/deploying.md step 6)
    // and announces each round's end to the Broker; reconcile-tick reads the jobs' progress as
    // its own read-only user.
    const federated = loadControllerConfig(tick).federated;
    expect(federated.workerSecret, 'FL_SECRET').toBe('edgeai-fl');
    expect(federated.eventsUrl, 'BROKER_URL').toBe(brokerIngress(theBroker()));
    expect(tick['REDIS_USERNAME']).toBe('reconcile-tick');
  });

  it('finds a Redis Cluster or Sentinel by ConfigMap edgeai-redis alone, as it finds one Redis', () => {
    const shapes: Array<[Record<string, string>, Record<string, unknown>]> = [
      [
        { clusterNodes: 'redis-0:6379,redis-1:6379', waitReplicas: '1' },
        {
          url: undefined,
          clusterNodes: [
            { host: 'redis-0', port: 6379 },
            { host: 'redis-1', port: 6379 },
          ],
          waitReplicas: 1,
        },
      ],
      [
        { sentinels: 's-0:26379', sentinelName: 'edgeai' },
        { url: undefined, sentinels: [{ host: 's-0', port: 26379 }], sentinelName: 'edgeai' },
      ],
    ];
    const located = ['reconcile-tick', 'downstream-sync', 'upstream-status', 'aset-scheduler'];
    for (const fn of located as FunctionName[]) {
      for (const [data, given] of shapes) {
        // reconcile-tick only reads: it takes no waitReplicas (its Redis user has no WAIT).
        const expected =
          fn === 'reconcile-tick' && 'waitReplicas' in given
            ? { ...given, waitReplicas: 0 }
            : given;
        // The ConfigMap as an operator would rewrite it: its keys, read by the functions' refs.
        const env: Record<string, string> = {};
        for (const entry of envOf(knativeService(fn))) {
          const from = entry['valueFrom'];
          const ref = isObj(from) ? from['configMapKeyRef'] : undefined;
          if (!isObj(ref) || ref['name'] !== 'edgeai-redis') continue;
          expect(ref['optional'], `${fn}: ${String(entry['name'])} is optional`).toBe(true);
          const value = data[String(ref['key'])];
          if (value !== undefined) env[String(entry['name'])] = value;
        }
        expect(loadConfig(env).redis, fn).toMatchObject(expected);
      }
    }
  });

  it('gives aset-scheduler its topology, and the report token only from an optional Secret', () => {
    const m = knativeService('aset-scheduler');
    const token = envOf(m).find((e) => e['name'] === 'ASET_REPORT_TOKEN');
    expect(token?.['valueFrom'], 'ASET_REPORT_TOKEN').toEqual({
      secretKeyRef: { name: 'edgeai-aset-report-token', key: 'token', optional: true },
    });
    expect(ofKind('Secret').map(name), 'no token in git').not.toContain('edgeai-aset-report-token');

    // Without the Secret the pod still starts, and the report route answers 403.
    const without = resolvedEnv(m);
    expect(() => loadConfig(without), 'runtime config').not.toThrow();
    const settings = loadAsetSchedulerConfig(without, '/app');
    expect(settings.topology).toBe('full-edge');
    expect(settings.reportToken).toBeUndefined();
    expect(settings.endpointTemplate, 'ASET_ENDPOINT_TEMPLATE is left unset').toBeUndefined();
    expect(settings.windowMs, 'T').toBe(25_000);
    // Where the image puts them (WORKDIR /app; test/packaging/dockerfile.test.ts).
    expect(settings.dataDir.href).toBe('file:///app/data/aset/');
    expect(settings.modelsDir.href).toBe('file:///app/models/');
    // With the Secret, its token is the one the monitoring agents must present.
    const withToken = resolvedEnv(m, 'present');
    expect(loadAsetSchedulerConfig(withToken, '/app').reportToken).toBe(
      '<edgeai-aset-report-token/token>',
    );
  });

  it('deploys an aset-scheduler topology whose trained network matches the shipped scenario', async () => {
    // The repository root stands for /app: the image copies data/aset and models there as is.
    const settings = loadAsetSchedulerConfig(resolvedEnv(knativeService('aset-scheduler')), root);
    const scenario = await loadScenario(settings.dataDir, settings.topology);
    expect(scenario.topology.name).toBe(settings.topology);
    // Refuses a missing network, or one trained on other scenario data, as the function would.
    expect(() => readTrainedNetwork(settings.modelsDir, scenario)).not.toThrow();
  });
});

describe('eventing', () => {
  it('has the Broker "default" in edgeai-system', () => {
    const brokers = ofKind('Broker', 'eventing.knative.dev/v1');
    expect(brokers.map(name)).toEqual(['default']);
    expect(field(brokers[0]!, 'metadata.annotations')).toMatchObject({
      'eventing.knative.dev/broker.class': 'MTChannelBasedBroker',
    });
  });

  it('routes every Trigger from the Broker to an existing Knative Service', () => {
    const services = knativeServices().map(name);
    expect(triggers().length).toBeGreaterThan(0);
    for (const trigger of triggers()) {
      expect(str(trigger, 'spec.broker'), `${where(trigger)}: broker`).toBe('default');
      expect(field(trigger, 'spec.subscriber.ref'), `${where(trigger)}: subscriber`).toMatchObject({
        apiVersion: 'serving.knative.dev/v1',
        kind: 'Service',
      });
      expect(services, `${where(trigger)}: subscriber must be a Knative Service here`).toContain(
        subscriberOf(trigger),
      );
      expect(field(trigger, 'spec.delivery'), `${where(trigger)}: retried delivery`).toMatchObject({
        retry: anyNumber,
        backoffPolicy: 'exponential',
        backoffDelay: isoDuration,
      });
    }
  });

  it('filters every Trigger on one catalogued type, and sends each function only its own', () => {
    const catalogue: readonly string[] = Object.values(eventTypes);
    const received = new Map<string, string[]>();
    for (const trigger of triggers()) {
      const type = filterValue(trigger, 'type');
      expect(type, `${where(trigger)}: must filter on type`).toBeDefined();
      expect(catalogue, `${where(trigger)}: type ${type} is not in shared/events`).toContain(type);
      const fn = subscriberOf(trigger);
      received.set(fn, [...(received.get(fn) ?? []), type ?? '']);
    }
    for (const fn of functionNames) {
      expect((received.get(fn) ?? []).sort(), `${fn} receives`).toEqual(
        [...functionEvents[fn]].sort(),
      );
    }
  });

  it('tells apart the ApiServerSource events meant for each function', () => {
    for (const source of apiServerSources()) {
      const extensions = field(source, 'spec.ceOverrides.extensions');
      expect(isObj(extensions), `${where(source)}: ceOverrides.extensions`).toBe(true);
      for (const key of Object.keys(isObj(extensions) ? extensions : {})) {
        // CloudEvents attribute names: lower-case letters and digits, at most 20 characters.
        expect(key, `${where(source)}: extension name`).toMatch(/^[a-z0-9]{1,20}$/);
      }
    }
    for (const trigger of triggers()) {
      const type = filterValue(trigger, 'type') ?? '';
      if (!apiServerTypes.includes(type)) continue;
      const watch = filterValue(trigger, 'edgeaiwatch');
      expect(watch, `${where(trigger)}: must filter on the edgeaiwatch extension`).toBeDefined();
      const sources = apiServerSources().filter(
        (s) => field(s, 'spec.ceOverrides.extensions.edgeaiwatch') === watch,
      );
      expect(
        sources,
        `${where(trigger)}: one ApiServerSource sets edgeaiwatch=${watch}`,
      ).toHaveLength(1);
      const fn = subscriberOf(trigger) as FunctionName;
      expect(watchesOf(sources[0]!).sort(), `${where(trigger)}: what ${fn} is sent`).toEqual(
        [...(functionWatches[fn] ?? [])].sort(),
      );
    }
  });

  it('sends reconcile-tick every change of an MLGraph and of the Services a graph owns', () => {
    const [source, ...others] = apiServerSources().filter(
      (s) => field(s, 'spec.ceOverrides.extensions.edgeaiwatch') === 'reconcile',
    );
    expect(others).toEqual([]);
    const resources = objects(source!, 'spec.resources');
    expect(resources).toContainEqual({ apiVersion: 'edgeai.io/v1alpha1', kind: 'MLGraph' });
    // The Services desiredGraph makes carry the labels the source selects Services by.
    const graph = {
      metadata: { name: 'g', namespace: 'ns', uid: 'u', generation: 1 },
      spec: {
        root: 'r',
        nodes: [
          { name: 'r', kind: 'router', children: [{ node: 'm' }] },
          { name: 'm', kind: 'model', model: { name: 'm', url: 'http://m.example' } },
        ],
      },
    };
    const desired = desiredGraph(graph, {
      image,
      upstreamStatusUrl: undefined,
      workerSecret: undefined,
    });
    if (!desired.valid) throw new Error(desired.message);
    const ksvcSelector = resources.find((r) => r['kind'] === 'Service')?.['selector'];
    const matchLabels = isObj(ksvcSelector) ? ksvcSelector['matchLabels'] : undefined;
    for (const service of desired.services)
      expect(service.metadata.labels, service.metadata.name).toMatchObject(matchLabels as Obj);
    for (const type of apiServerTypes) {
      const reached = triggers().filter((t) =>
        triggerMatches(t, { type, edgeaiwatch: 'reconcile' }),
      );
      expect(reached.map(subscriberOf), `${type} reaches`).toEqual(['reconcile-tick']);
    }
    expect(strings(kustomize['resources'], 'resources')).toContain('crds/mlgraphs.yaml');
  });

  it('ticks each function that handles ticks every minute from its own PingSource, and no other', () => {
    const pings = pingSources();
    const ticked = functionNames.filter((fn) => functionEvents[fn].includes(eventTypes.pingTick));
    expect(ticked).toEqual(['reconcile-tick', 'downstream-sync', 'aset-scheduler']);
    // One PingSource per ticked function, named after it.
    expect(pings.map(name).sort()).toEqual([...ticked].sort());
    for (const ping of pings) {
      expect(str(ping, 'spec.schedule'), `${where(ping)}: every minute`).toBe('* * * * *');
      sinkIsTheBroker(ping);
      // The Broker hands this PingSource's ticks to exactly one Trigger, its function's.
      const tick = { type: eventTypes.pingTick, source: pingSourceSource(ping) };
      const reached = triggers().filter((t) => triggerMatches(t, tick));
      expect(reached.map(subscriberOf), `${where(ping)}: its ticks reach`).toEqual([name(ping)]);
    }
    const pingTriggers = triggers().filter((t) => filterValue(t, 'type') === eventTypes.pingTick);
    expect(pingTriggers.map(subscriberOf).sort()).toEqual([...ticked].sort());
    for (const trigger of pingTriggers) {
      // Without a source filter a Trigger would take every PingSource's ticks.
      expect(filterValue(trigger, 'source'), `${where(trigger)}: filters on source`).toBe(
        `/apis/v1/namespaces/${systemNamespace}/pingsources/${subscriberOf(trigger)}`,
      );
    }
  });

  it("sends aset-scheduler the ticks of the aset-scheduler PingSource, not reconcile-tick's", () => {
    const byName = (n: string) => pingSources().find((p) => name(p) === n);
    const aset = byName('aset-scheduler');
    const reconcile = byName('reconcile-tick');
    expect(aset, 'PingSource aset-scheduler').toBeDefined();
    expect(reconcile, 'PingSource reconcile-tick').toBeDefined();
    const [trigger, ...more] = triggers().filter(
      (t) => subscriberOf(t) === 'aset-scheduler' && filterValue(t, 'type') === eventTypes.pingTick,
    );
    expect(more, 'one tick Trigger for aset-scheduler').toEqual([]);
    expect(trigger, 'a tick Trigger for aset-scheduler').toBeDefined();
    expect(filterValue(trigger!, 'source')).toBe(
      '/apis/v1/namespaces/edgeai-system/pingsources/aset-scheduler',
    );
    expect(filterValue(trigger!, 'source')).toBe(pingSourceSource(aset!));
    const tickOf = (ping: Manifest) => ({
      type: eventTypes.pingTick,
      source: pingSourceSource(ping),
    });
    expect(triggerMatches(trigger!, tickOf(aset!))).toBe(true);
    expect(triggerMatches(trigger!, tickOf(reconcile!)), "not reconcile-tick's ticks").toBe(false);
  });

  it("routes aset-scheduler's stream and report events to it, and its replies elsewhere", () => {
    const types = [
      eventTypes.streamRequested,
      eventTypes.streamEnded,
      eventTypes.workerResponsesReported,
    ];
    for (const type of types) {
      const reached = triggers().filter((t) => triggerMatches(t, { type, source: '/client' }));
      expect(reached.map(subscriberOf), `${type} reaches`).toEqual(['aset-scheduler']);
    }
    expect([...(functionReplies['aset-scheduler'] ?? [])].sort()).toEqual(
      [eventTypes.streamBound, eventTypes.streamRejected].sort(),
    );
    // A reply that reached a Trigger of its own sender would loop through the Broker; the bound
    // and rejected answers are for the clients (no Trigger here takes them).
    for (const [fn, replies] of Object.entries(functionReplies)) {
      for (const type of replies ?? []) {
        const reached = triggers().filter((t) => triggerMatches(t, { type, source: `/${fn}` }));
        expect(reached.map(subscriberOf), `${fn}'s reply ${type} reaches`).not.toContain(fn);
      }
    }
  });

  it("routes every federated job's round.completed to reconcile-tick, at the address aggregators are given", () => {
    // Its source names the job (/fl/<namespace>/<job>/aggregator): one Trigger takes every job's.
    for (const source of ['/fl/default/digits/aggregator', '/fl/team-a/mnist/aggregator']) {
      const event = { type: eventTypes.flRoundCompleted, source };
      const reached = triggers().filter((t) => triggerMatches(t, event));
      expect(reached.map(subscriberOf), `${source}'s round.completed reaches`).toEqual([
        'reconcile-tick',
      ]);
    }
    // reconcile-tick hands BROKER_URL to the aggregators (FL_EVENTS_URL): this Broker's ingress,
    // as a plain value (the local stack rewrites it to its own Broker).
    const entry = envOf(knativeService('reconcile-tick')).find((e) => e['name'] === 'BROKER_URL');
    expect(entry).toEqual({ name: 'BROKER_URL', value: brokerIngress(theBroker()) });
  });

  it('runs each ApiServerSource in Resource mode, cluster-wide, as a ServiceAccount that can watch exactly what it watches', () => {
    const sources = apiServerSources();
    expect(sources.length).toBe(Object.keys(functionWatches).length);
    const accounts = sources.map((s) => str(s, 'spec.serviceAccountName'));
    expect(new Set(accounts).size, 'one ServiceAccount per ApiServerSource').toBe(accounts.length);
    for (const source of sources) {
      expect(str(source, 'spec.mode'), `${where(source)}: mode`).toBe('Resource');
      // Services live in any namespace; an empty selector watches them all.
      expect(field(source, 'spec.namespaceSelector'), `${where(source)}: all namespaces`).toEqual(
        {},
      );
      sinkIsTheBroker(source);
      const sa = str(source, 'spec.serviceAccountName');
      expect(
        ofKind('ServiceAccount').map(name),
        `${where(source)}: ServiceAccount ${sa}`,
      ).toContain(sa);
      const needed = objects(source, 'spec.resources').flatMap((r) => {
        const apiVersion = String(r['apiVersion']);
        const group = apiVersion.includes('/') ? apiVersion.split('/')[0]! : 'core';
        return grants('cluster', `${group}/${plural(String(r['kind']))}`, ['get', 'list', 'watch']);
      });
      expect(grantsOf(sa), `${where(source)}: ${sa} may get/list/watch exactly that`).toEqual(
        [...new Set(needed)].sort(),
      );
    }
  });
});

describe('Redis', () => {
  it('is one non-root replica with bounded resources behind a ClusterIP Service', () => {
    const [statefulSet, ...more] = ofKind('StatefulSet');
    expect(more, 'one StatefulSet').toEqual([]);
    expect(ofKind('Deployment'), 'no Deployment').toEqual([]);
    expect(statefulSet).toBeDefined();
    const d = statefulSet!;
    expect(field(d, 'spec.replicas')).toBe(1);
    expect(field(d, 'spec.template.spec.securityContext'), 'pod securityContext').toMatchObject({
      runAsNonRoot: true,
      runAsUser: anyNumber,
    });
    const [redis] = objects(d, 'spec.template.spec.containers');
    expect(redis, 'container').toMatchObject({
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
      resources: {
        requests: { cpu: anyString, memory: anyString },
        limits: { cpu: anyString, memory: anyString },
      },
    });
    const url = new URL(configMapValue('edgeai-redis', 'url') ?? '');
    expect(url.href).toBe('redis://edgeai-redis.edgeai-system.svc.cluster.local:6379');
    expect(url.password, 'no credential in the committed URL').toBe('');
    const service = ofKind('Service', 'v1').find((s) => name(s) === url.hostname.split('.')[0]);
    expect(service, `a Service named after ${url.hostname}`).toBeDefined();
    expect(field(service!, 'spec.type')).toBe('ClusterIP');
    const podLabels = field(d, 'spec.template.metadata.labels');
    expect(podLabels, 'the Service selects the Redis pod').toMatchObject(
      field(service!, 'spec.selector') as Obj,
    );
    expect(objects(service!, 'spec.ports').map((p) => p['port'])).toEqual([Number(url.port)]);
  });

  it('keeps its data on a volume claim, in an append-only file fsynced every second', () => {
    const [set] = ofKind('StatefulSet');
    const [claim, ...others] = objects(set!, 'spec.volumeClaimTemplates');
    expect(others).toEqual([]);
    expect(claim).toMatchObject({
      metadata: { name: 'data' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: anyString } } },
    });
    expect(field(set!, 'spec.template.spec.volumes'), 'no emptyDir').toBeUndefined();
    const redis = redisContainer();
    expect(redis['volumeMounts']).toEqual([{ name: 'data', mountPath: '/data' }]);
    const args = strings(redis['args'], 'redis args');
    const value = (flag: string) => args[args.indexOf(flag) + 1];
    expect(value('--dir')).toBe('/data');
    expect(value('--appendonly')).toBe('yes');
    expect(value('--appendfsync')).toBe('everysec');
    expect(field(set!, 'spec.persistentVolumeClaimRetentionPolicy')).toEqual({
      whenDeleted: 'Retain',
      whenScaled: 'Retain',
    });
  });

  const redisContainer = (): Obj => {
    const [d] = ofKind('StatefulSet');
    return objects(d!, 'spec.template.spec.containers')[0]!;
  };

  it('requires the password the functions are given, from a Secret no manifest holds', () => {
    const redis = redisContainer();
    const list = redis['env'];
    if (!Array.isArray(list) || !list.every(isObj)) throw new Error('redis: env is not a list');
    const env = resolveEnv(list, 'redis');
    const args = strings(redis['args'], 'redis args');
    const at = args.indexOf('--requirepass');
    expect(at, '--requirepass').toBeGreaterThan(-1);
    // The kubelet expands $(VAR) in args from the container's own env.
    expect(args[at + 1]).toBe('$(REDIS_PASSWORD)');
    expect(env['REDIS_PASSWORD']).toBe('<edgeai-redis-auth/password>');
    expect(env['REDISCLI_AUTH'], 'the redis-cli probe authenticates').toBe(env['REDIS_PASSWORD']);
    // Each ACL user's password, from its own key of the Secret.
    const users = aclUsers(args);
    expect([...users.keys()]).toEqual([
      'edge-worker',
      'mlgraph',
      'fl-aggregator',
      'reconcile-tick',
    ]);
    const passwordOf = (user: string) => env[users.get(user)?.passwordVariable ?? ''];
    expect(passwordOf('edge-worker')).toBe('<edgeai-redis-auth/worker-password>');
    expect(passwordOf('mlgraph')).toBe('<edgeai-redis-auth/mlgraph-password>');
    expect(passwordOf('fl-aggregator')).toBe('<edgeai-redis-auth/fl-aggregator-password>');
    expect(passwordOf('reconcile-tick')).toBe('<edgeai-redis-auth/reconcile-tick-password>');
    // An empty password switches authentication off (or lets anyone be that user): such a pod
    // must never become ready.
    const probeSpec = redis['readinessProbe'];
    const exec = isObj(probeSpec) ? probeSpec['exec'] : undefined;
    const probe = strings(isObj(exec) ? exec['command'] : undefined, 'redis readiness probe');
    const variables = ['REDISCLI_AUTH', ...[...users.values()].map((u) => u.passwordVariable)];
    expect(probe).toEqual([
      'sh',
      '-c',
      `${variables.map((v) => `test -n "$${v}"`).join(' && ')} && redis-cli ping | grep -qx PONG`,
    ]);
    expect(ofKind('Secret').map(name)).not.toContain('edgeai-redis-auth');
    // A function logs in as the default user with its password, or as an ACL user defined here
    // with that user's.
    const logins: Record<string, string> = {};
    for (const fn of functionNames) {
      const fnEnv = resolvedEnv(knativeService(fn));
      if (fnEnv['REDIS_URL'] === undefined) continue;
      const user = fnEnv['REDIS_USERNAME'];
      logins[fn] = user ?? 'default';
      const expected = user === undefined ? env['REDIS_PASSWORD'] : passwordOf(user);
      expect(expected, `${fn}: ACL user ${String(user)} is defined`).toBeDefined();
      expect(fnEnv['REDIS_PASSWORD'], `${fn}: REDIS_PASSWORD`).toBe(expected);
    }
    expect(logins).toEqual({
      'reconcile-tick': 'reconcile-tick',
      'downstream-sync': 'default',
      'upstream-status': 'default',
      'aset-scheduler': 'default',
    });
    // The guide's command creates the Secret with every key the manifests read.
    const guide = readFileSync(join(root, 'docs', 'deploying.md'), 'utf8');
    const lines = guide.split('\n');
    const from = lines.findIndex((l) => l.includes('create secret generic edgeai-redis-auth'));
    expect(from, 'docs/deploying.md says how to create the Secret').toBeGreaterThan(-1);
    let to = from;
    while (lines[to]?.endsWith('\\')) to += 1;
    const command = lines.slice(from, to + 1).join('\n');
    const keys = [...command.matchAll(/--from-literal=([-\w]+)=/g)].map((m) => m[1]);
    expect(keys.sort()).toEqual([...(operatorSecrets['edgeai-redis-auth'] ?? [])].sort());
  });

  it('admits connections only from the functions, the edge workers and graph Services, which use it', () => {
    const [policy, ...more] = ofKind('NetworkPolicy', 'networking.k8s.io/v1');
    expect(more, 'one NetworkPolicy').toEqual([]);
    const [d] = ofKind('StatefulSet');
    expect(field(d!, 'spec.template.metadata.labels')).toMatchObject(
      field(policy!, 'spec.podSelector.matchLabels') as Obj,
    );
    expect(field(policy!, 'spec.policyTypes')).toEqual(['Ingress']);
    const [rule, ...otherRules] = objects(policy!, 'spec.ingress');
    expect(otherRules).toEqual([]);
    const users = functionNames.filter((fn) => resolvedEnv(knativeService(fn))['REDIS_URL']);
    expect(users).toEqual([
      'reconcile-tick',
      'downstream-sync',
      'upstream-status',
      'aset-scheduler',
    ]);
    expect(rule!['from']).toEqual([
      {
        podSelector: {
          matchExpressions: [{ key: 'serving.knative.dev/service', operator: 'In', values: users }],
        },
      },
      // Edge workers (task stream, offload budget) run in their services' namespaces, with the
      // pod labels reconcile-tick gives them; cloud workers do not use Redis. Only namespaces the
      // operator labelled: anyone who can create a pod can copy the pod labels.
      {
        namespaceSelector: { matchLabels: { 'edgeai.io/redis-clients': 'enabled' } },
        podSelector: { matchLabels: { [labels.managedBy]: managerName, [labels.role]: 'edge' } },
      },
      // The Services of an MLGraph (executor, router and join nodes), which reconcile-tick labels.
      {
        namespaceSelector: { matchLabels: { 'edgeai.io/redis-clients': 'enabled' } },
        podSelector: {
          matchLabels: { [labels.managedBy]: managerName },
          matchExpressions: [{ key: graphLabels.graph, operator: 'Exists' }],
        },
      },
      // A FederatedLearningJob's aggregator (its rounds), not its trainers (edge nodes).
      {
        namespaceSelector: { matchLabels: { 'edgeai.io/redis-clients': 'enabled' } },
        podSelector: {
          matchLabels: {
            [labels.managedBy]: managerName,
            [federatedLabels.role]: aggregatorWorker,
          },
        },
      },
    ]);
    expect(rule!['ports']).toEqual([{ port: 'redis', protocol: 'TCP' }]);
  });

  it("admits a federated job's aggregator, with its Secret and the Broker, and none of its trainers", () => {
    const [policy] = ofKind('NetworkPolicy', 'networking.k8s.io/v1');
    const [rule] = objects(policy!, 'spec.ingress');
    const podSelectors = objects({ file: 'redis/network-policy.yaml', doc: rule! }, 'from')
      .filter((peer) => isObj(peer['namespaceSelector']))
      .map((peer) => peer['podSelector']);
    const admitted = (pod: Obj) => podSelectors.some((selector) => selects(selector, pod));
    // The sample job as reconcile-tick deploys it, with the manifest's settings.
    const sample = load('samples/federated-digits.yaml').map((m) => m.doc as unknown as KubeObject);
    const byName = (kind: string) =>
      new Map(sample.filter((o) => o.kind === kind).map((o) => [o.metadata.name, o]));
    const [job] = byName('FederatedLearningJob').values();
    const settings = loadControllerConfig(resolvedEnv(knativeService('reconcile-tick'))).federated;
    const desired = desiredFederated(
      { ...job!, metadata: { ...job!.metadata, uid: 'u1', generation: 1 } },
      { datasets: byName('Dataset'), models: byName('Model') },
      settings,
      false,
    );
    if (!desired.valid) throw new Error(desired.message);
    const podOf = (service: KubeObject) => ({
      labels: field({ file: 'desired', doc: service }, 'spec.template.metadata.labels'),
      container: container({ file: 'desired', doc: service }),
    });
    const aggregator = podOf(desired.aggregator);
    expect(admitted(aggregator.labels as Obj), 'the aggregator reaches Redis').toBe(true);
    expect(aggregator.container['envFrom'], 'its environment: FL_SECRET').toEqual([
      { secretRef: { name: 'edgeai-fl', optional: true } },
    ]);
    expect(aggregator.container['env']).toContainEqual({
      name: 'FL_EVENTS_URL',
      value: brokerIngress(theBroker()),
    });
    expect(desired.trainers.length).toBeGreaterThan(0);
    for (const trainer of desired.trainers) {
      const pod = podOf(trainer.service);
      expect(admitted(pod.labels as Obj), `trainer ${trainer.name} is refused`).toBe(false);
      expect(pod.container['envFrom'], `trainer ${trainer.name}: no Secret`).toBeUndefined();
    }
  });
});

describe('knative/kustomization.yaml', () => {
  const k = kustomize;
  const listed = [...strings(k['resources'], 'resources'), ...configurationFiles];

  it('lists every manifest under knative/ except samples/ and serving/', () => {
    const expected = allFiles.filter(
      (f) => f !== kustomizationFile && !f.startsWith('samples/') && !f.startsWith('serving/'),
    );
    for (const file of expected) {
      expect(listed, `${file} is not in knative/kustomization.yaml`).toContain(file);
    }
    for (const file of listed) {
      expect(existsSync(join(knativeDir, file)), `${file} is listed but missing`).toBe(true);
      expect(file, `${file}: samples/ and serving/ are applied by hand`).not.toMatch(
        /^(samples|serving)\//,
      );
    }
    expect(listed).toContain('crds/jointinferenceservices.yaml');
    expect(listed).toContain('crds/models.yaml');
    expect(listed).toContain('crds/federatedlearningjobs.yaml');
    expect(listed).toContain('crds/datasets.yaml');
  });

  it('sets the image through images:, WORKER_IMAGE included', () => {
    expect(k['images'], 'images: entry for edgeai').toEqual([
      { name: image, newName: anyString, newTag: anyString },
    ]);
    const paths = configurationFiles.flatMap((file) => {
      const config = parse(readFileSync(join(knativeDir, file), 'utf8')) as unknown;
      const specs = isObj(config) && Array.isArray(config['images']) ? config['images'] : [];
      return specs.filter(isObj).map((s) => `${String(s['group'])} ${String(s['path'])}`);
    });
    expect(paths, 'the images transformer must also reach env values').toContain(
      'serving.knative.dev spec/template/spec/containers/env/value',
    );
  });

  const kubectl = spawnSync('kubectl', ['version', '--client'], { encoding: 'utf8' });
  // kubectl's embedded kustomize builds offline; where kubectl is missing, the static checks
  // above still hold.
  it.skipIf(kubectl.status !== 0)('builds with kubectl kustomize, rewriting every image', () => {
    const built = spawnSync('kubectl', ['kustomize', knativeDir], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    const entry = (k['images'] as Obj[])[0]!;
    const wanted = `${String(entry['newName'])}:${String(entry['newTag'])}`;
    const docs = parseAllDocuments(built.stdout).map((d) => d.toJS() as unknown);
    const ksvcs = docs
      .filter(isObj)
      .filter((d) => d['apiVersion'] === 'serving.knative.dev/v1' && d['kind'] === 'Service')
      .map((doc) => ({ file: 'kustomize build', doc }));
    expect(ksvcs).toHaveLength(functionNames.length);
    for (const m of ksvcs) {
      expect(container(m)['image'], `${where(m)}: image`).toBe(wanted);
      const env = envOf(m);
      const workerImage = env.find((e) => e['name'] === 'WORKER_IMAGE');
      if (workerImage !== undefined) expect(workerImage['value'], 'WORKER_IMAGE').toBe(wanted);
      const target = env.find((e) => e['name'] === 'FUNCTION_TARGET');
      expect(target?.['value'], 'other env values are left alone').toBe(name(m));
    }
  });
});

describe('knative/serving/config-features-patch.yaml', () => {
  it('enables nodeSelector on Knative Services, which worker pinning needs', () => {
    const [patch] = load('serving/config-features-patch.yaml');
    expect(patch?.doc).toMatchObject({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'config-features', namespace: 'knative-serving' },
      data: { 'kubernetes.podspec-nodeselector': 'enabled' },
    });
  });
});
