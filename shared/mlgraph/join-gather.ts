/**
 * A built-in join of one request, in the executor: the inputs of the routes taken, by source,
 * and the tightest bound on how many there can be — the joiner's rules (join-add.lua,
 * join-tighten.lua) without Redis, since the executor holds every input of its own request. A
 * source's first input counts, a resend does not; the input (or the lowered bound) that brings
 * the number received to the bound completes the join.
 */
class JoinGather<P> {
  private readonly received = new Map<string, P>();
  private tightest = Infinity;

  /** Adds `source`'s input, which allows for `pending` others; true when that completes it. */
  add(source: string, input: P, pending: number): boolean {
    if (!this.received.has(source)) this.received.set(source, input);
    this.tightest = Math.min(this.tightest, 1 + pending);
    return this.received.size >= this.tightest;
  }

  /** Lowers the bound to `inputs` in all (a route not taken); true when that completes it. */
  tighten(inputs: number): boolean {
    this.tightest = Math.min(this.tightest, inputs);
    return this.received.size > 0 && this.received.size >= this.tightest;
  }

  /** Inputs the bound still allows for. */
  missing(): number {
    return this.tightest === Infinity ? 0 : Math.max(0, this.tightest - this.received.size);
  }

  inputs(): ReadonlyMap<string, P> {
    return this.received;
  }
}

export { JoinGather };
