/** The pure decision: restart policies, conditions, and that its own writes leave nothing to do. */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  desiredState,
  mergeConditions,
  reconcile,
  restartDecision,
} from '../../../shared/controller/index.js';
import type {
  Action,
  Role,
  ServiceObject,
  WorkerSettings,
} from '../../../shared/controller/index.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import { mergePatch } from '../../../shared/local/apiserver/index.js';

const settings: WorkerSettings = {
  image: 'edgeai:test',
  upstreamStatusUrl: 'http://upstream.example',
  workerSecret: 'redis',
};
const options = { heartbeatMs: 3_600_000 };

const node = (name: string, nodeLabels: Record<string, string> = {}): KubeObject => ({
  metadata: { name, labels: nodeLabels },
});
const model = (name: string): KubeObject => ({
  metadata: { name },
  spec: { url: `file:///m/${name}.onnx`, format: 'onnx' },
});
const models = new Map([
  ['small', model('small')],
  ['big', model('big')],
]);
const nodes = new Map([
  ['edge0', node('edge0', { zone: 'a' })],
  ['cloud0', node('cloud0')],
]);

function service(spec: Record<string, unknown>, status = {}, generation = 1): ServiceObject {
  return {
    metadata: { name: 'demo', namespace: 'ns', uid: 'u-1', generation, resourceVersion: '5' },
    spec,
    status,
  };
}

const baseSpec = {
  edgeWorker: {
    model: { name: 'small' },
    nodeName: 'edge0',
    hardExampleAlgorithm: { name: 'Threshold', parameters: { threshold: 0.8 } },
  },
  cloudWorker: { model: { name: 'big' } },
};

describe('restartDecision (seed 004)', () => {
  it.each([
    ['Always', 'Failed', 1, 'restart'],
    ['Always', 'Completed', 0, 'restart'],
    ['OnFailure', 'Failed', 1, 'restart'],
    ['OnFailure', 'Completed', 0, 'none'],
    ['OnFailure', 'Failed', 0, 'none'],
    ['Never', 'Failed', 137, 'permanent'],
    ['Never', 'Completed', 0, 'none'],
    ['ExitCode', 'Failed', 1, 'permanent'],
    ['ExitCode', 'Failed', 127, 'permanent'],
    ['ExitCode', 'Failed', 128, 'restart'],
    ['ExitCode', 'Failed', 255, 'restart'],
    ['ExitCode', 'Failed', undefined, 'restart'],
    ['Always', 'Running', undefined, 'none'],
  ] as const)('%s, %s with exit code %s -> %s', (policy, state, code, expected) => {
    expect(restartDecision(policy, state, code)).toBe(expected);
  });
});

describe('mergeConditions', () => {
  it('keeps one entry per type and moves lastTransitionTime only when the status flips', () => {
    const first = mergeConditions(
      [{ type: 'Custom', status: 'True' }],
      [{ type: 'Ready', status: 'False', reason: 'A', message: 'a' }],
      't1',
    );
    const same = mergeConditions(
      first,
      [{ type: 'Ready', status: 'False', reason: 'B', message: 'b' }],
      't2',
    );
    expect(same).toEqual([
      { type: 'Ready', status: 'False', reason: 'B', message: 'b', lastTransitionTime: 't1' },
      { type: 'Custom', status: 'True' },
    ]);
    const flipped = mergeConditions(
      same,
      [{ type: 'Ready', status: 'True', reason: 'Ready', message: '' }],
      't3',
    );
    expect(flipped[0]?.lastTransitionTime).toBe('t3');
  });
});

/** Carries out `actions` on plain objects, as the API server would. */
function applyTo(
  state: { service: ServiceObject; workers: Partial<Record<Role, KubeObject>> },
  actions: readonly Action[],
) {
  let { service } = state;
  const workers = { ...state.workers };
  for (const action of actions) {
    if (action.kind === 'status') {
      service = {
        ...service,
        status: mergePatch(service.status ?? {}, action.status) as ServiceObject['status'],
      };
    } else if (action.kind === 'create') {
      workers[action.role] = {
        ...structuredClone(action.object),
        metadata: { ...action.object.metadata, generation: 1 },
      };
    } else if (action.kind === 'update') {
      const stored = workers[action.role]!;
      const next = mergePatch(stored, action.patch) as KubeObject;
      const changed = !isDeepStrictEqual(stored['spec'], next['spec']);
      next.metadata.generation = (stored.metadata.generation ?? 1) + (changed ? 1 : 0);
      workers[action.role] = next;
    }
  }
  return { service, workers };
}

const writes = (actions: readonly Action[]) => actions.filter((a) => a.kind !== 'event');

describe('reconcile', () => {
  const now = new Date('2026-11-22T10:00:00Z');
  const later = new Date('2026-11-22T10:00:05Z');
  type State = { service: ServiceObject; workers: Partial<Record<Role, KubeObject>> };
  const pass = (state: State, at: Date): Action[] =>
    reconcile(state, desiredState(state.service, models, nodes, settings), at, options);
  /** A fresh service after its first pass (workers created). */
  const started = (spec: Record<string, unknown>): State => {
    const state: State = { service: service(spec), workers: {} };
    return applyTo(state, pass(state, now));
  };
  /** What upstream-status writes when the edge worker reports. */
  const report = (state: State, edge: Record<string, unknown>) => {
    state.service.status = mergePatch(state.service.status, {
      workers: { edge },
    }) as ServiceObject['status'];
  };

  it('restarts a worker once per reported failure (Always), with a new revision annotation', () => {
    let state = started(baseSpec);
    report(state, { state: 'Failed', exitCode: 1, reportTime: '2026-11-22T10:00:01Z' });
    const actions = pass(state, later);
    const update = actions.find((a) => a.kind === 'update');
    expect(update).toMatchObject({ role: 'edge' });
    expect(JSON.stringify(update)).toContain('"edgeai.io/restarted-at":"2026-11-22T10:00:05.000Z"');
    expect(actions).toContainEqual(
      expect.objectContaining({ kind: 'event', reason: 'WorkerRestarted' }),
    );
    state = applyTo(state, actions);
    expect(state.service.status?.workers?.edge).toMatchObject({
      restarts: 1,
      outcome: 'Restarted',
    });
    expect(state.service.status?.conditions?.find((c) => c.type === 'Restarting')?.status).toBe(
      'True',
    );
    // The same report again: already handled, nothing more to do.
    const again = pass(state, later);
    expect(writes(again)).toEqual([]);
  });

  it('treats exit codes 1-127 as permanent under ExitCode, and retries after a spec change', () => {
    const spec = { ...baseSpec, edgeWorker: { ...baseSpec.edgeWorker, restartPolicy: 'ExitCode' } };
    let state = started(spec);
    report(state, { state: 'Failed', exitCode: 3, message: 'bad model', reportTime: 't1' });
    const actions = pass(state, later);
    expect(actions.some((a) => a.kind === 'update' || a.kind === 'create')).toBe(false);
    state = applyTo(state, actions);
    const failed = state.service.status?.conditions?.find((c) => c.type === 'Failed');
    expect(failed).toMatchObject({ status: 'True', reason: 'PermanentFailure' });
    expect(failed?.message).toContain('edge worker reported Failed with exit code 3: bad model');
    expect(state.service.status?.edgeWorkerState).toBe('Failed');
    // A deleted worker is not recreated while the failure stands.
    delete state.workers.edge;
    expect(pass(state, later).some((a) => a.kind === 'create')).toBe(false);
    // The spec changes: the cause may be gone, so the worker is tried again.
    state.service.metadata.generation = 2;
    const retry = pass(state, later);
    expect(retry).toContainEqual(expect.objectContaining({ kind: 'create', role: 'edge' }));
    expect(retry).toContainEqual(
      expect.objectContaining({ kind: 'event', reason: 'WorkerRetried' }),
    );
  });

  it('recovers from Failed when the worker reports Running again', () => {
    const spec = { ...baseSpec, edgeWorker: { ...baseSpec.edgeWorker, restartPolicy: 'Never' } };
    let state = started(spec);
    report(state, { state: 'Failed', reportTime: 't1' });
    state = applyTo(state, pass(state, later));
    expect(state.service.status?.conditions?.find((c) => c.type === 'Failed')?.status).toBe('True');
    report(state, { state: 'Running', reportTime: 't2' });
    state = applyTo(state, pass(state, later));
    expect(state.service.status?.conditions?.find((c) => c.type === 'Failed')?.status).toBe(
      'False',
    );
  });

  const specs = fc.record({
    hem: fc.constantFrom('IBT', 'Threshold', 'CrossEntropy', 'Random', 'Guess'),
    pin: fc.constantFrom<'name' | 'selector' | 'none' | 'missing'>(
      'name',
      'selector',
      'none',
      'missing',
    ),
    minScale: fc.option(fc.integer({ min: 0, max: 3 }), { nil: undefined }),
    parameter: fc.option(fc.string({ maxLength: 5 }), { nil: undefined }),
    policy: fc.constantFrom('Always', 'OnFailure', 'Never', 'ExitCode'),
    cloudModel: fc.constantFrom('big', 'absent'),
  });
  const reports = fc.option(
    fc.record({
      state: fc.constantFrom('Running', 'Failed', 'Completed'),
      exitCode: fc.option(fc.integer({ min: 0, max: 255 }), { nil: undefined }),
      reportTime: fc.constantFrom('t1', 't2'),
    }),
    { nil: undefined },
  );

  it('reaches a fixpoint: after its own writes, the next pass writes nothing (property)', () => {
    fc.assert(
      fc.property(specs, specs, reports, fc.boolean(), (first, second, edgeReport, ready) => {
        const specOf = (s: typeof first) => ({
          edgeWorker: {
            model: { name: 'small' },
            ...(s.pin === 'name' ? { nodeName: 'edge0' } : {}),
            ...(s.pin === 'missing' ? { nodeName: 'nowhere' } : {}),
            ...(s.pin === 'selector' ? { nodeSelector: { zone: 'a' } } : {}),
            hardExampleAlgorithm: { name: s.hem },
            restartPolicy: s.policy,
            ...(s.minScale === undefined ? {} : { scale: { minScale: s.minScale } }),
            ...(s.parameter === undefined
              ? {}
              : { workerSpec: { parameters: [{ key: 'k', value: s.parameter }] } }),
          },
          cloudWorker: { model: { name: s.cloudModel } },
        });
        let state = started(specOf(first));
        if (ready) {
          for (const w of Object.values(state.workers)) {
            w['status'] = {
              observedGeneration: w.metadata.generation,
              conditions: [{ type: 'Ready', status: 'True' }],
            };
          }
        }
        if (edgeReport !== undefined) report(state, edgeReport);
        state.service = {
          ...state.service,
          spec: specOf(second),
          metadata: { ...state.service.metadata, generation: 2 },
        };
        state = applyTo(state, pass(state, later));
        const next = pass(state, new Date(later.getTime() + 1000));
        expect(writes(next)).toEqual([]);
        expect(next).toEqual([]);
      }),
      { numRuns: 300 },
    );
  });
});
