/**
 * `npm run aset:train -- --topology <name> [--episodes M] [--seed S] [--warmup-s W]
 * [--load constant|random]`: trains the ASET DQN on
 * the simulated topology (Algorithm 1, research/aset/learn/training.ts) with a progress bar, exports
 * the Q-network that scored best on the validation seeds to models/aset-<topology>.onnx, writes
 * models/aset-<topology>.json (settings, learning and validation curves, the static policies on
 * the same validation runs, and `deployed`: the network, or a static policy that beat it there)
 * and the plot
 * out/aset-learning-<topology>.svg. Deterministic for a seed: a rerun writes the same bytes.
 *
 * Episodes start empty and count from t = 0 (`--warmup-s 0`, the paper's protocol; round one
 * warmed up 120 s under random policies), at lambda = 60 or, with `--load random`, on a random
 * lambda schedule per episode; validation runs 10 minutes at lambda = 60 counted the same way.
 *
 * Seeds: training 1..50, validation 51..56 (checkpoint selection), and the bench evaluates on
 * 101 and up, which neither touches.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { SingleBar } from 'cli-progress';
import { writeLinePlot } from '../../bench/support/plot.js';
import { exportQNetwork } from '../aset/learn/dqn.js';
import { loadScenario, scenarioFingerprint } from '../../shared/aset/scenario.js';
import { stateSize } from '../../shared/aset/state.js';
import { trainAset } from '../aset/learn/training.js';
import type { EpisodeResult, TrainingOptions } from '../aset/learn/training.js';

const root = new URL('../../../', import.meta.url);
const dataDir = new URL('data/aset/', root);
const topologies = readdirSync(new URL('topologies/', dataDir))
  .filter((file) => file.endsWith('.yaml'))
  .map((file) => file.slice(0, -'.yaml'.length));

const { values } = parseArgs({
  options: {
    topology: { type: 'string' },
    episodes: { type: 'string', default: '300' },
    seed: { type: 'string', default: '1' },
    // The paper's episodes start empty and count from t = 0 (0); round one warmed up 120 s.
    'warmup-s': { type: 'string', default: '0' },
    load: { type: 'string', default: 'constant' },
  },
});
const topology = values.topology ?? '';
if (!topologies.includes(topology)) {
  process.stderr.write(`usage: npm run aset:train -- --topology <${topologies.join('|')}>\n`);
  process.exit(2);
}
const episodes = Number(values.episodes);
const seed = Number(values.seed);
const warmupMs = 1000 * Number(values['warmup-s']);
const load = values.load;
if (load !== 'constant' && load !== 'random') {
  process.stderr.write('--load must be constant (lambda 60, the paper) or random\n');
  process.exit(2);
}
if (!(warmupMs >= 0) || warmupMs % 25_000 !== 0) {
  process.stderr.write('--warmup-s must be a multiple of 25 (windows of T), >= 0\n');
  process.exit(2);
}
if (!Number.isInteger(episodes) || episodes < 1 || !Number.isInteger(seed)) {
  process.stderr.write('--episodes must be an integer >= 1 and --seed an integer\n');
  process.exit(2);
}

const scenario = await loadScenario(dataDir, topology);
const settings = {
  episodes,
  trainingSeeds: 50,
  seed,
  lambda: 60,
  load,
  windowMs: 25_000,
  horizonMs: 8 * 60_000,
  warmupMs,
  phi: 1,
  psi: 0,
  theta: 0.1,
  // As the bench counts: 10 minutes from empty, from t = 0 (or after the same warm-up).
  validation: { seeds: [51, 52, 53, 54, 55, 56], everyEpisodes: 10, durationMs: 600_000, warmupMs },
  dqn: {
    double: true,
    gamma: 0.9,
    hidden: [64, 32],
    learningRate: 5e-4,
    batchSize: 32,
    gradientSteps: 40,
    replayCapacity: 10_000,
    minReplay: 256,
    loss: 'huber' as const,
    epsilon: {
      decay: 'linear' as const,
      start: 1,
      end: 0.05,
      episodes: Math.round(episodes * 0.7),
    },
  },
} satisfies Omit<TrainingOptions, 'scenario'>;

const bar = new SingleBar({
  format: `aset ${topology} [{bar}] {value}/{total} episodes | eps {eps} | success {success}% (last 20: {recent}%) | loss {loss} | {duration_formatted}`,
  stream: process.stderr,
  hideCursor: true,
  // Redirected to a file or a CI log, it still reports: a line every 10 s (see onEpisode).
  noTTYOutput: true,
  notTTYSchedule: 10_000,
});
// cli-progress draws non-TTY lines from a timer, which never fires while the synchronous
// training loop holds the event loop; so the loop draws them itself.
const lineEveryMs = 10_000;
let lastLine = performance.now();
bar.start(episodes, 0, { eps: '1.00', success: '-', recent: '-', loss: '-' });
const started = performance.now();
const curve: EpisodeResult[] = [];
const percent = (v: number) => (v * 100).toFixed(1);
const { network, validations, selected, staticValidations, deployed } = trainAset({
  ...settings,
  scenario,
  onEpisode(result) {
    curve.push(result);
    const recent = curve.slice(-20);
    bar.increment(1, {
      eps: result.epsilon.toFixed(2),
      success: percent(result.success),
      recent: percent(recent.reduce((s, r) => s + r.success, 0) / recent.length),
      loss: Number.isNaN(result.loss) ? '-' : result.loss.toFixed(4),
    });
    if (!process.stderr.isTTY && performance.now() - lastLine >= lineEveryMs) {
      lastLine = performance.now();
      bar.render();
    }
  },
});
bar.stop();
const seconds = (performance.now() - started) / 1000;

const models = new URL('models/', root);
mkdirSync(models, { recursive: true });
const bytes = exportQNetwork(
  network,
  `aset-${topology}`,
  `ASET DQN for ${topology}, npm run aset:train`,
);
writeFileSync(new URL(`aset-${topology}.onnx`, models), bytes);
const summary = {
  file: `aset-${topology}.onnx`,
  topology,
  bytes: bytes.length,
  sha256: createHash('sha256').update(bytes).digest('hex'),
  scenarioSha256: scenarioFingerprint(scenario),
  stateSize: stateSize(scenario.topology),
  workers: scenario.topology.workers.length,
  trainingSeconds: Math.round(seconds),
  settings,
  selected,
  // What runs: this network, or the static policy that beat it on the validation runs.
  deployed,
  staticValidations: staticValidations.map((v) => ({
    policy: v.policy,
    success: Number(v.success.toFixed(5)),
  })),
  validations: validations.map((v) => ({
    episodes: v.episodes,
    success: Number(v.success.toFixed(5)),
  })),
  curve: curve.map((r) => ({
    episode: r.episode,
    seed: r.simulationSeed,
    epsilon: Number(r.epsilon.toFixed(4)),
    windows: r.windows,
    success: Number(r.success.toFixed(5)),
    return: Number(r.return.toFixed(4)),
    loss: Number.isNaN(r.loss) ? null : Number(r.loss.toFixed(6)),
  })),
};
writeFileSync(new URL(`aset-${topology}.json`, models), `${JSON.stringify(summary, null, 2)}\n`);

const window = 20;
const moving = curve.map((_, i) => {
  const part = curve.slice(Math.max(0, i - window + 1), i + 1);
  return { x: i + 1, y: (100 * part.reduce((s, r) => s + r.success, 0)) / part.length };
});
const plot = new URL(`out/aset-learning-${topology}.svg`, root);
await writeLinePlot(plot, {
  title: `ASET learning curve, ${topology} (lambda 60)`,
  xTitle: 'episode',
  yTitle: 'success of the episode (%)',
  markers: false,
  series: [
    { name: 'episode', points: curve.map((r, i) => ({ x: i + 1, y: 100 * r.success })) },
    { name: `moving average (${window})`, points: moving },
    {
      name: `greedy policy on validation seeds ${settings.validation.seeds[0]}-${settings.validation.seeds.at(-1)}`,
      points: validations.map((v) => ({ x: v.episodes, y: 100 * v.success })),
    },
  ],
});
process.stdout.write(
  `${JSON.stringify({ topology, episodes, seconds: Math.round(seconds), selected, deployed, sha256: summary.sha256, plot: plot.pathname })}\n`,
);
