/**
 * The simulator's per-stream and per-query state as parallel typed arrays indexed by slot, so the
 * hot path allocates nothing per query (simulator.ts's event loop reads and writes them).
 */
import type { Stream } from '../../../shared/aset/types.js';
import { queriesOf } from './workload.js';

/** A Float64Array at least `size` long holding `array`'s values. */
function grownF64(array: Float64Array<ArrayBuffer>, size: number): Float64Array<ArrayBuffer> {
  if (array.length >= size) return array;
  const next = new Float64Array(Math.max(size, array.length * 2));
  next.set(array);
  return next;
}

/** An Int32Array at least `size` long holding `array`'s values. */
function grownI32(array: Int32Array<ArrayBuffer>, size: number): Int32Array<ArrayBuffer> {
  if (array.length >= size) return array;
  const next = new Int32Array(Math.max(size, array.length * 2));
  next.set(array);
  return next;
}

/**
 * Bound streams, by slot: what their queries' sends, draws and verdicts read. Slots are never
 * reused: a run has thousands of streams, not millions.
 */
class StreamTable {
  private count = 0;
  worker = new Int32Array(256);
  scheduler = new Int32Array(256);
  app = new Int32Array(256);
  queries = new Int32Array(256);
  /** Queries sent (scheduled) so far. */
  emitted = new Int32Array(256);
  start = new Float64Array(256);
  period = new Float64Array(256);
  rate = new Float64Array(256);
  size = new Float64Array(256);
  maxDelay = new Float64Array(256);
  /** delta_i + b_i * zeta_i: the fixed part of the way up. */
  upFixed = new Float64Array(256);
  /** delta_i: the fixed part of the way down. */
  access = new Float64Array(256);

  /** Records `stream`, bound at `now` to `worker` for `app`, in the next slot; returns the slot. */
  add(stream: Stream, scheduler: number, worker: number, app: number, now: number): number {
    const s = this.count++;
    if (s >= this.worker.length) this.grow(s + 1);
    this.worker[s] = worker;
    this.scheduler[s] = scheduler;
    this.app[s] = app;
    this.queries[s] = queriesOf(stream);
    this.emitted[s] = 0;
    this.start[s] = now;
    this.period[s] = 1000 / stream.rate;
    this.rate[s] = stream.rate;
    this.size[s] = stream.size;
    this.maxDelay[s] = stream.maxDelayMs;
    this.upFixed[s] = stream.accessDelayMs + stream.transmissionMsPerSize * stream.size;
    this.access[s] = stream.accessDelayMs;
    return s;
  }

  /** An independent table with the same streams in the same slots. */
  clone(): StreamTable {
    const copy = new StreamTable();
    copy.count = this.count;
    copy.worker = this.worker.slice();
    copy.scheduler = this.scheduler.slice();
    copy.app = this.app.slice();
    copy.queries = this.queries.slice();
    copy.emitted = this.emitted.slice();
    copy.start = this.start.slice();
    copy.period = this.period.slice();
    copy.rate = this.rate.slice();
    copy.size = this.size.slice();
    copy.maxDelay = this.maxDelay.slice();
    copy.upFixed = this.upFixed.slice();
    copy.access = this.access.slice();
    return copy;
  }

  /** Makes every column at least `size` long. */
  private grow(size: number): void {
    this.worker = grownI32(this.worker, size);
    this.scheduler = grownI32(this.scheduler, size);
    this.app = grownI32(this.app, size);
    this.queries = grownI32(this.queries, size);
    this.emitted = grownI32(this.emitted, size);
    this.start = grownF64(this.start, size);
    this.period = grownF64(this.period, size);
    this.rate = grownF64(this.rate, size);
    this.size = grownF64(this.size, size);
    this.maxDelay = grownF64(this.maxDelay, size);
    this.upFixed = grownF64(this.upFixed, size);
    this.access = grownF64(this.access, size);
  }
}

/** Queries in flight, by slot, reused through a free list so a long run's memory stays flat. */
class QueryTable {
  stream = new Int32Array(1024);
  sent = new Float64Array(1024);
  /** Network time so far minus its budget, d + 2 sigma per direction (for the QoS verdict's cause). */
  networkExcess = new Float64Array(1024);
  /** Queries sent to a worker and not yet resolved. */
  inFlight = 0;
  private freeSlots = new Int32Array(1024);
  private freeCount = 0;
  private high = 0;

  /** A slot for a query of stream `s` sent at `sent`, now in flight. */
  open(s: number, sent: number): number {
    const slot = this.alloc();
    this.stream[slot] = s;
    this.sent[slot] = sent;
    this.networkExcess[slot] = 0;
    this.inFlight += 1;
    return slot;
  }

  /** The query in `slot` is resolved: its slot is free again. */
  close(slot: number): void {
    this.freeSlots[this.freeCount++] = slot;
    this.inFlight -= 1;
  }

  /** An independent table: the same queries in the same slots, and the same free list order. */
  clone(): QueryTable {
    const copy = new QueryTable();
    copy.stream = this.stream.slice();
    copy.sent = this.sent.slice();
    copy.networkExcess = this.networkExcess.slice();
    copy.inFlight = this.inFlight;
    copy.freeSlots = this.freeSlots.slice();
    copy.freeCount = this.freeCount;
    copy.high = this.high;
    return copy;
  }

  /** A free slot if there is one, else the next new one (growing the columns). */
  private alloc(): number {
    if (this.freeCount > 0) return this.freeSlots[--this.freeCount]!;
    const slot = this.high++;
    if (slot >= this.stream.length) {
      this.stream = grownI32(this.stream, slot + 1);
      this.sent = grownF64(this.sent, slot + 1);
      this.networkExcess = grownF64(this.networkExcess, slot + 1);
      this.freeSlots = grownI32(this.freeSlots, slot + 1);
    }
    return slot;
  }
}

export { StreamTable, QueryTable };
