/**
 * Who is reporting. Each edge node has a token in a Secret `edgeai-node-<node>` (key `token`) in
 * one namespace; a report names its node and proves it holds the token: a bearer token over HTTP,
 * or an HMAC of the event for the CloudEvent form (which crosses the Broker, where headers do
 * not; a signed time bounds how long a captured event can be replayed). Tokens are cached
 * briefly so a burst of reports costs one Secret read.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { NotFoundError, UnauthorizedError } from '../errors/index.js';
import type { Kube } from '../k8s/index.js';
import { nodeHeader, nodeTokenSecret } from '../messages/worker-message.js';

interface NodeTokens {
  /** The node's token, or undefined when the node has none (unknown node). */
  token(node: string): Promise<Buffer | undefined>;
}

const nodeName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function secretName(node: string): string {
  return nodeTokenSecret.name(node);
}

/**
 * Tokens read from Secrets through the API server, cached for `ttlMs` (also when absent). Node
 * names come from the request before its token is checked, so the cache is an LRU of at most
 * `maxEntries`: a client inventing names evicts entries instead of growing memory. Concurrent
 * requests for one node share its read, so a burst costs one Secret read, not one each.
 */
function secretTokens(
  kube: Kube,
  namespace: string,
  ttlMs: number,
  options: { maxEntries?: number; now?: () => number } = {},
): NodeTokens {
  const { maxEntries = 1024, now = Date.now } = options;
  const cache = new Map<string, { token: Buffer | undefined; until: number }>();
  const reading = new Map<string, Promise<Buffer | undefined>>();

  async function read(node: string): Promise<Buffer | undefined> {
    let token: Buffer | undefined;
    try {
      const secret = await kube.get({ kind: 'secret', namespace, name: secretName(node) });
      const data = (secret['data'] as Record<string, string> | undefined)?.[nodeTokenSecret.key];
      token = data === undefined || data === '' ? undefined : Buffer.from(data, 'base64');
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
    }
    if (ttlMs > 0) {
      // Map order is insertion order: re-inserting marks an entry most recently used.
      cache.delete(node);
      cache.set(node, { token, until: now() + ttlMs });
      if (cache.size > maxEntries) cache.delete(cache.keys().next().value!);
    }
    return token;
  }

  return {
    token(node) {
      const hit = cache.get(node);
      if (hit !== undefined) {
        cache.delete(node);
        if (hit.until > now()) {
          cache.set(node, hit);
          return Promise.resolve(hit.token);
        }
      }
      let pending = reading.get(node);
      if (pending === undefined) {
        pending = read(node).finally(() => reading.delete(node));
        reading.set(node, pending);
      }
      return pending;
    },
  };
}

/** Compares digests so neither the length nor the content leaks through timing. */
function sameSecret(given: Buffer, expected: Buffer): boolean {
  const a = createHash('sha256').update(given).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

function checkNodeName(node: string | undefined, where: string): string {
  if (node === undefined || node === '')
    throw new UnauthorizedError(`${where}: required (the reporting node)`);
  if (node.length > 253 || !nodeName.test(node))
    throw new UnauthorizedError(`${where}: not a node name`);
  return node;
}

/** HTTP form: `X-Edgeai-Node: <node>` and `Authorization: Bearer <token>`. */
async function authenticateBearer(
  tokens: NodeTokens,
  headers: Readonly<Record<string, string | string[] | undefined>>,
): Promise<string> {
  const header = (name: string) => {
    const value = headers[name];
    return Array.isArray(value) ? value[0] : value;
  };
  const node = checkNodeName(header(nodeHeader), 'X-Edgeai-Node header');
  const authorization = header('authorization');
  const match =
    authorization === undefined ? null : /^Bearer ([\x21-\x7e]{1,512})$/.exec(authorization);
  if (match === null)
    throw new UnauthorizedError('Authorization header: expected "Bearer <node token>"');
  const expected = await tokens.token(node);
  if (expected === undefined || !sameSecret(Buffer.from(match[1]!), expected)) {
    throw new UnauthorizedError(`node ${node}: token not accepted`);
  }
  return node;
}

/**
 * What the event form signs: id, subject, time and the data as JSON text. The time is signed so
 * a captured event cannot be replayed once it is older than the accepted age; it is signed as
 * UTC ISO-8601 with milliseconds (toISOString) because a Broker may re-format the attribute.
 */
function signedText(id: string, subject: string, time: string, data: unknown): string {
  return `${id}\n${subject}\n${new Date(time).toISOString()}\n${JSON.stringify(data)}`;
}

/**
 * The signature a node puts in the `edgeaisig` extension (hex HMAC-SHA256 with its token);
 * `time` is the event's `time` attribute. Throws a RangeError for a time that is not a date.
 */
function signReport(
  token: Buffer,
  id: string,
  subject: string,
  time: string,
  data: unknown,
): string {
  return createHmac('sha256', token)
    .update(signedText(id, subject, time, data))
    .digest('hex');
}

/**
 * Event form: extensions `edgeainode` and `edgeaisig`, and a `time` within `maxAgeMs` of this
 * server's clock either way (ahead too, or a node with a fast clock could sign reports that
 * stay replayable for as long as it is ahead).
 */
async function authenticateSignature(
  tokens: NodeTokens,
  event: {
    id: string;
    subject: string;
    time: string | undefined;
    data: unknown;
    extensions: Readonly<Record<string, unknown>>;
  },
  options: { maxAgeMs: number; now?: () => number },
): Promise<string> {
  const rawNode = event.extensions['edgeainode'];
  const node = checkNodeName(
    typeof rawNode === 'string' ? rawNode : undefined,
    'edgeainode extension',
  );
  const signature = event.extensions['edgeaisig'];
  if (typeof signature !== 'string' || !/^[0-9a-f]{64}$/.test(signature)) {
    throw new UnauthorizedError('edgeaisig extension: expected a hex HMAC-SHA256 of the report');
  }
  const sent = event.time === undefined ? Number.NaN : Date.parse(event.time);
  if (event.time === undefined || Number.isNaN(sent)) {
    throw new UnauthorizedError(
      'time attribute: required on a signed report (it is signed, so an old report cannot be replayed)',
    );
  }
  const expected = await tokens.token(node);
  const valid =
    expected !== undefined &&
    timingSafeEqual(
      Buffer.from(signature, 'hex'),
      Buffer.from(signReport(expected, event.id, event.subject, event.time, event.data), 'hex'),
    );
  if (!valid) throw new UnauthorizedError(`node ${node}: signature not accepted`);
  const skew = (options.now ?? Date.now)() - sent;
  if (Math.abs(skew) > options.maxAgeMs) {
    const seconds = Math.round(Math.abs(skew) / 1000);
    throw new UnauthorizedError(
      `time attribute: ${event.time} is ${seconds} s ${skew > 0 ? 'old' : 'ahead of this server'}, more than the ${options.maxAgeMs / 1000} s accepted; refused as a possible replay`,
    );
  }
  return node;
}

export { secretTokens, authenticateBearer, authenticateSignature, signReport, secretName };
export type { NodeTokens };
