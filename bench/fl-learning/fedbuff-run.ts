/**
 * FedBuff's condition: `fedavg-iid`'s local training at the rate its grid chose, asynchronous
 * (asynchronous.ts runFedBuff), against that condition's own synchronous run put on the same
 * simulated clock (the rounds are deterministic, so its round r trained exactly the selection
 * synchronousClock times). Same seed, same clients, same speeds.
 */
import type { Split } from '../../shared/training/data.js';
import { runFedBuff, synchronousClock, timeToTarget, trainerSpeeds } from './asynchronous.js';
import type { AsyncResult, TimedPoint } from './asynchronous.js';
import { roundsToTarget } from './curves.js';
import type { ConditionResult } from './execute.js';
import type { FedBuffSummary } from './figures.js';
import type { RunDeps } from './run.js';
import type { Settings } from './settings.js';
import { algorithmFor, federationFor } from './setup.js';

interface AsyncComparison {
  readonly result: AsyncResult;
  readonly summary: FedBuffSummary;
  /** The synchronous run's curve on the simulated clock. */
  readonly syncCurve: readonly TimedPoint[];
  /** The synchronous run's rounds to the target (undefined: not reached). */
  readonly syncRounds: number | undefined;
  /** The synchronous clock at the synchronous run's last round. */
  readonly syncCapTime: number;
  readonly rate: number;
  readonly ms: number;
}

interface AsyncDeps {
  readonly train: RunDeps['train'];
  readonly evaluate: RunDeps['evaluate'];
  readonly trainSplit: Split;
  readonly progress: (line: string) => void;
}

/** Runs FedBuff against `sync` (the `fedavg-iid` result) under `settings.fedbuff`. */
async function runAsyncComparison(
  sync: ConditionResult,
  settings: Settings,
  target: number,
  deps: AsyncDeps,
): Promise<AsyncComparison> {
  const started = performance.now();
  const federation = federationFor(deps.trainSplit, sync.condition.split, settings);
  const names = federation.clients.map((c) => c.name);
  const { fedbuff } = settings;
  const speeds = trainerSpeeds(names, fedbuff.slowest, settings.seed);
  const ends = synchronousClock(names, federation.select, speeds, sync.rounds);
  const timeOf = (round: number) => (round === 0 ? 0 : (ends[round - 1] ?? NaN));
  const syncCurve = sync.curve.map((p) => ({ ...p, time: timeOf(p.round) }));
  const algorithm = algorithmFor(sync.condition, sync.rate, settings.seed);
  const result = await runFedBuff(
    {
      clients: federation.clients,
      initialModel: federation.initialModel,
      local: algorithm.local,
      speeds,
      bufferSize: fedbuff.bufferSize,
      maxStaleness: fedbuff.maxStaleness,
      concurrency: fedbuff.concurrency,
      serverLr: fedbuff.serverLr,
      seed: settings.seed,
      maxSteps: fedbuff.maxSteps,
      target,
    },
    {
      train: deps.train,
      evaluate: deps.evaluate,
      onPoint: (p) => {
        if (p.round % 25 === 0 && p.round > 0) {
          deps.progress(
            `fedbuff step ${p.round} at time ${p.time.toFixed(1)}: ${(100 * p.accuracy).toFixed(2)}%`,
          );
        }
      },
    },
  );
  const { staleness } = result;
  const summary: FedBuffSummary = {
    syncTime: timeToTarget(syncCurve, target),
    asyncTime: timeToTarget(result.curve, target),
    steps: result.steps,
    refused: result.refused.length,
    received: result.received,
    meanStaleness:
      staleness.length === 0 ? 0 : staleness.reduce((a, b) => a + b, 0) / staleness.length,
  };
  return {
    result,
    summary,
    syncCurve,
    syncRounds: roundsToTarget(sync.curve, target),
    syncCapTime: timeOf(sync.rounds),
    rate: sync.rate,
    ms: performance.now() - started,
  };
}

export { runAsyncComparison };
export type { AsyncComparison };
