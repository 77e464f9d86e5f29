/**
 * ASET's runs: the network in models/ of each topology, checked at start-up, and played in the
 * main thread (onnxruntime) on the final seeds of every condition of its topology. Where a static
 * policy was deployed instead of the network (it beat the network on validation), the network
 * still plays lambda = 60, to show what it lost.
 */
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runControlled } from '../../aset/sim/episode.js';
import { readTrainedNetwork } from '../../../shared/aset/network-card.js';
import type { Topology } from '../../../shared/aset/types.js';
import type { WindowController } from '../../../shared/aset/window.js';
import type { Condition, Settings } from './conditions.js';
import { optionsFor, scenarioFor, topologyNames } from './jobs.js';
import type { TopologyName } from './jobs.js';
import { progress } from './runs.js';
import type { AsetRunner, RunStore } from './runs.js';

type TrainedNetwork = ReturnType<typeof readTrainedNetwork>;
type Controller = WindowController & { close(): Promise<void> };

/** What the bench needs of aset-controller.ts, so a change there fails to compile here. */
interface AsetControllerModule {
  createAsetController(options: { model: Uint8Array; topology: Topology }): Promise<Controller>;
  createDeployedController(options: {
    network: TrainedNetwork;
    topology: Topology;
  }): Promise<Controller>;
}

/**
 * Stops before any work when a model is missing, was trained on other data than data/aset/ holds
 * now (readTrainedNetwork), or was trained or selected on an evaluation seed.
 */
async function trainedModel(
  models: URL,
  topology: TopologyName,
  seeds: readonly number[],
): Promise<TrainedNetwork> {
  const network = readTrainedNetwork(models, await scenarioFor(topology));
  const cardName = relative(process.cwd(), fileURLToPath(new URL(`aset-${topology}.json`, models)));
  const { trainingSeeds, validation } = network.card.settings;
  if (trainingSeeds >= Math.min(...seeds)) {
    throw new Error(
      `${cardName}: trained on seeds 1..${trainingSeeds}, which overlap the evaluation seeds from ${Math.min(...seeds)}`,
    );
  }
  if (validation !== undefined && validation.seeds.some((s) => seeds.includes(s))) {
    throw new Error(
      `${cardName}: selected on validation seeds ${validation.seeds.join(', ')}, which overlap the evaluation seeds`,
    );
  }
  return network;
}

async function trainedModels(settings: Settings): Promise<Map<TopologyName, TrainedNetwork>> {
  const models = new Map<TopologyName, TrainedNetwork>();
  for (const topology of topologyNames) {
    models.set(topology, await trainedModel(settings.models, topology, settings.seeds));
  }
  return models;
}

/** Plays `controller` on every seed of `conditions`, storing the runs under `runner`. */
async function play(
  controller: Controller,
  runner: AsetRunner,
  conditions: readonly Condition[],
  seeds: readonly number[],
  store: RunStore,
): Promise<void> {
  try {
    for (const condition of conditions) {
      for (const seed of seeds) {
        const options = await optionsFor({ ...condition, seed });
        const started = performance.now();
        const run = await runControlled(options, controller, {
          durationMs: condition.durationMs,
          warmupMs: 0,
        });
        const wallMs = performance.now() - started;
        store.set(
          condition.id,
          runner,
          seed,
          Promise.resolve({ ...run, wallMs, simulatedMs: condition.durationMs }),
        );
      }
    }
  } finally {
    await controller.close();
  }
}

/** Runs ASET (and the undeployed networks at lambda = 60) on every condition, in this thread. */
async function runAset(
  conditions: readonly Condition[],
  settings: Settings,
  models: ReadonlyMap<TopologyName, TrainedNetwork>,
  store: RunStore,
): Promise<void> {
  const aset: AsetControllerModule = await import('../../../shared/aset/aset-controller.js');
  for (const topology of topologyNames) {
    const mine = conditions.filter((c) => c.topology === topology);
    if (mine.length === 0) continue;
    const network = models.get(topology)!;
    const { topology: built } = await scenarioFor(topology);
    const deployed = await aset.createDeployedController({ network, topology: built });
    await play(deployed, 'aset', mine, settings.seeds, store);
    if (network.card.deployed.kind === 'static') {
      const raw = await aset.createAsetController({ model: network.model, topology: built });
      const lambda60 = mine.filter((c) => c.load.kind === 'constant' && c.load.lambda === 60);
      await play(raw, 'aset-network', lambda60, settings.seeds, store);
    }
    progress(`ASET on ${topology}: ${mine.length * settings.seeds.length} runs done`);
  }
}

export { runAset, trainedModels };
export type { TrainedNetwork };
