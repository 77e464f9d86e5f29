/**
 * A graph's outlier node (seed 003's Outlier method): it scores the request and passes it on
 * unchanged, the score travelling with it (`mlgraph-outlier-score` on every later hop and on the
 * answer). The built-in one is the drift issue's detector (shared/inference/outlier.ts: how far
 * an input lies from the clean training inputs a drift reference was fitted on, the reference
 * `npm run models` writes beside each model); a node with a `url` asks that scorer instead.
 */
import { ValidationError } from '../errors/index.js';
import { loadModelBytes } from '../inference/model-source.js';
import { createOutlierScorer, parseDriftReference } from '../inference/outlier.js';
import type { DriftReference } from '../inference/outlier.js';
import { parseInferRequest } from '../inference/protocol.js';
import type { Datatype, TensorSpec } from '../inference/tensor.js';
import type { GraphPlan } from '../messages/graph-plan.js';
import { jsonHead } from './payload.js';
import type { Payload } from './payload.js';

interface OutlierScore {
  score: number;
  outlier: boolean;
}

interface OutlierNode {
  /** The largest score over the request's rows, against the node's threshold. */
  score(request: Payload): OutlierScore;
}

/** The request's inputs as their own signature (open dimensions): the reference's is read. */
function signatureOf(head: unknown): TensorSpec[] {
  const inputs = (head as { inputs?: unknown } | null)?.inputs;
  if (!Array.isArray(inputs)) throw new ValidationError('body.inputs: an OIP request is needed');
  return inputs.map((entry: { name?: unknown; datatype?: unknown; shape?: unknown }) => ({
    name: String(entry.name),
    datatype: String(entry.datatype) as Datatype,
    shape: Array.isArray(entry.shape) ? entry.shape.map(() => -1) : [],
  }));
}

function createOutlierNode(reference: DriftReference, threshold: number | undefined): OutlierNode {
  const spec: TensorSpec = {
    name: reference.input,
    datatype: 'FP32',
    shape: [-1, ...reference.shape],
  };
  const scorer = createOutlierScorer(reference, spec);
  const cut = threshold ?? reference.quantiles.p99;
  return {
    score(request) {
      const head = jsonHead(request);
      const inputs = signatureOf(head);
      const binary =
        request.kind === 'binary' ? request.bytes.subarray(request.headerLength) : undefined;
      const parsed = parseInferRequest(
        head,
        { signature: { inputs, outputs: [], batched: true }, served: [], maxBatch: 1 << 16 },
        binary,
      );
      const tensor = parsed.inputs[reference.input];
      if (tensor === undefined)
        throw new ValidationError(
          `body.inputs: no input ${reference.input}, which the outlier node scores`,
        );
      const score = Math.max(...scorer.score(tensor, parsed.rows));
      return { score, outlier: score > cut };
    },
  };
}

/**
 * The built-in outlier nodes of a plan, their references read once, at start: file:// inside
 * `root` only, http(s) kept in `cacheDir` (as models are: shared/inference/model-source.ts).
 */
async function createBuiltinOutliers(
  plan: GraphPlan,
  where: { root: string; cacheDir: string },
): Promise<Map<string, OutlierNode>> {
  const load = (url: string) =>
    loadModelBytes({ url, sha256: undefined, ...where, maxBytes: 16 << 20, timeoutMs: 10_000 });
  const nodes = new Map<string, OutlierNode>();
  for (const node of plan.nodes) {
    const reference = node.outlier?.reference;
    if (node.kind !== 'outlier' || reference === undefined) continue;
    const json = JSON.parse(new TextDecoder().decode(await load(reference))) as unknown;
    nodes.set(node.name, createOutlierNode(parseDriftReference(json), node.outlier?.threshold));
  }
  return nodes;
}

export { createBuiltinOutliers };
export type { OutlierNode, OutlierScore };
