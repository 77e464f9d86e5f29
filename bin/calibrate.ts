/**
 * `npm run calibrate -- --hem <Threshold|CrossEntropy|Margin> (--target-offload <share> |
 * --target-accuracy <share>)`: picks the miner's parameter on the validation split for an
 * offload budget or an accuracy goal, checks it on the held-out test split, and prints the
 * JointInferenceService fragment to use.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { outcomes, pick, score, sweep } from '../shared/inference/calibrate.js';
import { createMiner } from '../shared/inference/hem.js';
import { loadOnnxModel } from '../shared/inference/onnx-runtime.js';
import { classes, loadMnist } from '../shared/training/data.js';
import type { Split } from '../shared/training/data.js';

const keys = { Threshold: 'threshold', CrossEntropy: 'threshold', Margin: 'margin' } as const;
type Calibrated = keyof typeof keys;

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

const { values } = parseArgs({
  options: {
    hem: { type: 'string', default: 'Threshold' },
    'target-offload': { type: 'string' },
    'target-accuracy': { type: 'string' },
  },
});
const hem = values.hem;
if (!(hem in keys)) fail(`--hem must be one of ${Object.keys(keys).join(', ')} (got ${hem})`);
const name = hem as Calibrated;
const share = (flag: string, raw: string | undefined) => {
  const value = Number(raw);
  if (raw === undefined || !Number.isFinite(value) || value < 0 || value > 1) {
    fail(`${flag} must be a share in [0, 1] (got ${raw})`);
  }
  return value;
};
const target =
  values['target-offload'] !== undefined
    ? { maxOffload: share('--target-offload', values['target-offload']) }
    : values['target-accuracy'] !== undefined
      ? { minAccuracy: share('--target-accuracy', values['target-accuracy']) }
      : fail('give --target-offload or --target-accuracy');

const models = new URL('../../models/', import.meta.url);
async function outputs(file: string, split: Split): Promise<Float32Array> {
  const model = await loadOnnxModel(new Uint8Array(readFileSync(new URL(file, models))));
  try {
    return await model.run(split.x, split.n);
  } finally {
    await model.close();
  }
}

const data = loadMnist();
const judge = async (split: Split) =>
  outcomes(split.y, await outputs('edge.onnx', split), await outputs('cloud.onnx', split), classes);
const validation = await judge(data.validation);
const test = await judge(data.test);
const chosen = pick(sweep(name, keys[name], validation), validation.n, target);
if (chosen === undefined)
  fail(`no ${name} setting reaches ${JSON.stringify(target)} on the validation split`);
const onTest = score(createMiner(name, { [keys[name]]: chosen.parameter }), test);
const pct = (v: number) => `${(v * 100).toFixed(2)}%`;
process.stdout.write(
  [
    `${name} ${keys[name]} = ${chosen.parameter} (chosen on the validation split, ${validation.n} samples)`,
    `  validation: offload ${pct(chosen.hard / validation.n)}, joint accuracy ${pct(chosen.correct / validation.n)} (edge ${pct(validation.edgeCorrect / validation.n)}, cloud ${pct(validation.cloudCorrect / validation.n)})`,
    `  test:       offload ${pct(onTest.hard / test.n)}, joint accuracy ${pct(onTest.correct / test.n)} (edge ${pct(test.edgeCorrect / test.n)}, cloud ${pct(test.cloudCorrect / test.n)})`,
    'spec.edgeWorker fragment:',
    JSON.stringify({
      hardExampleAlgorithm: { name, parameters: { [keys[name]]: chosen.parameter } },
    }),
    '',
  ].join('\n'),
);
