/**
 * What a JointInferenceService asks for: its two worker Knative Services, built from the spec,
 * the referenced Models and the cluster's Nodes. Pure: the same inputs give the same objects, so
 * comparing them with what is stored tells whether anything must be written.
 */
import { jointInferenceServiceSpec, modelSpec } from '../crds/index.js';
import type { JointInferenceServiceSpec, ModelSpec } from '../crds/index.js';
import type { KubeObject } from '../k8s/index.js';
// The workers' environment is a contract with their config (shared/inference/config.ts).
import { inferenceNodeOptions } from '../messages/worker-env.js';
import { nodeTokenSecret } from '../messages/worker-message.js';
import type { WorkerEnv, WorkerEnvName } from '../messages/worker-env.js';
import { knativeService, serviceAnnotations as annotations } from './knative-service.js';
import type { EnvVar, WorkerSettings } from './knative-service.js';
import type { RestartPolicy } from './restart.js';
import { labels, roles, workerName } from './types.js';
import type { Role, ServiceObject } from './types.js';

/** Why a spec cannot be deployed; the reason becomes a condition reason. */
type Problem = {
  reason: 'InvalidSpec' | 'ModelNotFound' | 'InvalidModel' | 'NodeNotFound';
  message: string;
};

type Desired =
  | ({ valid: false } & Problem)
  | {
      valid: true;
      spec: JointInferenceServiceSpec;
      workers: Record<Role, KubeObject>;
      policies: Record<Role, RestartPolicy>;
    };

/** Knative names a revision `<service>-00001`, and that must stay a 63-character DNS label. */
const maxServiceNameLength = 63 - '-cloud'.length - '-00001'.length;

/**
 * Knative Service names are DNS-1035 labels (a Kubernetes name may also start with a digit or
 * hold dots): the API server would refuse the create on every pass.
 */
const dns1035Label = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** `kubernetes.io/hostname` is a label, so its value (the nodeName) is at most 63 characters. */
const maxLabelValueLength = 63;

function selectorText(selector: Readonly<Record<string, string>>): string {
  return Object.entries(selector)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

function matches(node: KubeObject, selector: Readonly<Record<string, string>>): boolean {
  const nodeLabels = node.metadata.labels ?? {};
  return Object.entries(selector).every(([k, v]) => nodeLabels[k] === v);
}

/**
 * The nodes a worker may run on: its nodeName, or every node its nodeSelector matches, or
 * undefined when it is not pinned at all.
 */
function placementNodes(
  worker: { nodeName?: string | undefined; nodeSelector?: Record<string, string> | undefined },
  nodes: readonly KubeObject[],
): string[] | undefined {
  if (worker.nodeName !== undefined) return [worker.nodeName];
  if (worker.nodeSelector !== undefined && Object.keys(worker.nodeSelector).length > 0) {
    const selector = worker.nodeSelector;
    return nodes.filter((node) => matches(node, selector)).map((node) => node.metadata.name);
  }
  return undefined;
}

function checkPlacement(
  role: Role,
  worker: { nodeName?: string | undefined; nodeSelector?: Record<string, string> | undefined },
  nodes: ReadonlyMap<string, KubeObject>,
): Problem | undefined {
  const field = `spec.${role}Worker`;
  if (worker.nodeName !== undefined) {
    return nodes.has(worker.nodeName)
      ? undefined
      : {
          reason: 'NodeNotFound',
          message: `Node "${worker.nodeName}" (${field}.nodeName) does not exist`,
        };
  }
  const placed = placementNodes(worker, [...nodes.values()]);
  if (placed !== undefined && placed.length === 0) {
    return {
      reason: 'NodeNotFound',
      message: `no Node matches ${field}.nodeSelector ${selectorText(worker.nodeSelector ?? {})}`,
    };
  }
  return undefined;
}

function env(values: WorkerEnv): EnvVar<WorkerEnvName>[] {
  return (Object.entries(values) as Array<[WorkerEnvName, string | number | undefined]>)
    .filter((entry): entry is [WorkerEnvName, string | number] => entry[1] !== undefined)
    .map(([name, value]) => ({ name, value: String(value) }));
}

function workerParameters(
  parameters: ReadonlyArray<{ key: string; value: string }> | undefined,
): string | undefined {
  if (parameters === undefined || parameters.length === 0) return undefined;
  return JSON.stringify(Object.fromEntries(parameters.map((p) => [p.key, p.value])));
}

/** The edge worker's own variables: its miner, offload, cloud and status-report settings. */
function edgeVariables(
  spec: JointInferenceServiceSpec,
  service: { name: string; namespace: string },
  common: WorkerEnv,
  settings: WorkerSettings,
): EnvVar<WorkerEnvName>[] {
  const edge = spec.edgeWorker;
  const hem = edge.hardExampleAlgorithm;
  const variables: EnvVar<WorkerEnvName>[] = [
    ...env({
      ...common,
      HEM_NAME: hem.name,
      HEM_PARAMETERS:
        hem.parameters === undefined || Object.keys(hem.parameters).length === 0
          ? undefined
          : JSON.stringify(hem.parameters),
      MINING_MODE: edge.miningMode ?? 'inference-then-mining',
      OFFLOAD_MODE: edge.offload?.mode ?? 'sync',
      OFFLOAD_DEADLINE_MS: edge.offload?.deadlineMs ?? 2000,
      CLOUD_FALLBACK: edge.offload?.fallback ?? 'edge-result',
      // Unset unless the spec sets them, so a spec without them deploys as before: the edge
      // worker owns the defaults (a shadow rate of 0.05 when an objective is set).
      ACCURACY_OBJECTIVE: edge.offload?.accuracyObjective,
      SHADOW_RATE: edge.offload?.shadowRate,
      CLOUD_URL: `http://${workerName(service.name, 'cloud')}.${service.namespace}.svc.cluster.local`,
      // The cloud worker serves its model under the Model's name (its MODEL_NAME).
      CLOUD_MODEL_NAME: spec.cloudWorker.model.name,
      UPSTREAM_STATUS_URL: settings.upstreamStatusUrl,
    }),
    // The node the pod landed on names the reporter (and the token it signs reports with).
    { name: 'EDGEAI_NODE', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } },
  ];
  if (edge.nodeName !== undefined) {
    variables.push({
      name: 'EDGEAI_NODE_TOKEN',
      valueFrom: {
        secretKeyRef: {
          name: nodeTokenSecret.name(edge.nodeName),
          key: nodeTokenSecret.key,
          optional: true,
        },
      },
    });
  }
  return variables;
}

type WorkerSpec =
  JointInferenceServiceSpec['edgeWorker'] | JointInferenceServiceSpec['cloudWorker'];

/** The pod template's placement and scale: node selector (the pinned node) and annotations. */
function templateSettings(worker: WorkerSpec) {
  const nodeSelector = {
    ...(worker.nodeSelector ?? {}),
    ...(worker.nodeName === undefined ? {} : { 'kubernetes.io/hostname': worker.nodeName }),
  };
  const annotationsOf: Record<string, string> = {};
  if (worker.scale?.minScale !== undefined)
    annotationsOf[annotations.minScale] = String(worker.scale.minScale);
  if (worker.scale?.maxScale !== undefined)
    annotationsOf[annotations.maxScale] = String(worker.scale.maxScale);
  return { nodeSelector, annotations: annotationsOf };
}

function workerService(
  service: ServiceObject,
  spec: JointInferenceServiceSpec,
  role: Role,
  model: ModelSpec,
  settings: WorkerSettings,
): KubeObject {
  const { name, namespace = '' } = service.metadata;
  const worker = role === 'edge' ? spec.edgeWorker : spec.cloudWorker;
  const common: WorkerEnv = {
    FUNCTION_TARGET: role === 'edge' ? 'edge-infer' : 'cloud-infer',
    EDGEAI_SERVICE: `${namespace}/${name}`,
    EDGEAI_WORKER: role,
    MODEL_NAME: worker.model.name,
    MODEL_URL: model.url,
    MODEL_FORMAT: model.format,
    MODEL_SHA256: model.sha256,
    WORKER_PARAMETERS: workerParameters(worker.workerSpec?.parameters),
    // The task object as the CRD holds it; the worker reads it with the same schema.
    TASK: worker.task === undefined ? undefined : JSON.stringify(worker.task),
    NODE_OPTIONS: inferenceNodeOptions,
  };
  const template = templateSettings(worker);
  return knativeService({
    kind: 'jointInferenceService',
    owner: service,
    name: workerName(name, role),
    labels: { [labels.service]: name, [labels.role]: role },
    // The cloud worker is reached only from inside the cluster (by the edge workers).
    clusterLocal: role === 'cloud',
    env: role === 'edge' ? edgeVariables(spec, { name, namespace }, common, settings) : env(common),
    nodeSelector: template.nodeSelector,
    templateAnnotations: template.annotations,
    settings,
  });
}

/** The spec, or why it cannot be deployed: names that would not make valid worker names. */
function parseSpec(service: ServiceObject): JointInferenceServiceSpec | Problem {
  const name = service.metadata.name;
  if (name.length > maxServiceNameLength) {
    return {
      reason: 'InvalidSpec',
      message: `metadata.name: at most ${maxServiceNameLength} characters, so that worker revision names stay valid DNS labels`,
    };
  }
  if (!roles.every((role) => dns1035Label.test(workerName(name, role)))) {
    return {
      reason: 'InvalidSpec',
      message: `metadata.name: "${name}" must start with a lowercase letter and hold only lowercase letters, digits and '-', so that the worker Service names (${workerName(name, 'edge')}, ${workerName(name, 'cloud')}) are valid DNS-1035 labels`,
    };
  }
  const parsed = jointInferenceServiceSpec.safeParse(service.spec);
  if (!parsed.success) {
    const problems = parsed.error.issues.map(
      (issue) => `spec.${issue.path.map(String).join('.')}: ${issue.message}`,
    );
    return { reason: 'InvalidSpec', message: problems.join('; ') };
  }
  for (const role of roles) {
    const nodeName = (role === 'edge' ? parsed.data.edgeWorker : parsed.data.cloudWorker).nodeName;
    if (nodeName !== undefined && nodeName.length > maxLabelValueLength) {
      return {
        reason: 'InvalidSpec',
        message: `spec.${role}Worker.nodeName: at most ${maxLabelValueLength} characters, as it becomes the kubernetes.io/hostname label value the worker is pinned by`,
      };
    }
  }
  return parsed.data;
}

/** Both workers' Models, or every one missing or invalid, named. */
function resolveModels(
  spec: JointInferenceServiceSpec,
  models: ReadonlyMap<string, KubeObject>,
  namespace: string,
): Record<Role, ModelSpec> | Problem {
  const missing: string[] = [];
  const invalid: string[] = [];
  const modelSpecs = {} as Record<Role, ModelSpec>;
  for (const role of roles) {
    const ref = (role === 'edge' ? spec.edgeWorker : spec.cloudWorker).model.name;
    const model = models.get(ref);
    if (model === undefined) {
      missing.push(`"${ref}" (spec.${role}Worker.model.name)`);
      continue;
    }
    const modelParsed = modelSpec.safeParse(model['spec']);
    if (!modelParsed.success) {
      invalid.push(
        `"${ref}": ${modelParsed.error.issues.map((i) => `spec.${i.path.map(String).join('.')}: ${i.message}`).join('; ')}`,
      );
      continue;
    }
    modelSpecs[role] = modelParsed.data;
  }
  if (missing.length > 0) {
    const noun = missing.length === 1 ? 'Model' : 'Models';
    return {
      reason: 'ModelNotFound',
      message: `${noun} ${missing.join(' and ')} not found in namespace ${namespace}`,
    };
  }
  if (invalid.length > 0) {
    return { reason: 'InvalidModel', message: `Model ${invalid.join('; Model ')}` };
  }
  return modelSpecs;
}

/** A Problem, not a result: neither a spec nor a role-to-Model map has these keys. */
const isProblem = (value: object): value is Problem => 'reason' in value && 'message' in value;

/**
 * The desired workers of `service`, or the first reason they cannot be built: an invalid spec,
 * a missing or invalid Model (both are named), a missing Node.
 */
function desiredState(
  service: ServiceObject,
  models: ReadonlyMap<string, KubeObject>,
  nodes: ReadonlyMap<string, KubeObject>,
  settings: WorkerSettings,
): Desired {
  const spec = parseSpec(service);
  if (isProblem(spec)) return { valid: false, ...spec };
  const modelSpecs = resolveModels(spec, models, service.metadata.namespace ?? '');
  if (isProblem(modelSpecs)) return { valid: false, ...modelSpecs };
  for (const role of roles) {
    const problem = checkPlacement(
      role,
      role === 'edge' ? spec.edgeWorker : spec.cloudWorker,
      nodes,
    );
    if (problem !== undefined) return { valid: false, ...problem };
  }
  return {
    valid: true,
    spec,
    workers: {
      edge: workerService(service, spec, 'edge', modelSpecs.edge, settings),
      cloud: workerService(service, spec, 'cloud', modelSpecs.cloud, settings),
    },
    policies: {
      edge: spec.edgeWorker.restartPolicy ?? 'Always',
      cloud: spec.cloudWorker.restartPolicy ?? 'Always',
    },
  };
}

export { desiredState, placementNodes, dns1035Label };
export type { Desired };
