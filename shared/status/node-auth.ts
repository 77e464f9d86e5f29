/**
 * Who is reporting. Each edge node has a token in a Secret `edgeai-node-<node>` (key `token`) in
 * one namespace; a report names its node and proves it holds the token: a bearer token over HTTP,
 * or an HMAC of the event for the CloudEvent form (which crosses the Broker, where headers do
 * not). Tokens are cached briefly so a burst of reports costs one Secret read.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { NotFoundError, UnauthorizedError } from '../errors/index.js';
import type { Kube } from '../k8s/index.js';

interface NodeTokens {
  /** The node's token, or undefined when the node has none (unknown node). */
  token(node: string): Promise<Buffer | undefined>;
}

const nodeName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function secretName(node: string): string {
  return `edgeai-node-${node}`;
}

/** Tokens read from Secrets through the API server, cached for `ttlMs` (also when absent). */
function secretTokens(kube: Kube, namespace: string, ttlMs: number, now = Date.now): NodeTokens {
  const cache = new Map<string, { token: Buffer | undefined; until: number }>();
  return {
    async token(node) {
      const hit = cache.get(node);
      if (hit !== undefined && hit.until > now()) return hit.token;
      let token: Buffer | undefined;
      try {
        const secret = await kube.get({ kind: 'secret', namespace, name: secretName(node) });
        const data = (secret['data'] as Record<string, string> | undefined)?.['token'];
        token = data === undefined || data === '' ? undefined : Buffer.from(data, 'base64');
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
      cache.set(node, { token, until: now() + ttlMs });
      return token;
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
  const node = checkNodeName(header('x-edgeai-node'), 'X-Edgeai-Node header');
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

/** What the event form signs: id, subject and the data as JSON text. */
function signedText(id: string, subject: string, data: unknown): string {
  return `${id}\n${subject}\n${JSON.stringify(data)}`;
}

/** The signature a node puts in the `edgeaisig` extension (hex HMAC-SHA256 with its token). */
function signReport(token: Buffer, id: string, subject: string, data: unknown): string {
  return createHmac('sha256', token)
    .update(signedText(id, subject, data))
    .digest('hex');
}

/** Event form: extensions `edgeainode` and `edgeaisig`. */
async function authenticateSignature(
  tokens: NodeTokens,
  event: {
    id: string;
    subject: string;
    data: unknown;
    extensions: Readonly<Record<string, unknown>>;
  },
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
  const expected = await tokens.token(node);
  const valid =
    expected !== undefined &&
    timingSafeEqual(
      Buffer.from(signature, 'hex'),
      Buffer.from(signReport(expected, event.id, event.subject, event.data), 'hex'),
    );
  if (!valid) throw new UnauthorizedError(`node ${node}: signature not accepted`);
  return node;
}

export { secretTokens, authenticateBearer, authenticateSignature, signReport, secretName };
export type { NodeTokens };
