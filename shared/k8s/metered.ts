/**
 * A Kube that reports each call (verb and kind) before making it: the controller's API-call
 * metrics, and how the reconcile benchmark counts lists and writes.
 */
import type { Kube } from './client.js';
import type { KindName } from './kinds.js';

type Verb = 'get' | 'list' | 'create' | 'patch' | 'patchStatus' | 'delete';

function meteredKube(kube: Kube, onCall: (verb: Verb, kind: KindName) => void): Kube {
  return {
    get: (ref) => (onCall('get', ref.kind), kube.get(ref)),
    list: (kind, options) => (onCall('list', kind), kube.list(kind, options)),
    create: (kind, namespace, body) => (onCall('create', kind), kube.create(kind, namespace, body)),
    patch: (ref, patch) => (onCall('patch', ref.kind), kube.patch(ref, patch)),
    patchStatus: (ref, patch) => (onCall('patchStatus', ref.kind), kube.patchStatus(ref, patch)),
    delete: (ref) => (onCall('delete', ref.kind), kube.delete(ref)),
    ping: () => kube.ping(),
  };
}

export { meteredKube };
export type { Verb };
