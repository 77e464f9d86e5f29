/**
 * Seed 004's restart policies applied to a failure a worker reported: restart it (roll a new
 * revision of its Knative Service) or treat the failure as permanent (no new revision, Failed
 * condition until the spec changes or the worker reports Running again).
 */
import type { restartPolicies } from '../crds/index.js';

type RestartPolicy = (typeof restartPolicies)[number];
type RestartDecision = 'restart' | 'permanent' | 'none';

/**
 * `state` is the reported state, `exitCode` the process exit status if known. A worker that
 * completed (exit 0) is restarted only under Always; a service is meant to keep running, but
 * OnFailure and Never do not count a clean exit as a failure. Under ExitCode, 1-127 are
 * permanent and 128-255 (signals, OOM kills) retryable; an unknown code is treated as retryable,
 * as the kubelet would.
 */
function restartDecision(
  policy: RestartPolicy,
  state: string,
  exitCode: number | undefined,
): RestartDecision {
  const completed = state === 'Completed' || (state === 'Failed' && exitCode === 0);
  if (completed) return policy === 'Always' ? 'restart' : 'none';
  if (state !== 'Failed') return 'none';
  switch (policy) {
    case 'Always':
    case 'OnFailure':
      return 'restart';
    case 'Never':
      return 'permanent';
    case 'ExitCode':
      return exitCode !== undefined && exitCode >= 1 && exitCode <= 127 ? 'permanent' : 'restart';
  }
}

export { restartDecision };
export type { RestartPolicy, RestartDecision };
