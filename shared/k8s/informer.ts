/**
 * List-then-watch with a cache, as client-go's informers do: every object is reported ADDED once,
 * then each change; when a watch ends (the server's timeout, a restart, 410 Gone) the kind is
 * listed again and the difference with the cache is reported — objects that appeared, changed or
 * vanished while no watch was open — before watching from the new list. What the local stack's
 * ApiServerSource and serving supervisor stand on.
 */
import type { Kube, KubeObject, KubeWatch, WatchEventType } from './client.js';
import type { KindName } from './kinds.js';

interface Informer {
  /** Resolves after the first list has been reported. */
  readonly synced: Promise<void>;
  stop(): void;
}

const keyOf = (o: KubeObject) => `${o.metadata.namespace ?? ''}/${o.metadata.name ?? ''}`;

/** What a list says happened since the cache was last right: appeared, changed or vanished. */
function listChanges(
  cache: ReadonlyMap<string, KubeObject>,
  items: readonly KubeObject[],
): Array<[WatchEventType, KubeObject]> {
  const changes: Array<[WatchEventType, KubeObject]> = [];
  const seen = new Set<string>();
  for (const object of items) {
    const key = keyOf(object);
    seen.add(key);
    const known = cache.get(key);
    if (known === undefined) changes.push(['ADDED', object]);
    else if (known.metadata.resourceVersion !== object.metadata.resourceVersion)
      changes.push(['MODIFIED', object]);
  }
  for (const [key, object] of cache) if (!seen.has(key)) changes.push(['DELETED', object]);
  return changes;
}

/** Exponential in the failures in a row, with jitter, up to 30 s. */
function backoffMs(retryMs: number, failures: number): number {
  const base = Math.min(30_000, retryMs * 2 ** Math.max(0, failures - 1));
  return base / 2 + Math.random() * (base / 2);
}

function inform(
  deps: { kube: Pick<Kube, 'list'>; watch: KubeWatch },
  kind: KindName,
  options: { namespace?: string; labelSelector?: string },
  onChange: (type: WatchEventType, object: KubeObject) => void,
  settings: {
    onError?(err: unknown): void;
    /** First wait after a failure; doubled per failure in a row up to 30 s. */
    retryMs?: number;
    /**
     * Report what a list finds (false: only what watches see, as Knative's ApiServerSource,
     * whose informer sends nothing for its initial list or a relist). Default true.
     */
    reportLists?: boolean;
  } = {},
): Informer {
  const cache = new Map<string, KubeObject>();
  let stopped = false;
  let current: { stop(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let markSynced: () => void = () => {};
  const synced = new Promise<void>((resolve) => (markSynced = resolve));
  const retryMs = settings.retryMs ?? 1_000;
  const reportLists = settings.reportLists ?? true;
  let failures = 0;

  /** Caches and reports a change; a handler that throws is reported, and the change not kept. */
  function apply(type: WatchEventType, object: KubeObject, report: boolean): void {
    const key = keyOf(object);
    const before = cache.get(key);
    if (type === 'DELETED') cache.delete(key);
    else cache.set(key, object);
    if (!report) return;
    try {
      onChange(type, object);
    } catch (err) {
      // Undone, so the next list reports it again instead of taking it as seen.
      if (before === undefined) cache.delete(key);
      else cache.set(key, before);
      settings.onError?.(err);
    }
  }

  async function run(): Promise<void> {
    if (stopped) return;
    try {
      const list = await deps.kube.list(kind, options);
      if (stopped) return;
      for (const [type, object] of listChanges(cache, list.items)) apply(type, object, reportLists);
      markSynced();
      const opened = Date.now();
      let events = 0;
      const watch = await deps.watch.watch(
        kind,
        { ...options, resourceVersion: list.resourceVersion },
        (type, object) => {
          events += 1;
          if (!stopped) apply(type, object, true);
        },
        (err) => {
          // A watch that ends at once with nothing in it is a failure too (a proxy cutting
          // streams, say): reopening it at once would spin.
          const failed = err !== undefined || (events === 0 && Date.now() - opened < 1_000);
          if (err !== undefined) settings.onError?.(err);
          failures = failed ? failures + 1 : 0;
          schedule(failed ? backoffMs(retryMs, failures) : 0);
        },
      );
      if (stopped) watch.stop();
      else current = watch;
    } catch (err) {
      settings.onError?.(err);
      failures += 1;
      schedule(backoffMs(retryMs, failures));
    }
  }

  function schedule(delayMs: number): void {
    if (stopped) return;
    timer = setTimeout(() => void run(), delayMs);
    timer.unref();
  }

  void run();
  return {
    synced,
    stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      current?.stop();
    },
  };
}

export { inform };
export type { Informer };
