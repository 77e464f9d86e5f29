/**
 * The replay memory D of Algorithm 1 (lines 1, 11 and 15), kept apart from the agent so the
 * ring's storage layout can be read and tested on its own.
 */
/**
 * The replay memory D of Algorithm 1: a ring of `capacity` transitions (s, a, r, s', terminal),
 * the oldest overwritten first (line 11), sampled uniformly with replacement (line 15). States
 * are stored as float32 in two preallocated blocks: a few thousand features per state times
 * N_r transitions would otherwise be millions of small arrays, and float32 is also what the
 * exported ONNX model reads, so training sees exactly the inputs inference will.
 */
class ReplayBuffer {
  readonly capacity: number;
  readonly stateSize: number;
  readonly #states: Float32Array;
  readonly #nexts: Float32Array;
  readonly #actions: Int32Array;
  readonly #rewards: Float64Array;
  readonly #terminals: Uint8Array;
  /** The push number of the transition each slot holds. */
  readonly #written: Float64Array;
  /** Views of each slot, made once, so reading a transition in the training loop allocates nothing. */
  readonly #stateViews: Float32Array[];
  readonly #nextViews: Float32Array[];
  #pushed = 0;

  constructor(capacity: number, stateSize: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new Error('capacity must be >= 1');
    if (!Number.isInteger(stateSize) || stateSize < 1) throw new Error('stateSize must be >= 1');
    this.capacity = capacity;
    this.stateSize = stateSize;
    this.#states = new Float32Array(capacity * stateSize);
    this.#nexts = new Float32Array(capacity * stateSize);
    this.#actions = new Int32Array(capacity);
    this.#rewards = new Float64Array(capacity);
    this.#terminals = new Uint8Array(capacity);
    this.#written = new Float64Array(capacity).fill(-1);
    const view = (block: Float32Array, slot: number) =>
      block.subarray(slot * stateSize, (slot + 1) * stateSize);
    this.#stateViews = Array.from({ length: capacity }, (_, slot) => view(this.#states, slot));
    this.#nextViews = Array.from({ length: capacity }, (_, slot) => view(this.#nexts, slot));
  }

  /** Transitions held: grows to `capacity`, then stays there. */
  get size(): number {
    return Math.min(this.#pushed, this.capacity);
  }

  /** Transitions ever pushed, including those since overwritten. */
  get pushed(): number {
    return this.#pushed;
  }

  /**
   * Stores a transition in the next slot, overwriting the oldest once full; returns the slot.
   * `terminal` marks s' as the end of the episode, so its target is r alone.
   */
  push(
    state: ArrayLike<number>,
    action: number,
    reward: number,
    next: ArrayLike<number>,
    terminal: boolean,
  ): number {
    if (state.length !== this.stateSize || next.length !== this.stateSize) {
      throw new Error(`states must have ${this.stateSize} features`);
    }
    if (!Number.isFinite(reward)) throw new Error(`reward must be finite, got ${reward}`);
    const slot = this.#pushed % this.capacity;
    this.#stateViews[slot]!.set(state);
    this.#nextViews[slot]!.set(next);
    this.#actions[slot] = action;
    this.#rewards[slot] = reward;
    this.#terminals[slot] = terminal ? 1 : 0;
    this.#written[slot] = this.#pushed;
    this.#pushed += 1;
    return slot;
  }

  /**
   * Fills `out` with slots drawn uniformly, with replacement, from the transitions held (the
   * paper's idx ~ U(N_r), over the filled part until the ring is full). Throws when empty.
   */
  sample(out: Int32Array, uniform: () => number): Int32Array {
    const n = this.size;
    if (n === 0) throw new Error('cannot sample an empty replay buffer');
    for (let i = 0; i < out.length; i += 1) out[i] = Math.floor(uniform() * n);
    return out;
  }

  /** s of the transition in `slot` (a view into the ring, overwritten when the slot is). */
  state(slot: number): Float32Array {
    return this.#stateViews[slot]!;
  }

  /** s' of the transition in `slot` (a view into the ring). */
  next(slot: number): Float32Array {
    return this.#nextViews[slot]!;
  }

  action(slot: number): number {
    return this.#actions[slot]!;
  }

  reward(slot: number): number {
    return this.#rewards[slot]!;
  }

  terminal(slot: number): boolean {
    return this.#terminals[slot] === 1;
  }

  /** Which transition `slot` holds: its 0-based push number, -1 if never written. */
  written(slot: number): number {
    return this.#written[slot]!;
  }
}

export { ReplayBuffer };
