/**
 * The plan of the aset-sim bench (issue 20's final table): its settings, and the conditions it
 * measures, each a topology, a load and a duration. Every run starts empty and is counted from
 * t = 0 (no warm-up): the paper plots "every moment of the simulation".
 */
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type { Load, TopologyName } from './jobs.js';

/** Final seeds 201..220: touched only for the final table (training 1..P, validation 51-56). */
const defaultFirstSeed = 201;
const defaultSeedCount = 20;
/** Seeds the threshold rule's x is chosen on (the networks' validation seeds, never 201-220). */
const validationSeeds = [51, 52, 53, 54, 55, 56] as const;
/**
 * The threshold rule's candidate edge utilisations, 0.1, 0.2, ..., 0.9. (It began at 0.3; the
 * first full run's validation chose 0.3 on dc-cloud and co-dc-cloud, the grid's edge, with the
 * means still rising towards it, so the grid was widened before any final figure was read.)
 */
const thresholdGrid = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9] as const;
const constantMs = 600_000;
/** Both patterns: 1,050 s (falling's seven steps of 150 s; burst runs as long). */
const patternMs = 1_050_000;
const sweepLambdas = [20, 40, 60, 80, 100] as const;
const sweepTopologies = ['co-dc-cloud', 'full-edge'] as const;
/** The oracle with lookahead 0 (greedy) and with 4 windows of lookahead. */
const oracleLookaheads = [0, 4] as const;

interface Settings {
  readonly staticOnly: boolean;
  readonly seeds: readonly number[];
  readonly validationSeeds: readonly number[];
  readonly workers: number;
  /** Where aset-<topology>.onnx are read from (default models/ of the checkout). */
  readonly models: URL;
  /** Also run both oracles on the lambda sweep (off by default: 5 x 7 x 2 oracle runs more). */
  readonly sweepOracles: boolean;
  /** Hidden smoke-test mode: every duration divided by 4, validation on 2 seeds. */
  readonly quick: boolean;
}

interface Condition {
  /** "full-edge-lambda-60", "full-edge-burst": the figures' names, snake-cased. */
  readonly id: string;
  readonly topology: TopologyName;
  readonly load: Load;
  readonly durationMs: number;
  /** Whether the greedy and the 4-window-lookahead oracles run here. */
  readonly oracles: boolean;
  /** Whether this is a lambda-sweep point (the sweep-worst figure). */
  readonly sweep: boolean;
}

function parseIntOption(value: string, name: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min)
    throw new RangeError(`--${name} must be an integer >= ${min}`);
  return n;
}

function settingsFrom(args: string[], root: URL): Settings {
  const { values } = parseArgs({
    args,
    options: {
      'static-only': { type: 'boolean', default: false },
      seeds: { type: 'string', default: String(defaultSeedCount) },
      'first-seed': { type: 'string', default: String(defaultFirstSeed) },
      workers: { type: 'string', default: String(Math.min(2, availableParallelism())) },
      models: { type: 'string' },
      'sweep-oracles': { type: 'boolean', default: false },
      quick: { type: 'boolean', default: false },
    },
  });
  const count = parseIntOption(values.seeds, 'seeds', 1);
  const first = parseIntOption(values['first-seed'], 'first-seed', 1);
  return {
    staticOnly: values['static-only'],
    seeds: Array.from({ length: count }, (_, i) => first + i),
    validationSeeds: values.quick ? validationSeeds.slice(0, 2) : validationSeeds,
    workers: parseIntOption(values.workers, 'workers', 0),
    models:
      values.models === undefined
        ? new URL('models/', root)
        : pathToFileURL(`${resolve(values.models)}/`),
    sweepOracles: values['sweep-oracles'],
    quick: values.quick,
  };
}

const loadKey = (load: Load) =>
  load.kind === 'constant'
    ? `lambda-${load.lambda}`
    : load.kind === 'random'
      ? 'random'
      : load.name;

/**
 * lambda = 60 on the three topologies, the sweep 20..100 on co-dc-cloud and full-edge (its
 * lambda-60 points are the lambda-60 conditions), and both patterns on full-edge.
 */
function conditionsOf(settings: Settings): Condition[] {
  const scale = settings.quick ? 0.25 : 1;
  const of = (topology: TopologyName, load: Load, sweep: boolean): Condition => {
    const lambda60 = load.kind === 'constant' && load.lambda === 60;
    return {
      id: `${topology}-${loadKey(load)}`,
      topology,
      load,
      durationMs: Math.round((load.kind === 'pattern' ? patternMs : constantMs) * scale),
      oracles: load.kind === 'pattern' || lambda60 || settings.sweepOracles,
      sweep,
    };
  };
  const list: Condition[] = [of('dc-cloud', { kind: 'constant', lambda: 60 }, false)];
  for (const topology of sweepTopologies) {
    for (const lambda of sweepLambdas) list.push(of(topology, { kind: 'constant', lambda }, true));
  }
  for (const name of ['burst', 'falling'] as const) {
    list.push(of('full-edge', { kind: 'pattern', name }, false));
  }
  return list;
}

/** The validation runs' duration (600 s, a quarter of it with --quick). */
const validationMs = (settings: Settings) => (settings.quick ? constantMs / 4 : constantMs);

export { conditionsOf, oracleLookaheads, settingsFrom, thresholdGrid, validationMs };
export type { Condition, Settings };
