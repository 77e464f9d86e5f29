/**
 * bench/fl-learning's in-process rounds: a round is fedAvg over localTrain's updates of the
 * selected clients from the global model's bytes (checked against the same modules called by
 * hand), bit-identical across runs and whatever order the updates come back in, ended by non-finite
 * weights; and a resumable run stops where its rule says, continuing exactly as a fresh run.
 */
import { describe, expect, it } from 'vitest';
import { buildClients, initialModel, subset } from '../../../bench/fl-learning/federation.js';
import { startRun } from '../../../bench/fl-learning/run.js';
import { jobSelector } from '../../../bench/fl-learning/setup.js';
import {
  fedAvgStep,
  federatedRounds,
  inProcessTrainer,
  roundDigests,
  strategyStep,
  weightsDigest,
} from '../../../bench/fl-learning/simulate.js';
import type { Algorithm, Federation, TrainRound } from '../../../bench/fl-learning/simulate.js';
import { fedAvg } from '../../../shared/fl/fedavg.js';
import { aggregate } from '../../../shared/fl/strategy/aggregate.js';
import { initialState } from '../../../shared/fl/strategy/state.js';
import { fedOptDefaults } from '../../../shared/messages/federated.js';
import { evaluate, localTrain } from '../../../shared/fl/local-train.js';
import { layers, syntheticSplit } from './synthetic.js';
import { readInitializers, replaceInitializers } from '../../../shared/training/onnx-export.js';

const data = syntheticSplit();

function federation(seed = 1): Federation {
  return {
    clients: buildClients(data.y, 'iid', 6, seed),
    initialModel: initialModel(layers, 'tiny', seed),
    select: jobSelector(0.5, seed),
  };
}

const algorithm: Algorithm = {
  local: { epochs: 2, batchSize: 5, learningRate: 0.1, seed: 3 },
  server: fedAvgStep,
};

const train = inProcessTrainer(data, layers);

describe('federatedRounds', () => {
  it('averages the selected clients localTrain updates as the aggregator does', async () => {
    const fed = federation();
    const rounds = federatedRounds(fed, algorithm, train);
    const first = (await rounds.next()).value;
    await rounds.return(undefined);
    if (first === undefined || first.kind !== 'model') throw new Error('round 1 gave no model');
    const selected = fed.select(
      fed.clients.map((c) => c.name),
      1,
    );
    expect(first.selected).toEqual(selected);
    expect(selected).toHaveLength(3);
    const updates = selected.map((worker) => {
      const client = fed.clients.find((c) => c.name === worker);
      const u = localTrain(
        fed.initialModel,
        layers,
        subset(data, client?.indices ?? []),
        algorithm.local,
      );
      return { worker, samples: u.samples, weights: u.weights };
    });
    const mean = fedAvg(readInitializers(fed.initialModel), updates);
    expect(weightsDigest(first.weights)).toBe(weightsDigest(mean));
    expect(first.model).toEqual(replaceInitializers(fed.initialModel, mean));
    expect(weightsDigest(readInitializers(first.model))).toBe(weightsDigest(mean));
  });

  it('gives bit-identical weights every run and whatever order the updates arrive in', async () => {
    const reversed: TrainRound = async (model, tasks) => (await train(model, tasks)).reverse();
    const a = await roundDigests(federation(), algorithm, train, 4);
    const b = await roundDigests(federation(), algorithm, reversed, 4);
    expect(a).toHaveLength(4);
    expect(new Set(a).size).toBe(4);
    expect(b).toEqual(a);
    expect(await roundDigests(federation(2), algorithm, train, 4)).not.toEqual(a);
  });

  it('applies the corrupt hook before the server step', async () => {
    const zeroed: Algorithm = {
      ...algorithm,
      corrupt: (updates) =>
        updates.map((u, i) =>
          i > 0
            ? u
            : {
                ...u,
                weights: new Map(
                  [...u.weights].map(([k, t]) => [
                    k,
                    { dims: t.dims, values: new Float32Array(t.values.length) },
                  ]),
                ),
              },
        ),
    };
    const honest = await roundDigests(federation(), algorithm, train, 1);
    expect(await roundDigests(federation(), zeroed, train, 1)).not.toEqual(honest);
  });

  it('ends after a round whose training gave non-finite weights', async () => {
    const broken: TrainRound = async (model, tasks) =>
      (await train(model, tasks)).map((u, i) =>
        i === 1
          ? {
              ...u,
              weights: new Map(
                [...u.weights].map(([k, t]) => [
                  k,
                  { dims: t.dims, values: t.values.map(() => NaN) },
                ]),
              ),
            }
          : u,
      );
    const outcomes = [];
    for await (const o of federatedRounds(federation(), algorithm, broken)) outcomes.push(o);
    expect(outcomes).toHaveLength(1);
    expect(outcomes[0]).toMatchObject({ kind: 'diverged', round: 1 });
    expect(await roundDigests(federation(), algorithm, broken, 3)).toEqual([]);
  });
});

describe('strategyStep', () => {
  it('steps as the aggregator does, carrying a server optimizer state from round to round', async () => {
    const fedAdam = { ...fedOptDefaults.fedadam, eta: 0.01 };
    const rounds = federatedRounds(
      federation(),
      { ...algorithm, server: strategyStep(fedAdam) },
      train,
    );
    const got = [];
    for (let r = 0; r < 2; r += 1) {
      const next = (await rounds.next()).value;
      if (next === undefined || next.kind !== 'model')
        throw new Error(`round ${r + 1} gave no model`);
      got.push(next);
    }
    await rounds.return(undefined);
    const fed = federation();
    let base = readInitializers(fed.initialModel);
    let model = fed.initialModel;
    let state = initialState;
    for (const [r, outcome] of got.entries()) {
      const updates = outcome.selected.map((worker) => {
        const client = fed.clients.find((c) => c.name === worker);
        const u = localTrain(model, layers, subset(data, client?.indices ?? []), algorithm.local);
        return { worker, samples: u.samples, weights: u.weights };
      });
      const step = aggregate(fedAdam, base, updates, state, r + 1);
      state = step.state;
      base = step.weights;
      model = replaceInitializers(model, base);
      expect(weightsDigest(outcome.weights)).toBe(weightsDigest(base));
    }
    expect(state.kind).toBe('moments');
  });

  it('gives FedAvg the bytes of shared/fl/fedavg', () => {
    const fed = federation();
    const base = readInitializers(fed.initialModel);
    const updates = ['client-0', 'client-1'].map((worker, i) => ({
      worker,
      samples: 10 + i,
      weights: localTrain(fed.initialModel, layers, subset(data, [i, i + 6]), algorithm.local)
        .weights,
    }));
    expect(weightsDigest(fedAvgStep()(base, updates, 1))).toBe(
      weightsDigest(fedAvg(base, updates)),
    );
  });
});

describe('startRun', () => {
  const evaluateOn = (model: Uint8Array) => Promise.resolve(evaluate(model, layers, data));

  /** An evaluator scripted by round: the run's rounds are counted by its evaluations. */
  const scripted = (accuracies: readonly number[]) => {
    let calls = 0;
    return () => Promise.resolve({ accuracy: accuracies[calls++] ?? 0, loss: 0 });
  };

  it('stops at the first evaluated round at the target, or at the cap', async () => {
    const deps = { train, evaluate: scripted([0.1, 0.3, 0.6, 0.9, 0.95, 0.99]) };
    const run = await startRun(federation(), algorithm, deps);
    await run.advance({ target: 0.85, maxRounds: 10, minRounds: 0, evalEvery: 1 });
    expect(run.rounds).toBe(3);
    expect(run.curve.map((p) => p.round)).toEqual([0, 1, 2, 3]);
    await run.advance({ target: 0.85, maxRounds: 10, minRounds: 0, evalEvery: 1 });
    expect(run.rounds).toBe(3);
    const capped = await startRun(federation(), algorithm, { train, evaluate: scripted([]) });
    await capped.advance({ target: 0.85, maxRounds: 2, minRounds: 0, evalEvery: 1 });
    expect(capped.rounds).toBe(2);
  });

  it('runs on past the target to minRounds, evaluating every evalEvery and the rounds it may stop at', async () => {
    const run = await startRun(federation(), algorithm, {
      train,
      evaluate: scripted([0, 1, 1, 1, 1]),
    });
    await run.advance({ target: 0.5, maxRounds: 20, minRounds: 5, evalEvery: 3 });
    expect(run.rounds).toBe(5);
    expect(run.curve.map((p) => p.round)).toEqual([0, 3, 5]);
    await run.close();
  });

  it('continues exactly as a fresh run would go', async () => {
    const stop = { target: 2, minRounds: 0, evalEvery: 1 };
    const resumed = await startRun(federation(), algorithm, { train, evaluate: evaluateOn });
    await resumed.advance({ ...stop, maxRounds: 2 });
    await resumed.advance({ ...stop, maxRounds: 5 });
    const fresh = await startRun(federation(), algorithm, { train, evaluate: evaluateOn });
    await fresh.advance({ ...stop, maxRounds: 5 });
    expect(resumed.curve).toEqual(fresh.curve);
    expect(fresh.curve).toHaveLength(6);
  });
});
