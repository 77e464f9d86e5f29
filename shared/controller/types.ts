/** The objects the controllers read, as they come from the API server (specs not yet trusted). */
import type { JointInferenceServiceStatus } from '../crds/index.js';
import type { KubeObject } from '../k8s/index.js';

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
  managedBy: 'app.kubernetes.io/managed-by',
  service: 'edgeai.io/jointinferenceservice',
  role: 'edgeai.io/worker',
});
const managerName = 'edgeai';

/** Annotations the controller owns on worker Services. */
const annotations = Object.freeze({
  generation: 'edgeai.io/generation',
  restartedAt: 'edgeai.io/restarted-at',
  minScale: 'autoscaling.knative.dev/min-scale',
  maxScale: 'autoscaling.knative.dev/max-scale',
});

function workerName(service: string, role: Role): string {
  return `${service}-${role}`;
}

export { roles, labels, managerName, annotations, workerName };
export type { Role, Condition, WorkerStatus, ServiceObject };
