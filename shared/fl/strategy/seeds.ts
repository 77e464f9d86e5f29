/**
 * One seed per (job seed, round, purpose): client selection, central DP's noise and the test
 * attacks each draw from their own stream, so the same seed never correlates two of them and a
 * round's draws do not depend on how many were taken in earlier rounds.
 */

const purposes = { selection: 0x5e1ec7, 'dp-noise': 0xd9a015e, poison: 0xbad5eed } as const;

type SeedPurpose = keyof typeof purposes;

/** A 32-bit seed mixed from the three (murmur3's finaliser over each in turn). */
function streamSeed(seed: number, round: number, purpose: SeedPurpose): number {
  let h = purposes[purpose] >>> 0;
  for (const word of [seed, Math.floor(seed / 2 ** 32), round]) {
    h = Math.imul(h ^ (word >>> 0), 0xcc9e2d51);
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
    h ^= h >>> 16;
  }
  return h >>> 0;
}

export { streamSeed };
export type { SeedPurpose };
