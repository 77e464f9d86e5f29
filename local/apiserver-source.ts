/**
 * Knative's ApiServerSource (Resource mode) for the local stack: reads the ApiServerSources in
 * knative/eventing/, watches their resources in the development API server through the
 * informer, and sends each change a watch sees to the source's Broker —
 * `dev.knative.apiserver.resource.{add,update,delete}`, source the API server's URL, the object
 * as data, the `ceOverrides` extensions — one source's events in order. Like Knative's adapter
 * (whose informer ignores its lists), nothing is sent for what exists at start or for what a
 * relist after a lost watch finds: a consumer must not count on an event for every change.
 * Served: `resources` with `selector.matchLabels`; other selectors, `owner` and
 * `namespaceSelector` other than {} are refused rather than ignored.
 */
import { randomUUID } from 'node:crypto';
import { parseAllDocuments } from 'yaml';
import { z } from 'zod';
import { createEventSink, eventTypes } from '../shared/events/index.js';
import { createHttpClient, sinkPost } from '../shared/http/index.js';
import type { Sink } from '../shared/events/index.js';
import { apiVersion, inform, kinds } from '../shared/k8s/index.js';
import type {
  Informer,
  KindName,
  Kube,
  KubeObject,
  KubeWatch,
  WatchEventType,
} from '../shared/k8s/index.js';

const sourceDocument = z.object({
  kind: z.literal('ApiServerSource'),
  metadata: z.object({ name: z.string(), namespace: z.string().default('default') }),
  spec: z
    .object({
      mode: z.literal('Resource').default('Resource'),
      resources: z
        .array(
          z
            .object({
              apiVersion: z.string(),
              kind: z.string(),
              selector: z
                .object({ matchLabels: z.record(z.string(), z.string()) })
                .strict()
                .optional(),
            })
            .strict(),
        )
        .min(1),
      namespaceSelector: z.object({}).strict().optional(),
      serviceAccountName: z.string().optional(),
      ceOverrides: z
        .object({ extensions: z.record(z.string(), z.string()).default({}) })
        .default({ extensions: {} }),
      sink: z.object({
        ref: z.object({
          kind: z.literal('Broker'),
          name: z.string(),
          namespace: z.string().optional(),
        }),
      }),
    })
    .strict(),
});

type ApiServerSourceSpec = z.output<typeof sourceDocument>;

/** The ApiServerSources in YAML texts (other kinds are skipped). */
function parseApiServerSources(texts: readonly string[]): ApiServerSourceSpec[] {
  const specs: ApiServerSourceSpec[] = [];
  for (const text of texts) {
    for (const doc of parseAllDocuments(text)) {
      const value: unknown = doc.toJS();
      if ((value as { kind?: unknown } | null)?.kind !== 'ApiServerSource') continue;
      specs.push(sourceDocument.parse(value));
    }
  }
  return specs;
}

function kindNameOf(version: string, kind: string): KindName {
  const found = (Object.keys(kinds) as KindName[]).find(
    (name) => apiVersion(kinds[name]) === version && kinds[name].kind === kind,
  );
  if (found === undefined)
    throw new Error(`ApiServerSource: ${version} ${kind} is not served locally`);
  return found;
}

const typeOf: Record<WatchEventType, string> = {
  ADDED: eventTypes.apiServerAdd,
  MODIFIED: eventTypes.apiServerUpdate,
  DELETED: eventTypes.apiServerDelete,
};

function subjectOf(kind: KindName, object: KubeObject): string {
  const k = kinds[kind];
  const base = k.group === '' ? `/api/${k.version}` : `/apis/${k.group}/${k.version}`;
  const ns = object.metadata.namespace;
  return `${base}${ns === undefined ? '' : `/namespaces/${ns}`}/${k.plural}/${object.metadata.name ?? ''}`;
}

/**
 * Starts every source; `brokerUrl` gives a Broker's ingress, `serverUrl` is what events carry as
 * their source. `sinkFor` replaces the HTTP sink (tests). Resolves once every informer has
 * reported its first list.
 */
async function startApiServerSources(options: {
  sources: readonly ApiServerSourceSpec[];
  kube: Pick<Kube, 'list'>;
  watch: KubeWatch;
  serverUrl: string;
  brokerUrl: (namespace: string, name: string) => string;
  sinkFor?: (url: string) => Sink;
  onError?: (err: unknown) => void;
}): Promise<{ stop(): void }> {
  const informers: Informer[] = [];
  const http = createHttpClient();
  const stop = () => {
    for (const informer of informers) informer.stop();
    http.close();
  };
  try {
    for (const source of options.sources) {
      const { ref } = source.spec.sink;
      const url = options.brokerUrl(ref.namespace ?? source.metadata.namespace, ref.name);
      const sink =
        options.sinkFor?.(url) ??
        createEventSink({
          url,
          source: options.serverUrl,
          attempts: 5,
          timeoutMs: 10_000,
          post: sinkPost(http.send),
        });
      // One chain per source: its events reach the Broker in the order the watch saw them.
      let chain = Promise.resolve();
      for (const resource of source.spec.resources) {
        const kind = kindNameOf(resource.apiVersion, resource.kind);
        const matchLabels = resource.selector?.matchLabels ?? {};
        const labelSelector = Object.entries(matchLabels)
          .map(([k, v]) => `${k}=${v}`)
          .join(',');
        informers.push(
          inform(
            { kube: options.kube, watch: options.watch },
            kind,
            labelSelector === '' ? {} : { labelSelector },
            (type, object) => {
              const event = {
                id: randomUUID(),
                type: typeOf[type],
                subject: subjectOf(kind, object),
                data: object,
                extensions: source.spec.ceOverrides.extensions,
              };
              chain = chain.then(() => sink(event)).catch((err: unknown) => options.onError?.(err));
            },
            {
              reportLists: false,
              ...(options.onError === undefined ? {} : { onError: options.onError }),
            },
          ),
        );
      }
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error('ApiServerSource: the first lists did not answer within 30 s')),
        30_000,
      );
    });
    try {
      await Promise.race([Promise.all(informers.map((i) => i.synced)), timeout]);
    } finally {
      clearTimeout(timer);
    }
  } catch (err) {
    stop();
    throw err;
  }
  return { stop };
}

export { parseApiServerSources, startApiServerSources };
export type { ApiServerSourceSpec };
