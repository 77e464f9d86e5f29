/**
 * Brokers, Triggers and PingSources read from the YAML of knative/eventing/, validated with zod;
 * documents of other kinds (ApiServerSources, anything else) are skipped. What a real cluster's
 * webhook would refuse is refused here too, with the document and field named; what the dev
 * broker cannot do (CESQL filters, time zones) is refused rather than ignored.
 */
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { ValidationError } from '../../shared/errors/index.js';
import { parseInput } from '../../shared/schema/index.js';
import { parseCron, CronError } from './cron.js';
import type { CronSchedule } from './cron.js';
import { parseIsoDuration } from './duration.js';
import { attributeMap, filterDocument, keyedBy, triggerFilter } from './filters.js';
import type { EventFilter } from './filters.js';

/** A reference to an addressable object; the namespace is the referrer's when not written. */
interface KReference {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
}

/** Where events go: an object's address, a URI, or a URI relative to the object's address. */
interface Destination {
  ref?: KReference;
  uri?: string;
}

/** `spec.delivery` with durations in milliseconds. */
interface DeliverySpec {
  /** Retries after the first attempt (0: none). */
  retry: number;
  backoffPolicy: 'linear' | 'exponential' | undefined;
  backoffDelayMs: number | undefined;
  /** Per-attempt timeout (`delivery.timeout`). */
  timeoutMs: number | undefined;
  deadLetterSink: Destination | undefined;
}

interface BrokerSpec {
  namespace: string;
  name: string;
  /** The default for its Triggers that have no `spec.delivery`. */
  delivery: DeliverySpec | undefined;
}

interface TriggerSpec {
  namespace: string;
  name: string;
  broker: string;
  filter: EventFilter;
  subscriber: Destination;
  delivery: DeliverySpec | undefined;
}

interface PingSourceSpec {
  namespace: string;
  name: string;
  schedule: CronSchedule;
  contentType: string | undefined;
  /** `spec.data` as UTF-8, or `spec.dataBase64` decoded; empty when neither is set. */
  data: Buffer;
  sink: Destination;
  /** `spec.ceOverrides.extensions`. */
  extensions: Readonly<Record<string, string>>;
}

interface EventingManifests {
  brokers: BrokerSpec[];
  triggers: TriggerSpec[];
  pingSources: PingSourceSpec[];
}

const isoDuration = z.string().transform((text, ctx) => {
  const ms = parseIsoDuration(text);
  if (ms instanceof Error) {
    ctx.addIssue({ code: 'custom', message: ms.message });
    return z.NEVER;
  }
  return ms;
});

const reference = z.object({
  apiVersion: z.string().min(1),
  kind: z.string().min(1),
  name: z.string().min(1),
  namespace: z.string().min(1).optional(),
});

const destination = z
  .object({ ref: reference.optional(), uri: z.string().min(1).optional() })
  .refine((d) => d.ref !== undefined || d.uri !== undefined, {
    message: 'a destination needs ref or uri',
  })
  .refine((d) => d.ref !== undefined || d.uri === undefined || URL.canParse(d.uri), {
    message: 'uri must be an absolute URL when there is no ref',
    path: ['uri'],
  });

const delivery = z.object({
  retry: z.number().int().min(0).optional(),
  backoffPolicy: z.enum(['linear', 'exponential']).optional(),
  backoffDelay: isoDuration.optional(),
  timeout: isoDuration.optional(),
  deadLetterSink: destination.optional(),
});

const metadata = z.object({
  name: z.string().min(1),
  namespace: z.string().min(1).optional(),
});

const brokerDocument = z.object({
  metadata,
  spec: z.object({ delivery: delivery.optional() }).default({}),
});

const triggerDocument = z.object({
  metadata,
  spec: z.object({
    broker: z.string().min(1),
    filter: z.object({ attributes: attributeMap.optional() }).optional(),
    filters: z.array(filterDocument).optional(),
    subscriber: destination,
    delivery: delivery.optional(),
  }),
});

const schedule = z.string().transform((text, ctx) => {
  try {
    return parseCron(text);
  } catch (err) {
    if (!(err instanceof CronError)) throw err;
    ctx.addIssue({ code: 'custom', message: err.message });
    return z.NEVER;
  }
});

const pingSourceDocument = z.object({
  metadata,
  spec: z
    .object({
      schedule,
      timezone: z
        .string()
        .refine((tz) => ['UTC', 'Etc/UTC', 'Z'].includes(tz), {
          message: 'the development broker runs schedules in UTC only',
        })
        .optional(),
      contentType: z.string().min(1).optional(),
      data: z.string().optional(),
      dataBase64: z.base64().optional(),
      sink: destination,
      ceOverrides: z
        .object({
          extensions: keyedBy(
            /^[a-z0-9]{1,20}$/,
            'CloudEvent extension names are 1-20 characters of [a-z0-9]',
          ).optional(),
        })
        .optional(),
    })
    .refine((s) => s.data === undefined || s.dataBase64 === undefined, {
      message: 'data and dataBase64 are mutually exclusive',
    }),
});

type DeliveryDocument = z.output<typeof delivery>;
type DestinationDocument = z.output<typeof destination>;

function toDestination(doc: DestinationDocument, namespace: string): Destination {
  const out: Destination = {};
  if (doc.ref !== undefined) out.ref = { ...doc.ref, namespace: doc.ref.namespace ?? namespace };
  if (doc.uri !== undefined) out.uri = doc.uri;
  return out;
}

function toDelivery(
  doc: DeliveryDocument | undefined,
  namespace: string,
): DeliverySpec | undefined {
  if (doc === undefined) return undefined;
  return {
    retry: doc.retry ?? 0,
    backoffPolicy: doc.backoffPolicy,
    backoffDelayMs: doc.backoffDelay,
    timeoutMs: doc.timeout,
    deadLetterSink:
      doc.deadLetterSink === undefined ? undefined : toDestination(doc.deadLetterSink, namespace),
  };
}

/** Which of our kinds a document is, by API group and kind; undefined for any other. */
function kindOf(value: unknown): 'Broker' | 'Trigger' | 'PingSource' | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { apiVersion, kind } = value as { apiVersion?: unknown; kind?: unknown };
  if (typeof apiVersion !== 'string') return undefined;
  const group = apiVersion.split('/')[0];
  if (group === 'eventing.knative.dev' && (kind === 'Broker' || kind === 'Trigger')) return kind;
  if (group === 'sources.knative.dev' && kind === 'PingSource') return kind;
  return undefined;
}

/** How a document is named in errors: `Kind namespace/name`, or its place when it has no name. */
function labelOf(kind: string, value: unknown, where: string, defaultNamespace: string): string {
  const meta = (value as { metadata?: { name?: unknown; namespace?: unknown } }).metadata;
  const named =
    typeof meta?.name === 'string'
      ? `${typeof meta.namespace === 'string' ? meta.namespace : defaultNamespace}/${meta.name}`
      : `(${where})`;
  return `${kind} ${named}`;
}

function toBroker(value: unknown, label: string, defaultNamespace: string): BrokerSpec {
  const b = parseInput(brokerDocument, value, label);
  const namespace = b.metadata.namespace ?? defaultNamespace;
  return {
    namespace,
    name: b.metadata.name,
    delivery: toDelivery(b.spec.delivery, namespace),
  };
}

function toTrigger(value: unknown, label: string, defaultNamespace: string): TriggerSpec {
  const tr = parseInput(triggerDocument, value, label);
  const namespace = tr.metadata.namespace ?? defaultNamespace;
  return {
    namespace,
    name: tr.metadata.name,
    broker: tr.spec.broker,
    filter: triggerFilter(tr.spec.filter, tr.spec.filters),
    subscriber: toDestination(tr.spec.subscriber, namespace),
    delivery: toDelivery(tr.spec.delivery, namespace),
  };
}

function toPingSource(value: unknown, label: string, defaultNamespace: string): PingSourceSpec {
  const p = parseInput(pingSourceDocument, value, label);
  const namespace = p.metadata.namespace ?? defaultNamespace;
  const { spec } = p;
  return {
    namespace,
    name: p.metadata.name,
    schedule: spec.schedule,
    contentType: spec.contentType,
    data:
      spec.dataBase64 !== undefined
        ? Buffer.from(spec.dataBase64, 'base64')
        : Buffer.from(spec.data ?? '', 'utf8'),
    sink: toDestination(spec.sink, namespace),
    extensions: spec.ceOverrides?.extensions ?? {},
  };
}

/**
 * Reads the Brokers, Triggers and PingSources in YAML texts (file contents, several documents
 * each). Objects without a namespace get `defaultNamespace` ("default"). Throws a
 * ValidationError naming the object and field at the first problem.
 */
function loadEventing(
  texts: readonly string[],
  options: { defaultNamespace?: string } = {},
): EventingManifests {
  const defaultNamespace = options.defaultNamespace ?? 'default';
  const out: EventingManifests = { brokers: [], triggers: [], pingSources: [] };
  const seen = new Set<string>();
  texts.forEach((text, t) => {
    parseAllDocuments(text).forEach((doc, d) => {
      const where = `YAML text ${t + 1}, document ${d + 1}`;
      if (doc.errors.length > 0) {
        throw new ValidationError(`${where}: ${doc.errors.map((e) => e.message).join('; ')}`);
      }
      const value: unknown = doc.toJS();
      const kind = kindOf(value);
      if (kind === undefined) return;
      const label = labelOf(kind, value, where, defaultNamespace);
      if (seen.has(label)) throw new ValidationError(`${label}: defined twice`);
      seen.add(label);
      if (kind === 'Broker') out.brokers.push(toBroker(value, label, defaultNamespace));
      else if (kind === 'Trigger') out.triggers.push(toTrigger(value, label, defaultNamespace));
      else out.pingSources.push(toPingSource(value, label, defaultNamespace));
    });
  });
  return out;
}

export { loadEventing };
export type {
  KReference,
  Destination,
  DeliverySpec,
  BrokerSpec,
  TriggerSpec,
  PingSourceSpec,
  EventingManifests,
};
