/**
 * Seed 000's GC -> LC API: `POST <lc>/<namespace>/jointinferenceservices/<name>` with the
 * resource (insert and update), `DELETE` on the same path for a delete. A node opts in with the
 * annotation `edgeai.io/local-controller-url`. Failures are UnavailableError: the event is
 * redelivered, and the stream side, already done, is not repeated.
 */
import { UnavailableError } from '../errors/index.js';
import { endpoint, succeeded } from '../http/index.js';
import type { HttpSend } from '../http/index.js';
import type { KubeObject } from '../k8s/index.js';
import type { Task } from './task.js';

const localControllerAnnotation = 'edgeai.io/local-controller-url';

/** The node's local-controller base URL, if it has a valid one. */
function localControllerUrl(node: KubeObject): URL | undefined {
  const raw = node.metadata.annotations?.[localControllerAnnotation];
  if (raw === undefined) return undefined;
  try {
    const url = new URL(raw);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : undefined;
  } catch {
    return undefined;
  }
}

/** The local controller's answer is read only for its status: anything longer is refused. */
const maxAnswerBytes = 64 * 1024;

/** Delivers tasks to local controllers with `send` (shared/http's client), each call bounded. */
function createLocalControllerClient(options: { timeoutMs: number; send: HttpSend }) {
  const { send, timeoutMs } = options;
  return {
    async deliver(base: URL, task: Task, node: string): Promise<void> {
      const path = `${encodeURIComponent(task.namespace)}/jointinferenceservices/${encodeURIComponent(task.name)}`;
      const method = task.operation === 'delete' ? 'DELETE' : 'POST';
      let status: number;
      try {
        ({ status } = await send(endpoint(base.href, path), {
          method,
          headers: {
            'content-type': 'application/json',
            'x-edgeai-operation': task.operation,
            'x-edgeai-version': `${task.uid}:${task.generation}`,
          },
          ...(method === 'POST' ? { body: JSON.stringify(task.resource) } : {}),
          timeoutMs,
          maxBytes: maxAnswerBytes,
        }));
      } catch (err) {
        throw new UnavailableError(
          `local controller of node ${node}: ${err instanceof Error ? err.message : String(err)}`,
          2,
        );
      }
      // A delete of something the LC never had is done.
      if (succeeded(status) || (method === 'DELETE' && status === 404)) return;
      throw new UnavailableError(
        `local controller of node ${node} answered ${status} to ${method} ${path}`,
        2,
      );
    },
  };
}

type LocalControllerClient = ReturnType<typeof createLocalControllerClient>;

export { createLocalControllerClient, localControllerUrl, localControllerAnnotation };
export type { LocalControllerClient };
