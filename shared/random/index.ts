/** Seeded randomness, so training (and everything sampled from it) is reproducible. */

/** mulberry32: a small, fast 32-bit generator; uniform in [0, 1). */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Standard normal draws (Box-Muller) from a uniform source. */
function normal(uniform: () => number): () => number {
  return () => {
    const u = 1 - uniform();
    const v = uniform();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  };
}

/**
 * The `seededRandom` generator as an object whose state can be copied: `next()` gives exactly the
 * sequence of `seededRandom(seed)` and `normal()` exactly that of `normal(seededRandom(seed))`
 * (one normal per two uniforms, nothing cached between calls, so the two draws can be mixed on
 * one generator). `clone()` is an independent generator continuing from the same point, which is
 * what lets a simulation be forked (research/aset/sim/simulator.ts). `next` and `normal` are bound,
 * so they can be handed around as plain `() => number` functions.
 */
class SeededRandom {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A uniform in [0, 1): mulberry32, as `seededRandom`. */
  readonly next = (): number => {
    const a = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };

  /** A standard normal from the next two uniforms (Box-Muller), as `normal`. */
  readonly normal = (): number => {
    const u = 1 - this.next();
    const v = this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
  };

  /** An independent generator standing where this one stands. */
  clone(): SeededRandom {
    const copy = new SeededRandom(0);
    copy.state = this.state;
    return copy;
  }
}

/** Fisher-Yates shuffle of `items` in place. */
function shuffle<T>(items: T[], uniform: () => number): T[] {
  for (let i = items.length - 1; i > 0; i -= 1) {
    const j = Math.floor(uniform() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

export { seededRandom, normal, shuffle, SeededRandom };
