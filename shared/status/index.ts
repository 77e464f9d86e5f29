/**
 * upstream-status: authenticated edge reports, exact counters, conflict-retried status writes.
 * The report itself (WorkerMessage) is shared/messages's; its quality part is shared/crds's.
 */
export {
  secretTokens,
  authenticateBearer,
  authenticateSignature,
  signReport,
  secretName,
} from './node-auth.js';
export { createReportCounters, counterNames } from './counters.js';
export { coalescing } from './coalesce.js';
export { createUpstream, statusFromTotals } from './upstream.js';
export { loadUpstreamConfig } from './config.js';
export type { NodeTokens } from './node-auth.js';
export type { ReportCounters, Reporter, Totals } from './counters.js';
export type { Upstream, UpstreamOptions, ReportInput, ReportResult } from './upstream.js';
export type { UpstreamConfig } from './config.js';
export { upstreamStatusDefinition } from './definition.js';
