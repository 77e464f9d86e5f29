/**
 * One watch of Knative Services in all namespaces, from a resourceVersion.
 *
 * The one place in this folder that uses @kubernetes/client-node directly: shared/k8s (the
 * project's adapter) offers get, list and writes but no watch, and other engineers own it, so
 * this wraps client-node's own `Watch` against the same KubeConfig the adapter uses. Only the
 * stream is taken from it; listing, Secrets and status writes go through shared/k8s.
 */
import { Watch } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { kinds } from '../../k8s/index.js';

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

/** How a watch ended: the server closed it (resume), its resourceVersion expired (410: relist), or it failed. */
type WatchEnd = { kind: 'closed' } | { kind: 'expired' } | { kind: 'failed'; error: Error };

interface ServiceWatch {
  ended: Promise<WatchEnd>;
  abort(): void;
}

/** Long watches are cut by the server anyway; ask for an end and resume from the last event. */
const watchTimeoutSeconds = 300;

function watchServices(
  config: KubeConfig,
  resourceVersion: string,
  onEvent: (type: EventType, object: unknown) => void,
): ServiceWatch {
  const { group, version, plural } = kinds.knativeService;
  let expired = false;
  let failure: Error | undefined;
  let aborted = false;
  let controller: AbortController | undefined;
  let finish: (end: WatchEnd) => void = () => {};
  const ended = new Promise<WatchEnd>((resolve) => (finish = resolve));
  const end = (err: unknown) => {
    if ((err as { statusCode?: unknown } | null)?.statusCode === 410) expired = true;
    else if (err !== null && err !== undefined)
      failure ??= err instanceof Error ? err : new Error(JSON.stringify(err));
    if (failure !== undefined) finish({ kind: 'failed', error: failure });
    else finish({ kind: expired ? 'expired' : 'closed' });
  };
  new Watch(config)
    .watch(
      `/apis/${group}/${version}/${plural}`,
      { resourceVersion, timeoutSeconds: watchTimeoutSeconds },
      (phase: string, object: unknown) => {
        if (phase === 'ADDED' || phase === 'MODIFIED' || phase === 'DELETED') {
          onEvent(phase, object);
        } else if (phase === 'ERROR') {
          const status = object as { code?: unknown; message?: unknown } | null;
          const message = typeof status?.message === 'string' ? status.message : 'no message';
          if (status?.code === 410) expired = true;
          else failure = new Error(`watch error: ${message}`);
        }
      },
      end,
    )
    .then((created) => {
      controller = created;
      if (aborted) created.abort();
    }, end);
  return {
    ended,
    abort: () => {
      aborted = true;
      controller?.abort();
    },
  };
}

export { watchServices };
export type { EventType, ServiceWatch, WatchEnd };
