/**
 * Poisoned updates, for tests and the learning bench only (nothing that serves imports this):
 * what a Byzantine trainer could send instead of its honest update. `scale` blows its delta up
 * (base + factor (update - base): the model-replacement attack), `signflip` reverses it
 * (base - factor (update - base)), `random` replaces it with Gaussian noise
 * (base + N(0, std^2) per coordinate, seeded).
 */
import { ValidationError } from '../../errors/index.js';
import { SeededRandom } from '../../random/index.js';
import { alignedValues } from '../fedavg.js';
import type { WeightUpdate } from '../fedavg.js';
import type { NamedTensors } from '../weights.js';
import { streamSeed } from './seeds.js';
import { modelValues, toTensors } from './tensors.js';

type Attack =
  | { readonly kind: 'scale'; readonly factor: number }
  | { readonly kind: 'signflip'; readonly factor: number }
  | { readonly kind: 'random'; readonly std: number };

/** `update` as the attack would send it (same worker and samples); `seed` drives `random`. */
function poison(
  update: WeightUpdate,
  base: NamedTensors,
  attack: Attack,
  seed: number,
): WeightUpdate {
  const size = attack.kind === 'random' ? attack.std : attack.factor;
  if (!Number.isFinite(size) || size < 0) {
    throw new ValidationError(`${attack.kind} attack's size ${size} is not a finite number >= 0`);
  }
  const values = alignedValues(base, update);
  const from = modelValues(base);
  const { normal } = new SeededRandom(streamSeed(seed, 0, 'poison'));
  const poisoned = from.map((b, t) => {
    const out = new Float64Array(b.length);
    for (let i = 0; i < b.length; i += 1) {
      const delta = values[t]![i]! - b[i]!;
      out[i] =
        attack.kind === 'scale'
          ? b[i]! + attack.factor * delta
          : attack.kind === 'signflip'
            ? b[i]! - attack.factor * delta
            : b[i]! + attack.std * normal();
    }
    return out;
  });
  return { worker: update.worker, samples: update.samples, weights: toTensors(base, poisoned) };
}

export { poison };
export type { Attack };
