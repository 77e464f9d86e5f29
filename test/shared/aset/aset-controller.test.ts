/** The ASET controller: onnxruntime decides as the trainer's network does, for its topology only. */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createAsetController,
  createDeployedController,
} from '../../../shared/aset/aset-controller.js';
import type { NetworkCard } from '../../../shared/aset/network-card.js';
import { DqnAgent, exportQNetwork } from '../../../research/aset/learn/dqn.js';
import { loadScenario } from '../../../shared/aset/scenario.js';
import type { Scenario } from '../../../shared/aset/scenario.js';
import { createSimulation } from '../../../research/aset/sim/simulator.js';
import { encodeState, stateSize } from '../../../shared/aset/state.js';
import { policyNames } from '../../../shared/aset/types.js';
import { constantLambda } from '../../../research/aset/sim/workload.js';

const dataDir = new URL('../../../data/aset/', import.meta.url);

describe('ASET controller', () => {
  let scenario: Scenario;
  let agent: DqnAgent;
  beforeAll(async () => {
    scenario = await loadScenario(dataDir, 'dc-cloud');
    agent = new DqnAgent({
      stateSize: stateSize(scenario.topology),
      actions: policyNames.length,
      hidden: [16],
      seed: 3,
    });
  });

  it('picks the greedy policy of the exported network on simulated windows', async () => {
    const controller = await createAsetController({
      model: exportQNetwork(agent),
      topology: scenario.topology,
    });
    const simulation = createSimulation({
      topology: scenario.topology,
      apps: scenario.apps,
      lambda: constantLambda(60),
      seed: 11,
    });
    try {
      expect(policyNames).toContain(await controller.choose(undefined));
      for (let w = 1; w <= 4; w += 1) {
        simulation.runUntil(w * 25_000);
        const window = simulation.takeWindow();
        const chosen = await controller.choose(window);
        const state = encodeState(scenario.topology, window);
        expect(chosen).toBe(policyNames[agent.greedy(state)]);
        const q = agent.qValues(state);
        controller.lastQ!.forEach((v, i) => expect(v).toBeCloseTo(q[i]!, 4));
        simulation.setPolicy(chosen);
      }
    } finally {
      await controller.close();
    }
  });

  it('deploys what the card says: the network, or the static policy that beat it', async () => {
    const model = exportQNetwork(agent);
    const card = (deployed: NetworkCard['deployed']): NetworkCard => ({
      sha256: '',
      scenarioSha256: '',
      deployed,
      settings: { trainingSeeds: 50 },
    });
    const fixed = await createDeployedController({
      network: { model, card: card({ kind: 'static', policy: 'cheaper', success: 0.4 }) },
      topology: scenario.topology,
    });
    const simulation = createSimulation({
      topology: scenario.topology,
      apps: scenario.apps,
      lambda: constantLambda(60),
      seed: 12,
    });
    expect(await fixed.choose(undefined)).toBe('cheaper');
    simulation.runUntil(25_000);
    expect(await fixed.choose(simulation.takeWindow())).toBe('cheaper');
    expect(fixed.lastQ).toBeUndefined();
    await fixed.close();
    const learned = await createDeployedController({
      network: { model, card: card({ kind: 'network', episodes: 10, success: 0.4 }) },
      topology: scenario.topology,
    });
    try {
      expect(await learned.choose(undefined)).toBe(
        policyNames[agent.greedy(encodeState(scenario.topology, undefined))],
      );
      expect(learned.lastQ).toBeDefined();
    } finally {
      await learned.close();
    }
  });

  it('refuses a network trained for another topology', async () => {
    const fullEdge = await loadScenario(dataDir, 'full-edge');
    await expect(
      createAsetController({ model: exportQNetwork(agent), topology: fullEdge.topology }),
    ).rejects.toThrow(/topology full-edge needs \d+ -> 7 \(trained for another topology\?\)/);
  });
});
