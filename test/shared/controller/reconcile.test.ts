/** The pure decision: restart policies, conditions, and that its own writes leave nothing to do. */
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { mergeConditions } from '../../../shared/controller/conditions.js';
import { desiredState } from '../../../shared/controller/desired.js';
import type { WorkerSettings } from '../../../shared/controller/knative-service.js';
import { reconcile } from '../../../shared/controller/reconcile.js';
import type { Action } from '../../../shared/controller/reconcile.js';
import { restartDecision } from '../../../shared/controller/restart.js';
import type { Role, ServiceObject } from '../../../shared/controller/types.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import { mergePatch } from '../../../local/apiserver/index.js';

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

/** What reaches the API server: JSON, so keys holding `undefined` are not sent. */
const wire = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

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
        ...wire(action.object),
        metadata: { ...action.object.metadata, generation: 1 },
      };
    } else if (action.kind === 'update') {
      const stored = workers[action.role]!;
      const next = mergePatch(stored, wire(action.patch)) as KubeObject;
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
  /** What upstream-status writes when a worker reports. */
  const report = (state: State, edge: Record<string, unknown>, role: Role = 'edge') => {
    state.service.status = mergePatch(state.service.status, {
      workers: { [role]: edge },
    }) as ServiceObject['status'];
  };
  /** What Knative Serving writes once every worker's latest revision is up. */
  const rollOut = (state: State) => {
    for (const w of Object.values(state.workers)) {
      w['status'] = {
        observedGeneration: w.metadata.generation,
        conditions: [{ type: 'Ready', status: 'True' }],
      };
    }
  };
  const conditionOf = (state: State, type: string) =>
    state.service.status?.conditions?.find((c) => c.type === type);
  /** What upstream-status writes when the edge reports its quality: the whole of it. */
  const reportQuality = (state: State, quality: Record<string, unknown>) => {
    state.service.status = { ...state.service.status, quality };
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

  it('ends a restart once Knative has readied the restarted revision, with no new report', () => {
    let state = started(baseSpec);
    rollOut(state);
    state = applyTo(state, pass(state, now));
    expect(conditionOf(state, 'Ready')?.status).toBe('True');
    // The cloud worker has no reporter: nothing but its Service tells that the restart is done.
    report(state, { state: 'Failed', exitCode: 137, reportTime: 't1' }, 'cloud');
    state = applyTo(state, pass(state, later));
    expect(conditionOf(state, 'Ready')).toMatchObject({
      status: 'False',
      reason: 'WorkerRestarting',
    });
    // Ready, but for the revision before the restart: still restarting.
    expect(writes(pass(state, later))).toEqual([]);
    rollOut(state);
    const done = pass(state, later);
    expect(done).toContainEqual(expect.objectContaining({ kind: 'event', reason: 'Ready' }));
    state = applyTo(state, done);
    expect(conditionOf(state, 'Restarting')?.status).toBe('False');
    expect(conditionOf(state, 'Ready')?.status).toBe('True');
    expect(state.service.status).toMatchObject({ cloudWorkerState: 'Running', activeWorkers: 2 });
    expect(state.service.status?.workers?.cloud).toMatchObject({ restarts: 1 });
    expect(writes(pass(state, later))).toEqual([]);
    // A later rollout is not taken for the restart again.
    state.service.metadata.generation = 2;
    state.service.spec = {
      ...baseSpec,
      cloudWorker: { ...baseSpec.cloudWorker, scale: { minScale: 1 } },
    };
    state = applyTo(state, pass(state, later));
    expect(state.workers.cloud?.metadata.generation).toBe(3);
    expect(conditionOf(state, 'Restarting')?.status).toBe('False');
    expect(conditionOf(state, 'Ready')?.status).toBe('Unknown');
  });

  it.each(['OnFailure', 'Never'])(
    'updates a worker that completed under %s when the spec changes, and clears Failed',
    (restartPolicy) => {
      const spec = { ...baseSpec, edgeWorker: { ...baseSpec.edgeWorker, restartPolicy } };
      let state = started(spec);
      rollOut(state);
      report(state, { state: 'Completed', exitCode: 0, reportTime: 't1' });
      const stopped = pass(state, later);
      expect(stopped.some((a) => a.kind === 'update' || a.kind === 'create')).toBe(false);
      state = applyTo(state, stopped);
      expect(conditionOf(state, 'Failed')).toMatchObject({
        status: 'True',
        reason: 'WorkerCompleted',
      });
      state.service.metadata.generation = 2;
      state.service.spec = {
        ...spec,
        edgeWorker: { ...spec.edgeWorker, workerSpec: { parameters: [{ key: 'k', value: 'v' }] } },
      };
      const retry = pass(state, later);
      const update = retry.find((a) => a.kind === 'update');
      expect(update).toMatchObject({ role: 'edge' });
      expect(JSON.stringify(update)).toContain('"edgeai.io/generation":"2"');
      expect(JSON.stringify(update)).toContain('WORKER_PARAMETERS');
      expect(retry).toContainEqual(
        expect.objectContaining({ kind: 'event', reason: 'WorkerRetried' }),
      );
      state = applyTo(state, retry);
      expect(conditionOf(state, 'Failed')?.status).toBe('False');
      expect(state.service.status?.observedGeneration).toBe(2);
      rollOut(state);
      state = applyTo(state, pass(state, later));
      expect(conditionOf(state, 'Ready')?.status).toBe('True');
      expect(writes(pass(state, later))).toEqual([]);
    },
  );

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

  it('names a worker name held by someone else, creates only the other worker, and recovers', () => {
    let state: State = { service: service(baseSpec), workers: {} };
    const blocked = reconcile(
      { ...state, taken: ['edge'] },
      desiredState(state.service, models, nodes, settings),
      now,
      options,
    );
    expect(
      blocked.filter((a) => a.kind === 'create').map((a) => a.kind === 'create' && a.role),
    ).toEqual(['cloud']);
    state = applyTo(state, blocked);
    const created = state.service.status?.conditions?.find((c) => c.type === 'Created');
    expect(created).toMatchObject({ status: 'False', reason: 'WorkerNameTaken' });
    expect(created?.message).toBe(
      'Knative Service "demo-edge" (the edge worker\'s name) exists and is not this service\'s worker: delete or rename it',
    );
    expect(state.service.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'WorkerNameTaken',
    });
    expect(state.service.status?.edgeWorkerState).toBe('NameTaken');
    expect(blocked).toContainEqual(
      expect.objectContaining({ kind: 'event', type: 'Warning', reason: 'WorkerNameTaken' }),
    );
    // Still taken: nothing new to write or say.
    expect(
      reconcile(
        { ...state, taken: ['edge'] },
        desiredState(state.service, models, nodes, settings),
        later,
        options,
      ),
    ).toEqual([]);
    // The other Service is gone: the worker is created and the condition clears.
    const freed = pass(state, later);
    expect(freed).toContainEqual(expect.objectContaining({ kind: 'create', role: 'edge' }));
    state = applyTo(state, freed);
    expect(state.service.status?.conditions?.find((c) => c.type === 'Created')?.status).toBe(
      'True',
    );
  });

  it('never creates a worker whose name is taken (property)', () => {
    fc.assert(
      fc.property(
        fc.subarray(['edge', 'cloud'] as Role[]),
        fc.subarray(['edge', 'cloud'] as Role[]),
        (taken, present) => {
          const state = started(baseSpec);
          const workers = Object.fromEntries(present.map((r) => [r, state.workers[r]!]));
          const actions = reconcile(
            { service: state.service, workers, taken },
            desiredState(state.service, models, nodes, settings),
            later,
            options,
          );
          for (const action of actions) {
            if (action.kind === 'create') expect(taken).not.toContain(action.role);
          }
          // A Service that is this one's worker is never reported as someone else's.
          const reallyTaken = taken.filter((r) => !present.includes(r));
          const ready = mergePatch(
            state.service.status ?? {},
            actions.find((a) => a.kind === 'status')?.status ?? {},
          ) as ServiceObject['status'];
          const createdCondition = ready?.conditions?.find((c) => c.type === 'Created');
          expect(createdCondition?.reason === 'WorkerNameTaken').toBe(reallyTaken.length > 0);
        },
      ),
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

  const specOf = (s: typeof specs extends fc.Arbitrary<infer T> ? T : never) => ({
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

  it('keeps a ready worker ready when a new generation changes only its metadata', () => {
    const spec = { ...baseSpec, edgeWorker: { ...baseSpec.edgeWorker, scale: { minScale: 0 } } };
    let state = started(spec);
    rollOut(state);
    state.service = { ...state.service, metadata: { ...state.service.metadata, generation: 2 } };
    const actions = pass(state, later);
    expect(actions.filter((a) => a.kind === 'update').map((a) => a.role)).toEqual([
      'edge',
      'cloud',
    ]);
    expect(conditionOf(applyTo(state, actions), 'Ready')?.status).toBe('True');
    expect(conditionOf(applyTo(state, actions), 'Degraded')?.status).toBe('False');
    state = applyTo(state, actions);
    expect(state.workers.edge?.metadata.generation).toBe(1);
    expect(writes(pass(state, new Date(later.getTime() + 1000)))).toEqual([]);
  });

  const qualities = fc.option(
    fc.record(
      {
        driftScore: fc.double({ min: 0, max: 50, noNaN: true }),
        driftThreshold: fc.double({ min: 0, max: 50, noNaN: true }),
        drifting: fc.boolean(),
        driftWindow: fc.integer({ min: 1, max: 5000 }),
        outlierShare: fc.double({ min: 0, max: 1, noNaN: true }),
        estimatedJointLoss: fc.double({ min: 0, max: 100, noNaN: true }),
      },
      { requiredKeys: [] },
    ),
    { nil: undefined },
  );

  it('reaches a fixpoint: after its own writes, the next pass writes nothing (property)', () => {
    fc.assert(
      fc.property(
        specs,
        specs,
        reports,
        fc.boolean(),
        qualities,
        (first, second, edgeReport, ready, quality) => {
          let state = started(specOf(first));
          if (ready) rollOut(state);
          if (edgeReport !== undefined) report(state, edgeReport);
          if (quality !== undefined) reportQuality(state, quality);
          state.service = {
            ...state.service,
            spec: specOf(second),
            metadata: { ...state.service.metadata, generation: 2 },
          };
          // The same world with no quality report: drift is information, so the service comes
          // out exactly as ready as it would without it.
          const bare = structuredClone(state);
          if (bare.service.status !== undefined) delete bare.service.status.quality;
          state = applyTo(state, pass(state, later));
          const next = pass(state, new Date(later.getTime() + 1000));
          expect(writes(next)).toEqual([]);
          expect(next).toEqual([]);
          const bareState = applyTo(bare, pass(bare, later));
          expect(conditionOf(state, 'Ready')).toEqual(conditionOf(bareState, 'Ready'));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('leaves no worker restarting once Knative has readied every write (property)', () => {
    fc.assert(
      fc.property(specs, specs, reports, reports, (first, second, edgeReport, cloudReport) => {
        let state = started(specOf(first));
        rollOut(state);
        if (edgeReport !== undefined) report(state, edgeReport);
        if (cloudReport !== undefined) report(state, cloudReport, 'cloud');
        state.service = {
          ...state.service,
          spec: specOf(second),
          metadata: { ...state.service.metadata, generation: 2 },
        };
        state = applyTo(state, pass(state, later));
        rollOut(state);
        state = applyTo(state, pass(state, new Date(later.getTime() + 1000)));
        expect(conditionOf(state, 'Restarting')?.status).not.toBe('True');
        expect(writes(pass(state, new Date(later.getTime() + 2000)))).toEqual([]);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('DataDrift', () => {
  const now = new Date('2026-11-22T10:00:00Z');
  const later = new Date('2026-11-22T10:00:05Z');
  type State = { service: ServiceObject; workers: Partial<Record<Role, KubeObject>> };
  const pass = (state: State, at: Date): Action[] =>
    reconcile(state, desiredState(state.service, models, nodes, settings), at, options);
  /** A service whose workers are both ready, after the pass that saw them so. */
  const serving = (): State => {
    const first: State = { service: service(baseSpec), workers: {} };
    const state = applyTo(first, pass(first, now));
    for (const w of Object.values(state.workers)) {
      w['status'] = {
        observedGeneration: w.metadata.generation,
        conditions: [{ type: 'Ready', status: 'True' }],
      };
    }
    return applyTo(state, pass(state, now));
  };
  const quality = (drift: Record<string, unknown>) => ({
    estimatedEdgeAccuracy: 0.9,
    estimatedJointLoss: 1.2,
    reportTime: '2026-11-22T10:00:02.000Z',
    ...drift,
  });
  const reportQuality = (state: State, q: Record<string, unknown>) => {
    state.service.status = { ...state.service.status, quality: q };
  };
  const conditionOf = (state: State, type: string) =>
    state.service.status?.conditions?.find((c) => c.type === type);
  const eventsOf = (actions: readonly Action[]) =>
    actions.flatMap((a) => (a.kind === 'event' ? [`${a.type} ${a.reason}: ${a.message}`] : []));
  const drifting = {
    driftScore: 7.2,
    driftThreshold: 3.1,
    drifting: true,
    driftWindow: 1000,
    outlierShare: 0.31,
  };
  const settled = {
    driftScore: 1.23456,
    driftThreshold: 3.1,
    drifting: false,
    driftWindow: 1000,
    outlierShare: 0.04,
  };

  it('is absent while no drift test was reported, with or without other estimates', () => {
    let state = serving();
    expect(conditionOf(state, 'DataDrift')).toBeUndefined();
    reportQuality(state, quality({}));
    const actions = pass(state, later);
    expect(writes(actions)).toEqual([]);
    state = applyTo(state, actions);
    expect(conditionOf(state, 'DataDrift')).toBeUndefined();
  });

  it('is True with the figures while drifting (a Warning), False when it clears (Normal), Ready throughout', () => {
    let state = serving();
    expect(conditionOf(state, 'Ready')?.status).toBe('True');
    reportQuality(state, quality(drifting));
    const raised = pass(state, later);
    expect(eventsOf(raised)).toEqual([
      'Warning DataDrift: drift score 7.2 above threshold 3.1 over the last 1000 inputs (outlier share 0.31)',
    ]);
    state = applyTo(state, raised);
    expect(conditionOf(state, 'DataDrift')).toEqual({
      type: 'DataDrift',
      status: 'True',
      reason: 'InputDrift',
      message: 'drift score 7.2 above threshold 3.1 over the last 1000 inputs (outlier share 0.31)',
      lastTransitionTime: later.toISOString(),
    });
    expect(conditionOf(state, 'Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(writes(pass(state, later))).toEqual([]);

    // Still drifting, by another figure: the message follows, no new event, no transition.
    reportQuality(state, quality({ ...drifting, driftScore: 9.87654 }));
    const moved = pass(state, new Date(later.getTime() + 1000));
    expect(eventsOf(moved)).toEqual([]);
    state = applyTo(state, moved);
    expect(conditionOf(state, 'DataDrift')).toMatchObject({
      status: 'True',
      message:
        'drift score 9.88 above threshold 3.1 over the last 1000 inputs (outlier share 0.31)',
      lastTransitionTime: later.toISOString(),
    });

    reportQuality(state, quality(settled));
    const cleared = pass(state, new Date(later.getTime() + 2000));
    expect(eventsOf(cleared)).toEqual([
      'Normal NoDrift: drift score 1.23 below threshold 3.1 over the last 1000 inputs (outlier share 0.04)',
    ]);
    state = applyTo(state, cleared);
    expect(conditionOf(state, 'DataDrift')).toMatchObject({
      status: 'False',
      reason: 'NoDrift',
      message:
        'drift score 1.23 below threshold 3.1 over the last 1000 inputs (outlier share 0.04)',
    });
    expect(conditionOf(state, 'Ready')).toMatchObject({ status: 'True', reason: 'Ready' });
    expect(writes(pass(state, new Date(later.getTime() + 3000)))).toEqual([]);
  });

  it('says nothing of a first report that finds no drift', () => {
    let state = serving();
    reportQuality(state, quality(settled));
    const actions = pass(state, later);
    expect(eventsOf(actions)).toEqual([]);
    state = applyTo(state, actions);
    expect(conditionOf(state, 'DataDrift')).toMatchObject({ status: 'False', reason: 'NoDrift' });
  });

  it('does not make Ready True either: a service not yet serving stays so while drifting', () => {
    const first: State = { service: service(baseSpec), workers: {} };
    let state = applyTo(first, pass(first, now));
    reportQuality(state, quality(drifting));
    state = applyTo(state, pass(state, later));
    expect(conditionOf(state, 'DataDrift')?.status).toBe('True');
    expect(conditionOf(state, 'Ready')).toMatchObject({ status: 'Unknown', reason: 'Deploying' });
  });

  it('names only the figures reported, and goes Unknown when the drift test stops', () => {
    let state = serving();
    reportQuality(state, quality({ driftScore: 250.4, drifting: true }));
    state = applyTo(state, pass(state, later));
    expect(conditionOf(state, 'DataDrift')).toMatchObject({
      status: 'True',
      message: 'drift score 250',
    });
    reportQuality(state, quality({}));
    const stopped = pass(state, new Date(later.getTime() + 1000));
    expect(eventsOf(stopped)).toEqual([]);
    state = applyTo(state, stopped);
    expect(conditionOf(state, 'DataDrift')).toMatchObject({
      status: 'Unknown',
      reason: 'NoDriftReport',
    });
    expect(writes(pass(state, new Date(later.getTime() + 2000)))).toEqual([]);
  });
});

describe('desiredState: the accuracy objective reaches the edge worker', () => {
  /** The edge worker's plain environment variables. */
  const edgeEnv = (offload: Record<string, unknown> | undefined) => {
    const spec = { ...baseSpec, edgeWorker: { ...baseSpec.edgeWorker, offload } };
    const desired = desiredState(service(spec), models, nodes, settings);
    if (!desired.valid) throw new Error(desired.message);
    const container = (
      desired.workers.edge['spec'] as {
        template: { spec: { containers: Array<{ env: Array<{ name: string; value?: string }> }> } };
      }
    ).template.spec.containers[0]!;
    return Object.fromEntries(container.env.map((e) => [e.name, e.value]));
  };

  it('as ACCURACY_OBJECTIVE and SHADOW_RATE, only when the spec sets them', () => {
    expect(edgeEnv({ accuracyObjective: 2.5, shadowRate: 0.1 })).toMatchObject({
      ACCURACY_OBJECTIVE: '2.5',
      SHADOW_RATE: '0.1',
    });
    const objectiveOnly = edgeEnv({ accuracyObjective: 0 });
    expect(objectiveOnly['ACCURACY_OBJECTIVE']).toBe('0');
    expect(objectiveOnly).not.toHaveProperty('SHADOW_RATE');
    for (const offload of [undefined, { mode: 'sync' }]) {
      expect(edgeEnv(offload)).not.toHaveProperty('ACCURACY_OBJECTIVE');
      expect(edgeEnv(offload)).not.toHaveProperty('SHADOW_RATE');
    }
  });

  it.each([
    [{ accuracyObjective: 101 }, /^spec\.edgeWorker\.offload\.accuracyObjective: Too big/],
    [{ accuracyObjective: -1 }, /^spec\.edgeWorker\.offload\.accuracyObjective: Too small/],
    [{ shadowRate: 1.5 }, /^spec\.edgeWorker\.offload\.shadowRate: Too big/],
  ])('refuses %o as an invalid spec', (offload, message) => {
    const spec = { ...baseSpec, edgeWorker: { ...baseSpec.edgeWorker, offload } };
    const desired = desiredState(service(spec), models, nodes, settings);
    expect(desired).toMatchObject({ valid: false, reason: 'InvalidSpec' });
    expect(!desired.valid && desired.message).toMatch(message);
  });
});

describe('desiredState refuses names Kubernetes would refuse', () => {
  const longNode = 'n'.repeat(64);
  const allNodes = new Map([
    ...nodes,
    [longNode, node(longNode)],
    ['n'.repeat(63), node('n'.repeat(63))],
  ]);
  const named = (name: string, spec: Record<string, unknown> = baseSpec): ServiceObject => ({
    ...service(spec),
    metadata: { ...service(spec).metadata, name },
  });

  it.each(['cam.v2', '2cams'])(
    'a service named %s (its worker Services would not be DNS-1035 labels)',
    (name) => {
      const desired = desiredState(named(name), models, allNodes, settings);
      expect(desired).toMatchObject({ valid: false, reason: 'InvalidSpec' });
      expect(!desired.valid && desired.message).toContain(`metadata.name: "${name}"`);
      const actions = reconcile(
        { service: named(name), workers: {} },
        desired,
        new Date(0),
        options,
      );
      expect(actions.some((a) => a.kind === 'create' || a.kind === 'update')).toBe(false);
      const status = actions.find((a) => a.kind === 'status')?.status as ServiceObject['status'];
      expect(status?.conditions?.find((c) => c.type === 'Created')).toMatchObject({
        status: 'False',
        reason: 'InvalidSpec',
      });
    },
  );

  it('a nodeName longer than a label value (kubernetes.io/hostname) is 63 characters', () => {
    const pinned = (nodeName: string) =>
      desiredState(
        named('demo', { ...baseSpec, cloudWorker: { ...baseSpec.cloudWorker, nodeName } }),
        models,
        allNodes,
        settings,
      );
    const refused = pinned(longNode);
    expect(refused).toMatchObject({ valid: false, reason: 'InvalidSpec' });
    expect(!refused.valid && refused.message).toMatch(
      /^spec\.cloudWorker\.nodeName: at most 63 characters/,
    );
    expect(pinned('n'.repeat(63)).valid).toBe(true);
  });

  it('accepts DNS-1035 names (property)', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z]([-a-z0-9]{0,49}[a-z0-9])?$/), (name) => {
        expect(desiredState(named(name), models, allNodes, settings).valid).toBe(true);
      }),
    );
  });
});
