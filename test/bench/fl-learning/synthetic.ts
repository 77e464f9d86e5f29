/** The fl-learning tests' data and network: small enough to train in milliseconds. */
import { seededRandom } from '../../../shared/random/index.js';
import type { Split } from '../../../shared/training/data.js';
import type { LayerSpec } from '../../../shared/training/network.js';

export const layers: LayerSpec[] = [{ type: 'flatten' }, { type: 'dense', units: 10 }];

/** `n` random sparse "digits", labels 0-9 in turn. */
export function syntheticSplit(n = 60): Split {
  const uniform = seededRandom(5);
  const x = Float32Array.from({ length: n * 784 }, () => (uniform() < 0.8 ? 0 : uniform()));
  const y = Uint8Array.from({ length: n }, (_, i) => i % 10);
  return { x, y, n };
}
