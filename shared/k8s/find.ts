import { NotFoundError } from '../errors/index.js';
import type { Kube, KubeObject, ObjectRef } from './client.js';

/** The object, or undefined when it does not exist; other failures still throw. */
async function findObject(kube: Kube, ref: ObjectRef): Promise<KubeObject | undefined> {
  try {
    return await kube.get(ref);
  } catch (err) {
    if (err instanceof NotFoundError) return undefined;
    throw err;
  }
}

export { findObject };
