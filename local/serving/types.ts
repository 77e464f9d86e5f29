/**
 * The part of a Knative Service (serving.knative.dev/v1) the development supervisor reads: its
 * identity, the revision template's first serving container (env, envFrom, readinessProbe) and
 * the pod spec fields the Downward API exposes. Everything else (image, resources, security
 * context, traffic) is not acted upon locally.
 */
import { z } from 'zod';

const keyRef = z.object({
  name: z.string().min(1),
  key: z.string().min(1),
  optional: z.boolean().optional(),
});

const sourceRef = z.object({ name: z.string().min(1), optional: z.boolean().optional() });

const envVar = z.object({
  name: z.string().min(1),
  value: z.string().optional(),
  valueFrom: z
    .object({
      secretKeyRef: keyRef.optional(),
      configMapKeyRef: keyRef.optional(),
      fieldRef: z.object({ fieldPath: z.string().min(1) }).optional(),
      resourceFieldRef: z.unknown().optional(),
    })
    .optional(),
});

const envFromSource = z.object({
  prefix: z.string().optional(),
  secretRef: sourceRef.optional(),
  configMapRef: sourceRef.optional(),
});

const probe = z.object({
  httpGet: z
    .object({
      path: z.string().optional(),
      httpHeaders: z.array(z.object({ name: z.string(), value: z.string() })).optional(),
    })
    .optional(),
  tcpSocket: z.object({}).optional(),
  timeoutSeconds: z.number().positive().optional(),
});

const container = z.object({
  name: z.string().optional(),
  ports: z.array(z.object({ containerPort: z.number().int().optional() })).optional(),
  env: z.array(envVar).optional(),
  envFrom: z.array(envFromSource).optional(),
  readinessProbe: probe.optional(),
});

const serviceMeta = z.object({
  name: z.string().min(1),
  namespace: z.string().min(1),
  uid: z.string().min(1),
  generation: z.number().int().min(1),
});

const serviceSpec = z.object({
  template: z.object({
    metadata: z.object({ name: z.string().min(1).optional() }).optional(),
    spec: z.object({
      containers: z.array(container).min(1),
      nodeSelector: z.record(z.string(), z.string()).optional(),
      serviceAccountName: z.string().optional(),
    }),
  }),
});

type Container = z.infer<typeof container>;
type EnvVar = z.infer<typeof envVar>;
type ServiceMeta = z.infer<typeof serviceMeta>;
type ServiceSpec = z.infer<typeof serviceSpec>;
type Probe = z.infer<typeof probe>;

/** Names a Service's revision, its process's log lines and its entry in `processes()`. */
interface RevisionRef {
  namespace: string;
  name: string;
  revision: string;
}

const hostnameLabel = 'kubernetes.io/hostname';

/**
 * The revision a generation of the Service creates: the template's own name if it sets one,
 * else `<service>-<generation, five digits>` as Knative names them (`helmet-edge-00001`).
 */
function revisionName(name: string, generation: number, spec?: ServiceSpec): string {
  return spec?.template.metadata?.name ?? `${name}-${String(generation).padStart(5, '0')}`;
}

/**
 * The serving container: Knative allows several containers, of which the one with a port serves;
 * with one container it is that one.
 */
function servingContainer(spec: ServiceSpec): Container {
  const containers = spec.template.spec.containers;
  return containers.find((c) => (c.ports ?? []).length > 0) ?? containers[0]!;
}

function describeIssues(error: z.ZodError, prefix: string): string {
  return error.issues
    .map((issue) => `${[prefix, ...issue.path.map(String)].join('.')}: ${issue.message}`)
    .join('; ');
}

/** The identity of a watched object, or undefined when it is not a stored object. */
function parseMeta(object: unknown): ServiceMeta | undefined {
  const meta = (object as { metadata?: unknown } | null)?.metadata;
  const parsed = serviceMeta.safeParse(meta);
  return parsed.success ? parsed.data : undefined;
}

/** The spec, or why it cannot be run (the message names the field). */
function parseSpec(object: unknown): { spec: ServiceSpec } | { problem: string } {
  const parsed = serviceSpec.safeParse((object as { spec?: unknown } | null)?.spec);
  return parsed.success ? { spec: parsed.data } : { problem: describeIssues(parsed.error, 'spec') };
}

export { hostnameLabel, parseMeta, parseSpec, revisionName, servingContainer };
export type { Container, EnvVar, Probe, RevisionRef, ServiceMeta, ServiceSpec };
