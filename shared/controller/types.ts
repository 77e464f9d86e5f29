/** The objects the controllers read, as they come from the API server (specs not yet trusted). */
import type { JointInferenceServiceStatus } from '../crds/index.js';
import type { KubeObject } from '../k8s/index.js';
import { managedBy } from './knative-service.js';

const roles = ['edge', 'cloud'] as const;
/** A JointInferenceService has one worker of each role. */
type Role = (typeof roles)[number];

type Condition = NonNullable<JointInferenceServiceStatus['conditions']>[number];
type WorkerStatus = NonNullable<NonNullable<JointInferenceServiceStatus['workers']>['edge']>;

/** A JointInferenceService as stored; `spec` is parsed by the reconciler before use. */
interface ServiceObject extends KubeObject {
  spec?: unknown;
  status?: JointInferenceServiceStatus;
}

/** Labels on every worker Service, so one list call per tick finds them all. */
const labels = Object.freeze({
  managedBy: managedBy.label,
  service: 'edgeai.io/jointinferenceservice',
  role: 'edgeai.io/worker',
});
const managerName = managedBy.value;

function workerName(service: string, role: Role): string {
  return `${service}-${role}`;
}

export { roles, labels, managerName, workerName };
export type { Role, Condition, WorkerStatus, ServiceObject };
