/**
 * downstream-sync as a function: ApiServerSource add/update/delete events of
 * JointInferenceServices in, tasks to the edge nodes out; a `task.synced` reply says what was
 * delivered (nothing new -> 202, no reply). Its PingSource tick resyncs every service.
 */
import { z } from 'zod';
import { kubeObjectData } from '../controller/index.js';
import { ValidationError } from '../errors/index.js';
import { eventTypes } from '../events/index.js';
import { defineFunction, onEvent } from '../http/index.js';
import type { Answer, FunctionDefinition, ReadinessCheck } from '../http/index.js';
import { apiVersion, kinds } from '../k8s/index.js';
import type { Downstream, ResyncResult } from './downstream.js';

function downstreamSyncDefinition(deps: {
  downstream: Downstream;
  readiness: readonly ReadinessCheck[];
  onResync?(result: ResyncResult): void;
}): FunctionDefinition {
  const jis = apiVersion(kinds.jointInferenceService);
  const on = (type: string, deleted: boolean) =>
    onEvent({
      type,
      data: kubeObjectData,
      replies: [eventTypes.taskSynced],
      async handle({ data }): Promise<Answer> {
        if (data.apiVersion !== jis || data.kind !== kinds.jointInferenceService.kind) {
          throw new ValidationError(
            `data.kind: downstream-sync handles ${jis} ${kinds.jointInferenceService.kind}, not ${data.apiVersion} ${data.kind}`,
          );
        }
        if (data.metadata.namespace === undefined || data.metadata.uid === undefined) {
          throw new ValidationError('data.metadata: namespace and uid are required');
        }
        const result = await deps.downstream.sync(data, deleted);
        const changed = result.deliveries.some(
          (d) => d.stream === 'appended' || d.localController === 'delivered',
        );
        if (!changed) return { kind: 'accepted' };
        return {
          kind: 'reply',
          event: {
            type: eventTypes.taskSynced,
            subject: `${result.namespace}/jointinferenceservices/${result.name}`,
            data: result,
          },
        };
      },
    });
  return defineFunction({
    name: 'downstream-sync',
    events: [
      on(eventTypes.apiServerAdd, false),
      on(eventTypes.apiServerUpdate, false),
      on(eventTypes.apiServerDelete, true),
      // Its PingSource: every service offered again, lost deletes made up for.
      onEvent({
        type: eventTypes.pingTick,
        data: z.unknown(),
        async handle() {
          const result = await deps.downstream.resync();
          deps.onResync?.(result);
          return { kind: 'accepted' };
        },
      }),
    ],
    readiness: deps.readiness,
  });
}

export { downstreamSyncDefinition };
