/**
 * bench/fl-learning's federation: clients named as the functions name trainers, holding every
 * training sample once, and digits exactly as a trainer parses its own Dataset file.
 */
import { describe, expect, it } from 'vitest';
import {
  asDatasetFile,
  buildClients,
  digits,
  subset,
} from '../../../bench/fl-learning/federation.js';
import { parseDatasetCsv, writeDatasetCsv } from '../../../shared/fl/dataset-file.js';
import { loadMnist } from '../../../shared/training/data.js';
import { loadMnistFull } from '../../../shared/training/mnist-full.js';

describe('the federation', () => {
  it('gives 100 clients named client-<i> every training sample once', () => {
    const { train } = digits();
    for (const kind of ['iid', 'shards'] as const) {
      const clients = buildClients(train.y, kind, 100, 1);
      expect(clients.map((c) => c.name)).toEqual(
        Array.from({ length: 100 }, (_, i) => `client-${i}`),
      );
      const all = clients.flatMap((c) => c.indices).sort((a, b) => a - b);
      expect(all).toEqual(Array.from({ length: train.n }, (_, i) => i));
    }
  });

  it('gives each non-IID client two label-sorted shards: mostly one or two labels', () => {
    const { train } = digits();
    const clients = buildClients(train.y, 'shards', 100, 1);
    const labels = clients.map((c) => new Set(c.indices.map((i) => train.y[i])).size);
    // A shard is 35 consecutive samples of the label-sorted split, so the few that straddle a
    // label boundary hold two labels (as McMahan et al.'s do): at most 4 labels per client.
    expect(Math.max(...labels)).toBeLessThanOrEqual(4);
    expect(labels.filter((n) => n <= 2).length).toBeGreaterThanOrEqual(80);
  });

  it('holds a client exactly as its trainer parses its Dataset file', () => {
    const { train } = loadMnist();
    const indices = buildClients(train.y, 'shards', 100, 1)[7]?.indices ?? [];
    const file = parseDatasetCsv(writeDatasetCsv(train, indices), { maxSamples: 1000 });
    expect(subset(asDatasetFile(train), indices)).toEqual(file);
    expect(subset(digits().train, indices)).toEqual(file);
    // The package's own floats differ (3 decimals, not k/255): the simulation must not use them.
    expect(subset(train, indices).x).not.toEqual(file.x);
  });

  it('holds the full MNIST as Dataset files carry it, with no CSV round trip needed', () => {
    const full = digits('mnist-full');
    expect([full.train.n, full.test.n]).toEqual([60_000, 10_000]);
    expect(full.train).toBe(loadMnistFull().train);
    // No validation split in the full MNIST: the central baseline picks its epoch on the test.
    expect(full.validation).toBe(full.test);
    const clients = buildClients(full.train.y, 'iid', 100, 1);
    expect(clients.every((c) => c.indices.length === 600)).toBe(true);
    // One client's file, compared byte for byte (toEqual over 470,400 floats is slow under load).
    const indices = clients[57]?.indices ?? [];
    const file = parseDatasetCsv(writeDatasetCsv(full.train, indices), { maxSamples: 600 });
    const held = subset(full.train, indices);
    expect(held.y).toEqual(file.y);
    expect(Buffer.from(held.x.buffer).equals(Buffer.from(file.x.buffer))).toBe(true);
  });

  it("cuts the full MNIST's non-IID split as McMahan et al.: 200 shards of 300, two a client", () => {
    const { train } = digits('mnist-full');
    const clients = buildClients(train.y, 'shards', 100, 1);
    expect(clients.every((c) => c.indices.length === 600)).toBe(true);
    // Each shard is 300 consecutive digits of the label-sorted split; the few that straddle a
    // label boundary give their client a third label.
    const labels = clients.map((c) => new Set(c.indices.map((i) => train.y[i])).size);
    expect(Math.max(...labels)).toBeLessThanOrEqual(4);
    expect(labels.filter((n) => n <= 2).length).toBeGreaterThanOrEqual(80);
  });
});
