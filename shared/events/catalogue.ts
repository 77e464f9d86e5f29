/**
 * Every CloudEvent type the project consumes or produces. Ours are reverse-DNS under the API group
 * (edgeai.io -> io.edgeai); the Knative sources' types are listed so Triggers and handlers name
 * them from one place.
 */

const eventTypes = Object.freeze({
  /** Knative PingSource tick (reconcile-tick, aset-scheduler policy tick). */
  pingTick: 'dev.knative.sources.ping',
  /** Knative ApiServerSource, Resource mode. */
  apiServerAdd: 'dev.knative.apiserver.resource.add',
  apiServerUpdate: 'dev.knative.apiserver.resource.update',
  apiServerDelete: 'dev.knative.apiserver.resource.delete',
  /** Edge worker status report (WorkerMessage) for upstream-status. */
  workerStatusReported: 'io.edgeai.jointinference.status.reported',
  /** Task delivered to an edge node by downstream-sync. */
  taskSynced: 'io.edgeai.jointinference.task.synced',
  /** Input for the edge worker. */
  inferenceRequested: 'io.edgeai.inference.requested',
  /** Input the edge found hard, for the cloud worker. */
  inferenceHardExample: 'io.edgeai.inference.hard-example',
  /** A final prediction. */
  inferenceCompleted: 'io.edgeai.inference.completed',
  /** ML graph: predict request, reward by prediction id, partial result for a join. */
  graphPredict: 'io.edgeai.mlgraph.predict',
  graphReward: 'io.edgeai.mlgraph.reward',
  graphPartial: 'io.edgeai.mlgraph.partial',
  graphJoined: 'io.edgeai.mlgraph.joined',
  /** ML graph: a router's answer to a predict event, naming the children in `mlgraphroute`. */
  graphRouted: 'io.edgeai.mlgraph.routed',
  /** ML graph: a graph's answer to a predict event (its executor walked the whole graph). */
  graphCompleted: 'io.edgeai.mlgraph.completed',
  /** ASET: a client stream asks for placement, ends, or was placed / rejected. */
  streamRequested: 'io.edgeai.aset.stream.requested',
  streamEnded: 'io.edgeai.aset.stream.ended',
  streamBound: 'io.edgeai.aset.stream.bound',
  streamRejected: 'io.edgeai.aset.stream.rejected',
  /** Federated learning: a round opened for a trainer (aggregator → trainer). */
  flRoundStarted: 'io.edgeai.fl.round.started',
  /** Federated learning: a trainer's weights for a round (trainer → aggregator). */
  flUpdate: 'io.edgeai.fl.update',
  /** Federated learning: a trainer that could not train, with its exit code. */
  flTrainerFailed: 'io.edgeai.fl.trainer.failed',
  /** Federated learning: a round ended (aggregator → reconcile-tick, through the Broker). */
  flRoundCompleted: 'io.edgeai.fl.round.completed',
  /** ASET: a cluster's monitoring agent reports the responses its workers delivered. */
  workerResponsesReported: 'io.edgeai.aset.responses.reported',
} as const);

type EventType = (typeof eventTypes)[keyof typeof eventTypes];

const knownTypes: ReadonlySet<string> = new Set(Object.values(eventTypes));

/** Narrows a string to a catalogued event type. */
function isEventType(value: string): value is EventType {
  return knownTypes.has(value);
}

export { eventTypes, isEventType };
export type { EventType };
