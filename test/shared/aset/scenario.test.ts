/** The ASET scenario files and their expansion into clusters, links and workers. */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import {
  durationScaleFor,
  durationScaleForEpisode,
  loadScenario,
  meanQueriesPerClient,
  parseApps,
  parseTopology,
  parseVariants,
  scenarioFingerprint,
} from '../../../shared/aset/scenario.js';
import { constantLambda, generateStreams } from '../../../research/aset/sim/workload.js';
import type { Topology } from '../../../shared/aset/types.js';

const dataDir = new URL('../../../data/aset/', import.meta.url);

const catalogueText = `
models:
  - { id: small, task: object-detection, accuracy: 20 }
  - { id: big, task: object-detection, accuracy: 50 }
variants:
  - id: cpu-small
    model: small
    batchSize: 1
    fixedDelayMs: 10
    maxDelayMs: 20
    delayDeviationMs: 1
    capacity: 40
    resources: { cpu: 2, memoryGiB: 1, accelerator: 0 }
  - id: gpu-big
    model: big
    batchSize: 4
    fixedDelayMs: 10
    maxDelayMs: 40
    delayDeviationMs: 2
    capacity: 90
    resources: { cpu: 1, memoryGiB: 3, accelerator: 0.5 }
`;

/** 4 antennas, 2 central offices of 2, one DC, one cloud; hop deviations chosen to be distinct. */
function topologyText(overrides: { accessVariants?: string; coFanIn?: number } = {}): string {
  return `
name: test-tree
paperAntennas: 8
accessPoints: 4
layers:
  access:
    fanIn: 1
    hop: { delayMs: 1, deviationMs: 0.3 }
    compute:
      realClusters: 8
      serversPerCluster: 1
      perServer: { cpu: 10, memoryGiB: 8, accelerator: 1 }
      variants: [${overrides.accessVariants ?? 'gpu-big, cpu-small'}]
  central-office:
    fanIn: ${overrides.coFanIn ?? 2}
    hop: { delayMs: 4, deviationMs: 0.4 }
  isp-dc:
    fanIn: 2
    hop: { delayMs: 6, deviationMs: 1.2 }
    compute:
      realClusters: 1
      serversPerCluster: 10
      perServer: { cpu: 4, memoryGiB: 16, accelerator: 1 }
      variants: [gpu-big]
  cloud:
    fanIn: 1
    hop: { delayMs: 25, deviationMs: 4 }
    compute:
      unlimited: true
      replicasPerVariant: 50
      variants: [cpu-small, gpu-big]
`;
}

function link(topology: Topology, scheduler: string, cluster: string) {
  const found = topology.schedulers.find((s) => s.id === scheduler)?.links[cluster];
  if (found === undefined) throw new Error(`no link ${scheduler} -> ${cluster}`);
  return found;
}

describe('parseTopology', () => {
  const catalogue = parseVariants(catalogueText);
  const topology = parseTopology(topologyText(), catalogue);

  it('expands layers into clusters and workers in a stable index order', () => {
    expect(topology.clusters.map((c) => c.id)).toEqual([
      'access-0',
      'access-1',
      'access-2',
      'access-3',
      'isp-dc-0',
      'cloud-0',
    ]);
    // Within a cluster the catalogue's order, not the file's: cpu-small before gpu-big.
    expect(topology.workers.map((w) => `${w.cluster.id}/${w.variant.id}`)).toEqual([
      'access-0/cpu-small',
      'access-0/gpu-big',
      'access-1/cpu-small',
      'access-1/gpu-big',
      'access-2/cpu-small',
      'access-2/gpu-big',
      'access-3/cpu-small',
      'access-3/gpu-big',
      'isp-dc-0/gpu-big',
      'cloud-0/cpu-small',
      'cloud-0/gpu-big',
    ]);
    expect(topology.workers.map((w) => w.index)).toEqual(topology.workers.map((_, i) => i));
    expect(topology.schedulers.map((s) => [s.id, s.cluster])).toEqual([
      ['ap-0', 'access-0'],
      ['ap-1', 'access-1'],
      ['ap-2', 'access-2'],
      ['ap-3', 'access-3'],
    ]);
  });

  it('sums hop delays along the tree and adds deviations in quadrature', () => {
    const close = (actual: { delayMs: number; deviationMs: number }, d: number, s2: number) => {
      expect(actual.delayMs).toBeCloseTo(d, 12);
      expect(actual.deviationMs).toBeCloseTo(Math.sqrt(s2), 12);
    };
    const [a, co, dc, cloud] = [0.3 ** 2, 0.4 ** 2, 1.2 ** 2, 4 ** 2];
    close(link(topology, 'ap-0', 'access-0'), 1, a);
    // Sibling under the same central office: up to it and down again.
    close(link(topology, 'ap-0', 'access-1'), 1 + 4 + 4, a + 2 * co);
    // Across central offices: up to the DC and down two hops.
    close(link(topology, 'ap-0', 'access-2'), 1 + 4 + 6 + 6 + 4, a + 2 * co + 2 * dc);
    close(link(topology, 'ap-3', 'access-2'), 1 + 4 + 4, a + 2 * co);
    close(link(topology, 'ap-2', 'isp-dc-0'), 1 + 4 + 6, a + co + dc);
    close(link(topology, 'ap-1', 'cloud-0'), 1 + 4 + 6 + 25, a + co + dc + cloud);
    // Links only to clusters that compute.
    expect(Object.keys(topology.schedulers[0]!.links).sort()).toEqual(
      topology.clusters.map((c) => c.id).sort(),
    );
  });

  it('scales the paper hardware to our antennas and fills clusters with replicas', () => {
    // Access: 8 real machines x (4 / 8 antennas) / 4 clusters = 1 machine each.
    const access = topology.clusters[0]!;
    expect(access.capacity).toEqual({ cpu: 10, memoryGiB: 8, accelerator: 1 });
    // cpu 10 split between two users (5 each), memory 8 (4 each), accelerator only gpu-big's.
    // cpu-small: min(5 / 2, 4 / 1) -> 2; gpu-big: min(5 / 1, 4 / 3, 1 / 0.5) -> 1.
    const [cpuSmall, gpuBig] = topology.workers;
    expect([cpuSmall!.replicas, gpuBig!.replicas]).toEqual([2, 1]);
    expect([cpuSmall!.capacity, gpuBig!.capacity]).toEqual([80, 90]);
    // DC: 10 servers x 0.5 = 5 servers: cpu 20, memory 80, accelerator 5 -> min(20, 26, 10).
    const dc = topology.workers.find((w) => w.cluster.id === 'isp-dc-0')!;
    expect(dc.cluster.capacity).toEqual({ cpu: 20, memoryGiB: 80, accelerator: 5 });
    expect(dc.replicas).toBe(10);
    const cloud = topology.workers.filter((w) => w.cluster.layer === 'cloud');
    expect(cloud.map((w) => w.replicas)).toEqual([50, 50]);
    expect(cloud[0]!.cluster.capacity.cpu).toBe(Infinity);
  });

  it('names the field of a bad topology', () => {
    expect(() => parseTopology(topologyText({ accessVariants: 'nope' }), catalogue)).toThrow(
      "topology.yaml: layers.access.compute.variants[0]: unknown variant 'nope'",
    );
    expect(() => parseTopology(topologyText({ coFanIn: 3 }), catalogue, 'x.yaml')).toThrow(
      'x.yaml: layers.central-office.fanIn',
    );
    const missing = topologyText().replace('      serversPerCluster: 10\n', '');
    expect(() => parseTopology(missing, catalogue)).toThrow(
      'topology.yaml: layers.isp-dc.compute.serversPerCluster: required unless unlimited',
    );
    const tooSmall = topologyText().replace('{ cpu: 10, memoryGiB: 8', '{ cpu: 10, memoryGiB: 4');
    expect(() => parseTopology(tooSmall, catalogue)).toThrow(
      "layers.access.compute.variants[1]: 'gpu-big' gets no replica",
    );
  });
});

describe('parseApps and parseVariants', () => {
  it('names the file and field of a bad entry', () => {
    const apps = `
streams: { sizeRange: [0.3, 1], transmissionMsPerSize: [1, 5], accessDelayMs: [1, 4] }
apps:
  - { name: pool, task: object-detection, maxDelayMs: [95, 95], frameRateFps: [20, 10],
      durationS: [5, 10], minAccuracy: 10 }
`;
    expect(() => parseApps(apps)).toThrow('apps.yaml: apps[0].frameRateFps: must be [min, max]');
    expect(() => parseApps('streams: {}\napps: []\n', 'a.yaml')).toThrow('a.yaml: streams.');
    const greedy = catalogueText.replace('capacity: 40', 'capacity: 150');
    expect(() => parseVariants(greedy)).toThrow('variants.yaml: variants[0].capacity: exceeds');
    const orphan = catalogueText.replace('model: small', 'model: nobody');
    expect(() => parseVariants(orphan)).toThrow("variants[0].model: unknown model 'nobody'");
    expect(() => parseVariants(': not yaml: [')).toThrow('variants.yaml: not YAML');
  });

  it('merges the shared stream ranges into apps unless an app overrides them', () => {
    const apps = parseApps(`
streams: { sizeRange: [0.3, 1], transmissionMsPerSize: [1, 5], accessDelayMs: [1, 4] }
apps:
  - { name: a, task: t, maxDelayMs: [10, 20], frameRateFps: [5, 5], durationS: [1, 3], minAccuracy: 1 }
  - { name: b, task: t, maxDelayMs: [10, 20], frameRateFps: [5, 5], durationS: [1, 3], minAccuracy: 1,
      accessDelayMs: [7, 8] }
`);
    expect(apps[0]!.accessDelayMs).toEqual([1, 4]);
    expect(apps[1]!.accessDelayMs).toEqual([7, 8]);
    expect(apps[1]!.sizeRange).toEqual([0.3, 1]);
  });
});

describe('the scenario data files', () => {
  it('parse, and the three topologies share one network with compute removed bottom up', async () => {
    const counts: Record<string, number> = {};
    for (const name of ['dc-cloud', 'co-dc-cloud', 'full-edge']) {
      const { topology, apps } = await loadScenario(dataDir, name);
      expect(topology.name).toBe(name);
      expect(topology.schedulers).toHaveLength(4);
      expect(apps).toHaveLength(10);
      counts[name] = topology.workers.length;
      // Same tree: the cloud is 36 ms one way from every antenna in every topology.
      for (const s of topology.schedulers) expect(s.links['cloud-0']!.delayMs).toBeCloseTo(36, 9);
    }
    // 4 access clusters x 3 variants, 2 central offices x 5, the DC's 4, the cloud's 3.
    expect(counts).toEqual({ 'dc-cloud': 7, 'co-dc-cloud': 17, 'full-edge': 29 });
    const { topology } = await loadScenario(dataDir, 'full-edge');
    // 0.8 of a 48-core server per central office: 20 offices x 20 servers x 4 / 1000 / 2.
    expect(topology.clusters.find((c) => c.id === 'central-office-0')!.capacity.cpu).toBeCloseTo(
      38.4,
      9,
    );
    expect(link(topology, 'ap-0', 'central-office-0').delayMs).toBeCloseTo(5, 9);
    expect(link(topology, 'ap-0', 'access-0').delayMs).toBeCloseTo(1, 9);
  });

  it('calibrates durations so lambda = 60 brings 1,000 queries/s per access point', async () => {
    const apps = parseApps(await readFile(new URL('apps.yaml', dataDir), 'utf8'));
    // Table I: mean over the ten apps of E[rate] * E[duration] (see the report in scenario.ts).
    expect(meanQueriesPerClient(apps)).toBeCloseTo(7950.75, 6);
    const scale = durationScaleFor(apps);
    expect(scale).toBeCloseTo(1000 / 7950.75, 12);
    expect(meanQueriesPerClient(apps, scale)).toBeCloseTo(1000, 9);
    expect(durationScaleFor(apps, 1000, 120)).toBeCloseTo(scale / 2, 12);
  });

  it('calibrates durations on an episode from empty: the offered load averaged over it', async () => {
    const apps = parseApps(await readFile(new URL('apps.yaml', dataDir), 'utf8'));
    const scale = durationScaleForEpisode(apps, 600);
    // Long streams are still running at 600 s, so the factor is milder than the steady state's.
    expect(scale).toBeGreaterThan(durationScaleFor(apps));
    expect(scale).toBeLessThan(1);
    // Against the workload itself: the queries its streams send in [0, 600 s), per access
    // point and second, over 20 seeds of 4 access points at lambda = 60.
    let sent = 0;
    for (let seed = 1; seed <= 20; seed += 1) {
      const arrivals = generateStreams(
        {
          apps,
          schedulers: ['a', 'b', 'c', 'd'],
          lambda: constantLambda(60),
          durationScale: scale,
          seed,
        },
        600_000,
      );
      for (const { atMs, stream } of arrivals) {
        const until = Math.min(600, atMs / 1000 + stream.durationS);
        sent += Math.max(0, until - atMs / 1000) * stream.rate;
      }
    }
    expect(sent / (20 * 4 * 600)).toBeGreaterThan(950);
    expect(sent / (20 * 4 * 600)).toBeLessThan(1050);
    // Over a very long episode almost every stream has ended: the steady-state factor.
    expect(durationScaleForEpisode(apps, 1e8)).toBeCloseTo(durationScaleFor(apps), 3);
  });

  it('refuses a topology name that could leave the data directory', async () => {
    await expect(loadScenario(dataDir, '../apps')).rejects.toThrow('must match');
    await expect(loadScenario(dataDir, 'Full-Edge')).rejects.toThrow('must match');
    await expect(loadScenario(dataDir, 'no-such')).rejects.toThrow(
      'topologies/no-such.yaml: cannot read',
    );
  });
});

describe('scenarioFingerprint', () => {
  it('is stable for the same data and changes with a capacity, a link or an app', async () => {
    const scenario = await loadScenario(dataDir, 'full-edge');
    const again = await loadScenario(dataDir, 'full-edge');
    const print = scenarioFingerprint(scenario);
    expect(print).toMatch(/^[0-9a-f]{64}$/);
    expect(scenarioFingerprint(again)).toBe(print);

    const [first, ...rest] = scenario.topology.workers;
    const recalibrated = {
      ...scenario,
      topology: {
        ...scenario.topology,
        workers: [{ ...first!, capacity: first!.capacity + 1 }, ...rest],
      },
    };
    expect(scenarioFingerprint(recalibrated)).not.toBe(print);

    const [s0, ...others] = scenario.topology.schedulers;
    const cloudLink = s0!.links['cloud-0']!;
    const slower = {
      ...scenario,
      topology: {
        ...scenario.topology,
        schedulers: [
          { ...s0!, links: { ...s0!.links, 'cloud-0': { ...cloudLink, deviationMs: 5 } } },
          ...others,
        ],
      },
    };
    expect(scenarioFingerprint(slower)).not.toBe(print);

    const [app, ...apps] = scenario.apps;
    const fewer = { ...scenario, apps: [{ ...app!, name: `${app!.name} 2` }, ...apps] };
    expect(scenarioFingerprint(fewer)).not.toBe(print);

    // The duration scaling apps.yaml states is part of the environment, and so is stating none.
    const shorter = {
      ...scenario,
      durationScaleSpec: { targetQps: 1000, lambda: 60, episodeS: 480 },
    };
    expect(scenarioFingerprint(shorter)).not.toBe(print);
    const { durationScaleSpec: _spec, ...unstated } = scenario;
    expect(scenarioFingerprint(unstated)).not.toBe(print);

    // The cloud's unlimited resources are part of the print, not JSON's null (which NaN is too).
    const cloud0 = scenario.topology.clusters.findIndex((c) => !Number.isFinite(c.capacity.cpu));
    expect(cloud0).toBeGreaterThanOrEqual(0);
    const bounded = {
      ...scenario,
      topology: {
        ...scenario.topology,
        clusters: scenario.topology.clusters.map((c, i) =>
          i === cloud0 ? { ...c, capacity: { ...c.capacity, cpu: Number.NaN } } : c,
        ),
      },
    };
    expect(scenarioFingerprint(bounded)).not.toBe(print);
  });
});
