/**
 * The ASET problem model (paper section III-A/B) as plain data, shared by the constraints, the
 * static policies, the simulator, the state encoding and the aset-scheduler function. Units are
 * fixed here once: time in milliseconds, rates in queries per second, sizes as a fraction of the
 * largest input a variant accepts (so D_v(1) is the paper's D_v and a stream of size 1 uses one
 * full query of capacity).
 */

/** Resource kinds a cluster offers and a variant uses (the paper's k dimensions of r_v, c_n). */
const resourceKinds = ['cpu', 'memoryGiB', 'accelerator'] as const;
type ResourceKind = (typeof resourceKinds)[number];
type Resources = Readonly<Record<ResourceKind, number>>;

/** Layers of the ISP hierarchy in section V, from the antenna to the remote cloud. */
const layers = ['access', 'central-office', 'isp-dc', 'cloud'] as const;
type Layer = (typeof layers)[number];

interface Cluster {
  readonly id: string;
  readonly layer: Layer;
  /** c_n; `Infinity` for the remote cloud's "unlimited resources". */
  readonly capacity: Resources;
}

/** A trained DNN m for task j with accuracy A_m (mAP, the paper's unit). */
interface DnnModel {
  readonly id: string;
  readonly task: string;
  readonly accuracy: number;
}

/** A variant v of a model: one runtime setup (hardware, batch size) with its profile. */
interface Variant {
  readonly id: string;
  readonly model: string;
  /** Queries processed together; a worker's FIFO queue is served in batches of up to this. */
  readonly batchSize: number;
  /** D_v(size) = fixedDelayMs + (maxDelayMs - fixedDelayMs) * size for one full batch. */
  readonly fixedDelayMs: number;
  readonly maxDelayMs: number;
  /** Standard deviation of the per-batch processing delay (normal, truncated at 0). */
  readonly delayDeviationMs: number;
  /** C_v of one replica: queries of size 1 per second. */
  readonly capacity: number;
  /** r_v of one replica. */
  readonly resources: Resources;
}

/**
 * A worker w = (variant, cluster): the variant deployed on the cluster with `replicas` copies
 * (the paper scales replicas up to the cluster's resources). `index` is w, the position used by
 * the state encoding and by deterministic tie-breaks.
 */
interface Worker {
  readonly index: number;
  readonly variant: Variant;
  readonly model: DnnModel;
  readonly cluster: Cluster;
  readonly replicas: number;
  /** C_v * replicas: queries of size 1 per second this worker can sustain. */
  readonly capacity: number;
}

/**
 * Delay spikes of one hop, stationary: each crossing, with `probability`, adds a Lomax (Pareto II)
 * excess of tail index `shape` and scale `scaleMs` (median scaleMs * (2^(1/shape) - 1)).
 */
interface LinkSpikes {
  readonly probability: number;
  /** Pareto tail index alpha > 1 (a finite mean); smaller is heavier. */
  readonly shape: number;
  readonly scaleMs: number;
}

/**
 * One network path from a scheduler to a cluster: d_n^s and sigma_n^s, the nominal mean and
 * deviation of its one-way delay, which constraint (3) and the policies read. The delay drawn is
 * N(d, sigma) plus, for each hop of the path with `spikes`, its occasional excess: a link less
 * reliable than its nominal figures say, which the schedulers cannot see.
 */
interface Link {
  readonly delayMs: number;
  readonly deviationMs: number;
  readonly spikes?: readonly LinkSpikes[];
}

/** One scheduler per access point (lower-layer cluster), with a link to every cluster. */
interface Scheduler {
  readonly id: string;
  /**
   * The access node the scheduler sits on: a cluster id when that layer has compute (full-edge),
   * otherwise a node that appears in no `Topology.clusters` (dc-cloud, co-dc-cloud).
   */
  readonly cluster: string;
  readonly links: Readonly<Record<string, Link>>;
}

/** A stream i: all queries share task, requirements, rate and size. */
interface Stream {
  readonly id: number;
  readonly app: string;
  readonly task: string;
  /** D^i */
  readonly maxDelayMs: number;
  /** A^i */
  readonly minAccuracy: number;
  /** rho_i, queries per second (frame rate). */
  readonly rate: number;
  /**
   * zeta_i as a fraction of the largest input (0, 1]; also the fractional load eta_v^i, since
   * capacities count queries of size 1.
   */
  readonly size: number;
  /** b_i: transmission time per unit of size, so b_i * zeta_i is one query's transmission delay. */
  readonly transmissionMsPerSize: number;
  /** delta_i: the radio/access delay from the source to its scheduler. */
  readonly accessDelayMs: number;
  readonly durationS: number;
  readonly scheduler: string;
}

/** The whole deployment a scheduler sees. */
interface Topology {
  readonly name: string;
  readonly clusters: readonly Cluster[];
  readonly models: readonly DnnModel[];
  readonly workers: readonly Worker[];
  readonly schedulers: readonly Scheduler[];
}

/** Constraints (1)-(4) of section III-B, by the name reported when one fails. */
const constraintNames = ['task', 'capacity', 'delay', 'accuracy'] as const;
type ConstraintName = (typeof constraintNames)[number];

/** A worker a stream could be bound to, with the figures the policies rank by. */
interface Candidate {
  readonly worker: Worker;
  /** L_vn(t): reserved load, queries of size 1 per second. */
  readonly load: number;
  /** d_n^s + 2 sigma_n^s from the stream's scheduler to the worker's cluster. */
  readonly networkMs: number;
  /** 2 (d_n^s + 2 sigma_n^s) + D_v(zeta_i): the expected end-to-end delay the policies use. */
  readonly expectedMs: number;
}

/** The seven static policies of section III-C, in the paper's order (the DQN's action index). */
const policyNames = [
  'closest',
  'load-balancing',
  'farthest',
  'cheaper',
  'random-proportional-latency',
  'random-proportional-load',
  'least-impedance',
] as const;
type PolicyName = (typeof policyNames)[number];

/**
 * A static policy: picks one of the feasible candidates (never empty) for a stream. `uniform`
 * is the seeded [0, 1) source the random policies draw from.
 */
type Policy = (stream: Stream, feasible: readonly Candidate[], uniform: () => number) => Candidate;

export { resourceKinds, layers, constraintNames, policyNames };
export type {
  ResourceKind,
  Resources,
  Layer,
  Cluster,
  DnnModel,
  Variant,
  Worker,
  Link,
  LinkSpikes,
  Scheduler,
  Stream,
  Topology,
  ConstraintName,
  Candidate,
  PolicyName,
  Policy,
};
