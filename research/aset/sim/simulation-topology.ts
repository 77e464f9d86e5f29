/**
 * The topology as the simulator's event loop reads it (simulator.ts): link figures per
 * (scheduler, worker) and, per worker, its processing profile, its servers (replicas) with their
 * batch slots, and the FIFO ring of query slots they share. Typed arrays, so the hot path
 * allocates nothing per query.
 */
import type { LinkSpikes, Scheduler, Topology, Worker } from '../../../shared/aset/types.js';

/**
 * The excess of a spike: Lomax (Pareto II) of tail index `shape` and scale `scaleMs`, by
 * inversion of a uniform in [0, 1).
 */
function lomax(shape: number, scaleMs: number, uniform: number): number {
  return scaleMs * ((1 - uniform) ** (-1 / shape) - 1);
}

/**
 * d and sigma per (scheduler, worker), so a query's network draw reads two numbers, and the
 * spikes of the path's hops where it has any.
 */
class LinkTable {
  /** Position of each scheduler in the topology, by id. */
  readonly schedulerIndex = new Map<string, number>();
  private readonly workers: number;
  private readonly delay: Float64Array;
  private readonly deviation: Float64Array;
  /** d + 2 sigma per link, read for every link draw (the network-late verdict). */
  private readonly budgets: Float64Array;
  private readonly spikes: Array<readonly LinkSpikes[] | undefined>;

  constructor(topology: Topology) {
    const W = topology.workers.length;
    this.workers = W;
    topology.schedulers.forEach((s, i) => this.schedulerIndex.set(s.id, i));
    const size = topology.schedulers.length * W;
    this.delay = new Float64Array(size);
    this.deviation = new Float64Array(size);
    this.budgets = new Float64Array(size);
    this.spikes = new Array<readonly LinkSpikes[] | undefined>(size);
    topology.schedulers.forEach((scheduler: Scheduler, s) => {
      for (const worker of topology.workers) {
        const link = scheduler.links[worker.cluster.id];
        if (link === undefined) {
          throw new RangeError(`scheduler ${scheduler.id} has no link to ${worker.cluster.id}`);
        }
        const key = s * W + worker.index;
        this.delay[key] = link.delayMs;
        this.deviation[key] = link.deviationMs;
        this.budgets[key] = link.delayMs + 2 * link.deviationMs;
        this.spikes[key] = link.spikes;
      }
    });
  }

  /** d + 2 sigma of the link: what constraint (3) budgets for one direction. */
  budget(scheduler: number, worker: number): number {
    return this.budgets[scheduler * this.workers + worker]!;
  }

  /**
   * A non-negative draw of the link's delay between `scheduler` and `worker`: N(d, sigma), plus
   * for each spiky hop of the path, with its probability, a spike. One uniform per spiky hop
   * decides and (rescaled) sizes the spike; `spikeUniform` is consumed only on such paths, so a
   * topology without spikes draws exactly what it always drew.
   */
  draw(
    scheduler: number,
    worker: number,
    normal: () => number,
    spikeUniform: () => number,
  ): number {
    const key = scheduler * this.workers + worker;
    let delay = this.delay[key]! + this.deviation[key]! * normal();
    const spikes = this.spikes[key];
    if (spikes !== undefined) {
      for (const { probability, shape, scaleMs } of spikes) {
        const u = spikeUniform();
        // Given u < p, u / p is uniform in [0, 1): it sizes the spike.
        if (u < probability) delay += lomax(shape, scaleMs, u / probability);
      }
    }
    return delay > 0 ? delay : 0;
  }
}

/**
 * Workers by index: profile, free servers, batch slots and the FIFO queue. Servers are numbered
 * worker by worker; server g's batch holds `batchLength[g]` query slots from `memberBase[g]` on.
 */
class WorkerPool {
  readonly batchSize: Int32Array;
  readonly fixedMs: Float64Array;
  /** D_v(1) - D_v(0): the processing time per unit of the batch's largest size. */
  readonly perSizeMs: Float64Array;
  readonly deviationMs: Float64Array;
  readonly serverWorker: Int32Array;
  readonly memberBase: Int32Array;
  readonly batchLength: Int32Array;
  readonly batchMembers: Int32Array;
  /** Free servers per worker, a stack of `freeCount[w]` server numbers. */
  readonly freeCount: Int32Array;
  private readonly freeServers: Int32Array[];
  private readonly queues: Int32Array[];
  private readonly queueHead: Int32Array;
  readonly queueLength: Int32Array;

  constructor(private readonly workers: readonly Worker[]) {
    const W = workers.length;
    this.batchSize = new Int32Array(W);
    this.fixedMs = new Float64Array(W);
    this.perSizeMs = new Float64Array(W);
    this.deviationMs = new Float64Array(W);
    const serverBase = new Int32Array(W);
    let servers = 0;
    for (const worker of workers) {
      this.batchSize[worker.index] = worker.variant.batchSize;
      this.fixedMs[worker.index] = worker.variant.fixedDelayMs;
      this.perSizeMs[worker.index] = worker.variant.maxDelayMs - worker.variant.fixedDelayMs;
      this.deviationMs[worker.index] = worker.variant.delayDeviationMs;
      serverBase[worker.index] = servers;
      if (!(worker.replicas >= 1) || !Number.isFinite(worker.replicas)) {
        throw new RangeError(`worker ${worker.index} needs a finite replica count >= 1`);
      }
      servers += worker.replicas;
    }
    this.serverWorker = new Int32Array(servers);
    this.memberBase = new Int32Array(servers);
    this.batchLength = new Int32Array(servers);
    this.freeServers = [];
    this.freeCount = new Int32Array(W);
    let members = 0;
    for (const worker of workers) {
      const free = new Int32Array(worker.replicas);
      for (let r = 0; r < worker.replicas; r += 1) {
        const g = serverBase[worker.index]! + r;
        this.serverWorker[g] = worker.index;
        this.memberBase[g] = members;
        members += worker.variant.batchSize;
        free[r] = g;
      }
      this.freeServers.push(free);
      this.freeCount[worker.index] = worker.replicas;
    }
    this.batchMembers = new Int32Array(members);
    this.queues = workers.map(() => new Int32Array(64));
    this.queueHead = new Int32Array(W);
    this.queueLength = new Int32Array(W);
  }

  /**
   * An independent pool in the same state: the same free servers in the same stack order, the
   * same batches, and each queue with its ring laid out as it is here.
   */
  clone(): WorkerPool {
    const copy = new WorkerPool(this.workers);
    copy.batchLength.set(this.batchLength);
    copy.batchMembers.set(this.batchMembers);
    copy.freeCount.set(this.freeCount);
    this.freeServers.forEach((free, w) => copy.freeServers[w]!.set(free));
    this.queues.forEach((queue, w) => (copy.queues[w] = queue.slice()));
    copy.queueHead.set(this.queueHead);
    copy.queueLength.set(this.queueLength);
    return copy;
  }

  /** Appends query `slot` to worker `w`'s queue, doubling the ring when it is full. */
  enqueue(w: number, slot: number): void {
    let queue = this.queues[w]!;
    if (this.queueLength[w] === queue.length) {
      // Unroll the ring into a buffer twice as large.
      const larger = new Int32Array(queue.length * 2);
      for (let i = 0; i < this.queueLength[w]; i += 1) {
        larger[i] = queue[(this.queueHead[w]! + i) % queue.length]!;
      }
      this.queues[w] = queue = larger;
      this.queueHead[w] = 0;
    }
    queue[(this.queueHead[w]! + this.queueLength[w]!) % queue.length] = slot;
    this.queueLength[w]! += 1;
  }

  /** Removes and returns the query slot at the head of worker `w`'s (non-empty) queue. */
  dequeue(w: number): number {
    const queue = this.queues[w]!;
    const slot = queue[this.queueHead[w]!]!;
    this.queueHead[w] = (this.queueHead[w]! + 1) % queue.length;
    this.queueLength[w]! -= 1;
    return slot;
  }

  /** The server of worker `w` that takes the next batch (call only when `freeCount[w] > 0`). */
  nextFree(w: number): number {
    return this.freeServers[w]![this.freeCount[w]! - 1]!;
  }

  /** Server `g`, the one `nextFree(w)` named, starts a batch of `taken` queries. */
  occupy(w: number, g: number, taken: number): void {
    this.freeCount[w]! -= 1;
    this.batchLength[g] = taken;
  }

  /** Server `g` finished its batch and is free again; returns its worker. */
  vacate(g: number): number {
    const w = this.serverWorker[g]!;
    this.freeServers[w]![this.freeCount[w]!] = g;
    this.freeCount[w]! += 1;
    return w;
  }
}

export { LinkTable, WorkerPool, lomax };
