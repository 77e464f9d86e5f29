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

function inform(
  deps: { kube: Pick<Kube, 'list'>; watch: KubeWatch },
  kind: KindName,
  options: { namespace?: string; labelSelector?: string },
  onChange: (type: WatchEventType, object: KubeObject) => void,
  settings: { onError?(err: unknown): void; retryMs?: number } = {},
): Informer {
  const cache = new Map<string, KubeObject>();
  let stopped = false;
  let current: { stop(): void } | undefined;
  let timer: NodeJS.Timeout | undefined;
  let markSynced: () => void = () => {};
  const synced = new Promise<void>((resolve) => (markSynced = resolve));
  const retryMs = settings.retryMs ?? 1_000;

  function apply(type: WatchEventType, object: KubeObject): void {
    if (type === 'DELETED') cache.delete(keyOf(object));
    else cache.set(keyOf(object), object);
    onChange(type, object);
  }

  async function run(): Promise<void> {
    if (stopped) return;
    try {
      const list = await deps.kube.list(kind, options);
      if (stopped) return;
      const seen = new Set<string>();
      for (const object of list.items) {
        const key = keyOf(object);
        seen.add(key);
        const known = cache.get(key);
        if (known === undefined) apply('ADDED', object);
        else if (known.metadata.resourceVersion !== object.metadata.resourceVersion)
          apply('MODIFIED', object);
      }
      for (const [key, object] of [...cache]) if (!seen.has(key)) apply('DELETED', object);
      markSynced();
      current = await deps.watch.watch(
        kind,
        { ...options, resourceVersion: list.resourceVersion },
        (type, object) => {
          if (!stopped) apply(type, object);
        },
        (err) => {
          if (err !== undefined) settings.onError?.(err);
          schedule(err === undefined ? 0 : retryMs);
        },
      );
    } catch (err) {
      settings.onError?.(err);
      schedule(retryMs);
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
