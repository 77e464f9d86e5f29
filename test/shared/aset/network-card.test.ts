/** Trained networks are refused when they do not match what data/aset/ holds now. */
import { copyFileSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { readTrainedNetwork } from '../../../shared/aset/network-card.js';
import { loadScenario } from '../../../shared/aset/scenario.js';

const dataDir = new URL('../../../data/aset/', import.meta.url);
const modelsDir = new URL('../../../models/', import.meta.url);
const topologyNames = ['dc-cloud', 'co-dc-cloud', 'full-edge'];

/** A copy of the committed dc-cloud network and card, with the card edited by `edit`. */
function copied(edit: (card: Record<string, unknown>) => void = () => {}): URL {
  const dir = mkdtempSync(join(tmpdir(), 'edgeai-card-'));
  copyFileSync(new URL('aset-dc-cloud.onnx', modelsDir), join(dir, 'aset-dc-cloud.onnx'));
  const card = JSON.parse(readFileSync(new URL('aset-dc-cloud.json', modelsDir), 'utf8')) as Record<
    string,
    unknown
  >;
  edit(card);
  writeFileSync(join(dir, 'aset-dc-cloud.json'), JSON.stringify(card));
  return pathToFileURL(`${dir}/`);
}

describe('readTrainedNetwork', () => {
  it.each(topologyNames)(
    'accepts the committed %s network: it was trained on data/aset/',
    async (name) => {
      const { model, card } = readTrainedNetwork(modelsDir, await loadScenario(dataDir, name));
      expect(model.length).toBeGreaterThan(0);
      expect(card.settings.trainingSeeds).toBeGreaterThan(0);
    },
  );

  it('refuses a network trained on other data, naming the command that retrains it', async () => {
    const scenario = await loadScenario(dataDir, 'dc-cloud');
    const stale = copied((card) => (card['scenarioSha256'] = 'f'.repeat(64)));
    expect(() => readTrainedNetwork(stale, scenario)).toThrow(
      /trained on scenario f{64}, but data\/aset\/ now gives [0-9a-f]{64}: retrain with `npm run aset:train -- --topology dc-cloud`/,
    );
  });

  it('refuses a network that is not the one its card describes, and a card without its fields', async () => {
    const scenario = await loadScenario(dataDir, 'dc-cloud');
    const swapped = copied((card) => (card['sha256'] = '0'.repeat(64)));
    expect(() => readTrainedNetwork(swapped, scenario)).toThrow(
      /is not the network its card describes/,
    );
    const bare = copied((card) => delete card['scenarioSha256']);
    expect(() => readTrainedNetwork(bare, scenario)).toThrow(/scenarioSha256: /);
  });

  it('names a missing network', async () => {
    const empty = pathToFileURL(`${mkdtempSync(join(tmpdir(), 'edgeai-card-'))}/`);
    const scenario = await loadScenario(dataDir, 'full-edge');
    expect(() => readTrainedNetwork(empty, scenario)).toThrow(
      /aset-full-edge\.onnx is missing: retrain with/,
    );
  });
});
