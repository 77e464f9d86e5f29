/**
 * The simulator's pending events: a binary min-heap over parallel typed arrays, so the millions
 * of per-query events of a run allocate nothing. Written out rather than taken from a package
 * because it is ~60 lines and the payload is a bare int32 (the event's kind and subject packed
 * by the caller), which generic heaps would box.
 *
 * Events are ordered by time, then by insertion: two events at one instant run in the order they
 * were scheduled, which keeps zero-deviation runs (and hand-computed tests) unambiguous.
 */
class EventQueue {
  private times = new Float64Array(1024);
  private seqs = new Float64Array(1024);
  private payloads = new Int32Array(1024);
  private count = 0;
  private nextSeq = 0;

  get size(): number {
    return this.count;
  }

  /** Time of the earliest event; Infinity when empty. */
  peekTime(): number {
    return this.count > 0 ? this.times[0]! : Infinity;
  }

  push(time: number, payload: number): void {
    if (this.count === this.times.length) this.grow();
    const seq = this.nextSeq++;
    const times = this.times;
    const seqs = this.seqs;
    const payloads = this.payloads;
    // Sift the hole up from the end, moving parents down, then drop the event into it.
    let hole = this.count++;
    while (hole > 0) {
      const parent = (hole - 1) >> 1;
      const pt = times[parent]!;
      if (pt < time || (pt === time && seqs[parent]! < seq)) break;
      times[hole] = pt;
      seqs[hole] = seqs[parent]!;
      payloads[hole] = payloads[parent]!;
      hole = parent;
    }
    times[hole] = time;
    seqs[hole] = seq;
    payloads[hole] = payload;
  }

  /** Removes the earliest event and returns its payload (call only when `size > 0`). */
  pop(): number {
    const times = this.times;
    const seqs = this.seqs;
    const payloads = this.payloads;
    const top = payloads[0]!;
    const last = --this.count;
    if (last === 0) return top;
    const time = times[last]!;
    const seq = seqs[last]!;
    const payload = payloads[last]!;
    // Sift the hole down from the root, moving the earlier child up, then place the last event.
    let hole = 0;
    const half = last >> 1;
    while (hole < half) {
      let child = 2 * hole + 1;
      const right = child + 1;
      if (
        right < last &&
        (times[right]! < times[child]! ||
          (times[right] === times[child] && seqs[right]! < seqs[child]!))
      ) {
        child = right;
      }
      const ct = times[child]!;
      if (time < ct || (time === ct && seq < seqs[child]!)) break;
      times[hole] = ct;
      seqs[hole] = seqs[child]!;
      payloads[hole] = payloads[child]!;
      hole = child;
    }
    times[hole] = time;
    seqs[hole] = seq;
    payloads[hole] = payload;
    return top;
  }

  /**
   * An independent queue holding the same events in the same heap layout, with the same next
   * sequence number: it pops exactly what this one would, and pushes order the same way.
   */
  clone(): EventQueue {
    const copy = new EventQueue();
    copy.times = this.times.slice();
    copy.seqs = this.seqs.slice();
    copy.payloads = this.payloads.slice();
    copy.count = this.count;
    copy.nextSeq = this.nextSeq;
    return copy;
  }

  private grow(): void {
    const size = this.times.length * 2;
    const times = new Float64Array(size);
    const seqs = new Float64Array(size);
    const payloads = new Int32Array(size);
    times.set(this.times);
    seqs.set(this.seqs);
    payloads.set(this.payloads);
    this.times = times;
    this.seqs = seqs;
    this.payloads = payloads;
  }
}

export { EventQueue };
