/**
 * A trained ASET network and its card (`models/aset-<topology>.json`, written by
 * `npm run aset:train`). Whoever runs a network — the benchmark, the aset-scheduler function —
 * loads it here, so a network trained on other data than `data/aset/` holds now is refused
 * everywhere: a recalibration keeps the state's shape, so nothing else would notice.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';
import { scenarioFingerprint } from './scenario.js';
import type { Scenario } from './scenario.js';
import { policyNames } from './types.js';

const networkCard = z.object({
  /** sha256 of the ONNX file. */
  sha256: z.string(),
  /** What the network learned: scenarioFingerprint of its apps and topology. */
  scenarioSha256: z.string(),
  /** What runs (training.ts `Deployed`): the network, or a static policy that beat it. */
  deployed: z.discriminatedUnion('kind', [
    z.object({ kind: z.literal('network'), episodes: z.number().int(), success: z.number() }),
    z.object({ kind: z.literal('static'), policy: z.enum(policyNames), success: z.number() }),
  ]),
  settings: z.object({
    /** Episodes drew their seeds from 1..trainingSeeds. */
    trainingSeeds: z.number().int().positive(),
    /** Seeds the checkpoint was selected on. */
    validation: z.object({ seeds: z.array(z.number().int()) }).optional(),
  }),
});

type NetworkCard = z.infer<typeof networkCard>;

/** Reads `aset-<topology>.onnx` and its card from `models`, refusing any mismatch by name. */
function readTrainedNetwork(
  models: URL,
  scenario: Scenario,
): { model: Uint8Array; card: NetworkCard } {
  const topology = scenario.topology.name;
  const retrain = `retrain with \`npm run aset:train -- --topology ${topology}\``;
  const file = new URL(`aset-${topology}.onnx`, models);
  const cardFile = new URL(`aset-${topology}.json`, models);
  for (const needed of [file, cardFile]) {
    if (!existsSync(needed)) throw new Error(`${needed.pathname} is missing: ${retrain}`);
  }
  const parsed = networkCard.safeParse(JSON.parse(readFileSync(cardFile, 'utf8')));
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new Error(`${cardFile.pathname}: ${problems.join('; ')} (${retrain})`);
  }
  const card = parsed.data;
  const model = new Uint8Array(readFileSync(file));
  if (createHash('sha256').update(model).digest('hex') !== card.sha256) {
    throw new Error(`${file.pathname} is not the network its card describes: ${retrain}`);
  }
  const current = scenarioFingerprint(scenario);
  if (card.scenarioSha256 !== current) {
    throw new Error(
      `${cardFile.pathname}: trained on scenario ${card.scenarioSha256}, but data/aset/ now gives ${current}: ${retrain}`,
    );
  }
  return { model, card };
}

export { readTrainedNetwork };
export type { NetworkCard };
