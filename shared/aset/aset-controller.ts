/**
 * The trained ASET meta-policy as a `WindowController`: every T, the last window's samples are
 * encoded (state.ts), the exported Q-network runs in onnxruntime, and the policy with the
 * highest Q-value binds the streams of the next window. The same code serves the simulator, the
 * benchmark and the aset-scheduler function, so what is measured is what is deployed.
 */
import { loadOnnxModel } from '../inference/onnx-runtime.js';
import { greedyAction } from './greedy.js';
import type { WindowController } from './window.js';
import type { NetworkCard } from './network-card.js';
import { encodeState, stateSize } from './state.js';
import { policyNames } from './types.js';
import type { PolicyName, Topology } from './types.js';

interface AsetController extends WindowController {
  /** The Q-values of the latest choice, in `policyNames` order (for logs and reports). */
  readonly lastQ: Float32Array | undefined;
  close(): Promise<void>;
}

/**
 * Loads a Q-network exported by `npm run aset:train` for `topology`; refuses one whose input or
 * output size does not fit (a network trained on another topology).
 */
async function createAsetController(options: {
  model: Uint8Array;
  topology: Topology;
}): Promise<AsetController> {
  const network = await loadOnnxModel(options.model);
  const expected = stateSize(options.topology);
  if (network.inputWidth !== expected || network.outputWidth !== policyNames.length) {
    await network.close();
    throw new Error(
      `ASET network takes ${network.inputWidth} inputs and gives ${network.outputWidth} values; topology ${options.topology.name} needs ${expected} -> ${policyNames.length} (trained for another topology?)`,
    );
  }
  let lastQ: Float32Array | undefined;
  return {
    name: 'ASET',
    get lastQ() {
      return lastQ;
    },
    async choose(previous): Promise<PolicyName> {
      // A state per call: onnxruntime reads its input later, so overlapping calls sharing one
      // array would each see the other's state.
      const state = encodeState(options.topology, previous);
      lastQ = await network.run(state, 1);
      return policyNames[greedyAction(lastQ)]!;
    },
    close: () => network.close(),
  };
}

/**
 * The meta-policy a trained network's card deploys (network-card.ts): the network's greedy
 * choice, or, when a static policy beat the network on the validation runs, that policy in every
 * window. What the bench measures as ASET and what the scheduler runs both come from here.
 */
async function createDeployedController(options: {
  network: { model: Uint8Array; card: NetworkCard };
  topology: Topology;
}): Promise<AsetController> {
  const { deployed } = options.network.card;
  if (deployed.kind === 'network') {
    return createAsetController({ model: options.network.model, topology: options.topology });
  }
  const policy = deployed.policy;
  return {
    name: 'ASET',
    lastQ: undefined,
    choose: () => Promise.resolve(policy),
    close: () => Promise.resolve(),
  };
}

export { createAsetController, createDeployedController };
export type { AsetController };
