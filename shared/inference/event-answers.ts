/**
 * One answer per inference CloudEvent. The Broker delivers at least once, and a redelivery may
 * reach another replica: answering it again would count its inputs twice in the worker's report
 * and offload (or emit as hard examples) its hard samples twice. So the first delivery claims the
 * event in Redis (a renewed lease), answers, and stores the answer; a redelivery to any replica
 * gets the stored answer, or a 503 while the first is still answering (the Broker retries it). In front of that,
 * each replica keeps its recent answers in memory, which also joins concurrent deliveries to the
 * same replica.
 */
import { randomUUID } from 'node:crypto';
import { UnavailableError } from '../errors/index.js';
// By file, not the domain's index: the index loads ioredis, which a worker without Redis never needs.
import { runScript } from '../redis/client.js';
import type { RedisClient } from '../redis/client.js';
import { hashTag, key } from '../redis/keys.js';
import { claimAnswer, releaseAnswer, renewAnswer } from './lua/index.js';

/** Runs `answer` for the first delivery of the event `eventKey`; later ones get its result. */
type AnswerOnce = (eventKey: string, answer: () => Promise<unknown>) => Promise<unknown>;

/**
 * What a claim stores while its owner answers: this prefix and the owner's token. No JSON text
 * starts with it, so a stored answer is never taken for a claim.
 */
const claimPrefix = 'claimed:';

/** This replica's memory of recent events (bounded), then `next` for the ones it has not seen. */
function localAnswers(next?: AnswerOnce, limit = 1000): AnswerOnce {
  const recent = new Map<string, Promise<unknown>>();
  return (eventKey, answer) => {
    const hit = recent.get(eventKey);
    if (hit !== undefined) return hit;
    const result = next === undefined ? answer() : next(eventKey, answer);
    recent.set(eventKey, result);
    result.catch(() => recent.delete(eventKey));
    if (recent.size > limit) recent.delete(recent.keys().next().value!);
    return result;
  };
}

/**
 * Answers shared by every replica of `scope` (the edge service) through Redis. A claim is a
 * lease of `leaseSeconds` that its owner renews while it answers, so a replica that crashes
 * mid-answer frees the event within one lease — before the sender's retries run out, when the
 * lease is shorter than its retry window — however slow a live answer may be. `keepSeconds`
 * must outlast the sender's retries; every stored answer holds Redis memory that long.
 */
function sharedAnswers(
  redis: RedisClient,
  options: {
    scope: string;
    leaseSeconds: number;
    keepSeconds: number;
    warn: (fields: Record<string, unknown>, message: string) => void;
  },
): AnswerOnce {
  const lease = String(options.leaseSeconds);
  return async (eventKey, answer) => {
    const at = key('answer', hashTag(options.scope), eventKey);
    const token = `${claimPrefix}${randomUUID()}`;
    const [won, stored] = await runScript(
      redis,
      claimAnswer,
      [at, lease, token],
      (reply) => reply as [number, string?],
    );
    if (won !== 1) {
      // '' is the claim of a replica from before claims carried a token (a rolling upgrade).
      if (stored === '' || stored!.startsWith(claimPrefix)) {
        throw new UnavailableError('another replica is answering this event; retry it', 1);
      }
      return JSON.parse(stored!) as unknown;
    }
    const renewal = setInterval(
      () => {
        runScript(redis, renewAnswer, [at, lease, token], () => undefined).catch((err: unknown) => {
          options.warn(
            { err: err instanceof Error ? err.message : String(err) },
            'event claim not renewed',
          );
        });
      },
      (options.leaseSeconds * 1000) / 3,
    );
    renewal.unref();
    let result: unknown;
    try {
      result = await answer();
    } catch (err) {
      await runScript(redis, releaseAnswer, [at, token], () => undefined).catch(() => undefined);
      throw err;
    } finally {
      clearInterval(renewal);
    }
    // The answer is computed and counted: deliver it even if it cannot be stored. Only a later
    // redelivery would then answer again (after the lease).
    await redis.set(at, JSON.stringify(result), 'EX', options.keepSeconds).catch((err: unknown) => {
      options.warn(
        { err: err instanceof Error ? err.message : String(err) },
        'event answer not stored',
      );
    });
    return result;
  };
}

export { localAnswers, sharedAnswers };
export type { AnswerOnce };
