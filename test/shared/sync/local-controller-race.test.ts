/**
 * Two downstream-sync replicas racing on one service, with a local controller whose deliveries
 * the test holds open and lets land in a chosen order: whatever lands last, the LC ends with the
 * stored version, and the record of what it has never claims more than it got.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnavailableError } from '../../../shared/errors/index.js';
import type { KubeObject } from '../../../shared/k8s/index.js';
import {
  createDownstream,
  createTaskStreams,
  localControllerAnnotation,
} from '../../../shared/sync/index.js';
import type { LocalControllerClient, Task } from '../../../shared/sync/index.js';
import { startApiServer } from '../../support/apiserver.js';
import type { TestApiServer } from '../../support/apiserver.js';
import { testRedis } from '../../support/redis.js';
import type { TestRedis } from '../../support/redis.js';
import { helmetDetectionSample } from '../../support/samples.js';

/** A delivery the test holds open: it lands (the LC applies it) and answers when told to. */
interface Held {
  /** Resolves once the delivery reached the LC. */
  entered: Promise<void>;
  /** The LC applies the delivery now. */
  land(): void;
  /** Answers the delivery; a failure is one the LC never applied. */
  respond(failure?: UnavailableError): void;
}

/** An LC that records what it applied, in order: "<operation> <generation>". */
function fakeLocalController() {
  const applied: string[] = [];
  const apply = (task: Task) => {
    // A POST's body must be the version its headers name.
    const body = task.operation === 'delete' ? task.generation : task.resource.metadata.generation;
    applied.push(
      `${task.operation} ${task.generation}${body === task.generation ? '' : ` body ${body}`}`,
    );
  };
  const holds: Array<(task: Task) => Promise<UnavailableError | undefined>> = [];
  const client: LocalControllerClient = {
    async deliver(_base, task) {
      const hold = holds.shift();
      if (hold === undefined) return apply(task);
      const failure = await hold(task);
      if (failure !== undefined) throw failure;
    },
  };
  const holdNext = (): Held => {
    let enter!: () => void;
    let held: Task | undefined;
    let respond!: (failure?: UnavailableError) => void;
    // A delivery that never comes fails the test at its timeout (no wall-clock bound here).
    const entered = new Promise<void>((resolve) => (enter = resolve));
    const answered = new Promise<UnavailableError | undefined>((resolve) => (respond = resolve));
    holds.push((task) => {
      held = task;
      enter();
      return answered;
    });
    return { entered, land: () => apply(held!), respond };
  };
  return { applied, client, holdNext };
}

describe('downstream-sync replicas racing on one local controller', () => {
  let api: TestApiServer;
  let redis: TestRedis;

  beforeAll(async () => {
    api = await startApiServer();
    redis = await testRedis();
    await api.kube.create('node', undefined, {
      metadata: { name: 'edge0', annotations: { [localControllerAnnotation]: 'http://lc.test/' } },
    });
  });
  afterAll(async () => {
    await redis.close();
    await api.close();
  });

  const setup = () => {
    const lc = fakeLocalController();
    const replica = () =>
      createDownstream({
        kube: api.kube,
        redis: redis.client,
        streams: createTaskStreams(redis.client, { maxLength: 1000 }),
        localControllers: lc.client,
      });
    return { lc, a: replica(), b: replica() };
  };
  const object = (name: string, generation: number): KubeObject => {
    const sample = helmetDetectionSample();
    return {
      ...sample,
      metadata: {
        ...sample.metadata,
        name,
        uid: `uid-${name}`,
        generation,
        creationTimestamp: '2024-01-01T00:00:00Z',
      },
    };
  };
  /** The stored version, and what the LC is recorded to have. */
  const records = async (name: string) => ({
    stored: await redis.client.hget('tasks:{edge0}:versions', `default/${name}`),
    confirmed: await redis.client.hget('tasks:{edge0}:local-controller', `default/${name}`),
  });

  it('follows a late delivery of an older generation with the stored one', async () => {
    const { lc, a, b } = setup();
    await a.sync(object('late-update', 1), false);
    const held = lc.holdNext();
    const slow = b.sync(object('late-update', 2), false);
    await held.entered;
    await a.sync(object('late-update', 3), false);
    held.land();
    held.respond();
    await slow;
    expect(lc.applied).toEqual(['insert 1', 'update 3', 'update 2', 'update 3']);
    const { stored, confirmed } = await records('late-update');
    expect(stored).toMatch(/^update\|uid-late-update\|3\|/);
    expect(confirmed).toBe(stored);
  });

  it('follows a late delivery with the delete that overtook it', async () => {
    const { lc, a, b } = setup();
    await a.sync(object('late-delete', 1), false);
    const held = lc.holdNext();
    const slow = b.sync(object('late-delete', 2), false);
    await held.entered;
    await a.sync(object('late-delete', 2), true);
    held.land();
    held.respond();
    await slow;
    expect(lc.applied).toEqual(['insert 1', 'delete 2', 'update 2', 'delete 2']);
    const { stored, confirmed } = await records('late-delete');
    expect(stored).toMatch(/^delete\|/);
    expect(confirmed).toBe(stored);
  });

  it('lets the redelivered older event resend the stored version when the late replica could not', async () => {
    const { lc, a, b } = setup();
    await a.sync(object('resent', 1), false);
    const held = lc.holdNext();
    const slow = b.sync(object('resent', 2), false);
    await held.entered;
    await a.sync(object('resent', 3), false);
    const retry = lc.holdNext();
    held.land();
    held.respond();
    await retry.entered;
    retry.respond(new UnavailableError('lc down'));
    await expect(slow).rejects.toThrow('lc down');
    // Generation 3's own event is done: only B's redelivered event is left to repair the LC.
    await b.sync(object('resent', 2), false);
    expect(lc.applied).toEqual(['insert 1', 'update 3', 'update 2', 'update 3']);
    const { stored, confirmed } = await records('resent');
    expect(stored).toMatch(/^update\|uid-resent\|3\|/);
    expect(confirmed).toBe(stored);
  });

  it('does not record the newer version as delivered when a late delivery overwrote it, even if the late replica then fails', async () => {
    const { lc, a, b } = setup();
    await a.sync(object('overwritten', 1), false);
    const heldB = lc.holdNext();
    const slow = b.sync(object('overwritten', 2), false);
    await heldB.entered;
    const heldA = lc.holdNext();
    const fast = a.sync(object('overwritten', 3), false);
    await heldA.entered;
    // A's generation 3 lands first, B's generation 2 after it, then B's answer comes back.
    heldA.land();
    const retryB = lc.holdNext();
    heldB.land();
    heldB.respond();
    // B resends generation 3, and the LC fails it.
    await retryB.entered;
    retryB.respond(new UnavailableError('lc down'));
    await expect(slow).rejects.toThrow('lc down');
    // Only now A's answer comes back: its generation 3 did land, but before B's generation 2.
    heldA.respond();
    await fast;
    // Knative redelivers B's event.
    await b.sync(object('overwritten', 2), false);
    expect(lc.applied).toEqual(['insert 1', 'update 3', 'update 2', 'update 3']);
    const { stored, confirmed } = await records('overwritten');
    expect(stored).toMatch(/^update\|uid-overwritten\|3\|/);
    expect(confirmed).toBe(stored);
  });

  it('resends the stored version after a delivery that timed out but landed late', async () => {
    const { lc, a, b } = setup();
    await a.sync(object('timed-out', 1), false);
    const held = lc.holdNext();
    const slow = b.sync(object('timed-out', 2), false);
    await held.entered;
    await a.sync(object('timed-out', 3), false);
    // B's POST reaches the LC after generation 3 did, but B saw a timeout.
    held.land();
    held.respond(new UnavailableError('local controller timed out'));
    await expect(slow).rejects.toThrow('timed out');
    // Knative redelivers B's event: the LC must not be left on generation 2.
    await b.sync(object('timed-out', 2), false);
    expect(lc.applied).toEqual(['insert 1', 'update 3', 'update 2', 'update 3']);
    const { stored, confirmed } = await records('timed-out');
    expect(confirmed).toBe(stored);
  });
});
