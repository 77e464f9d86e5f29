/** The development Knative Broker, its Triggers and PingSources: see docs/dev-broker.md. */
export { loadEventing } from './manifests.js';
export { createDevBroker, formatRecord, ttlAttribute } from './broker.js';
export { startPingSources } from './ping-source.js';
export { decodeHttpEvent, binaryHeaders } from './codec.js';
export { matchesFilter } from './filters.js';
export { parseCron, CronError } from './cron.js';
export { parseIsoDuration } from './duration.js';
export { isRetryableStatus, backoffMs } from './delivery.js';
export type {
  KReference,
  Destination,
  DeliverySpec,
  BrokerSpec,
  TriggerSpec,
  PingSourceSpec,
  EventingManifests,
} from './manifests.js';
export type {
  DevBroker,
  DevBrokerOptions,
  BrokerRecord,
  BrokerCounters,
  DropReason,
  IngestResult,
  Resolver,
} from './broker.js';
export type { PingSources, PingSourcesOptions, PingRecord } from './ping-source.js';
export type { BrokerEvent } from './codec.js';
export type { EventFilter, FilterDocument } from './filters.js';
export type { CronSchedule } from './cron.js';
