/**
 * HTTP/1.1 responses read off one connection, as many as arrive back to back (the answers to
 * pipelined requests): status, headers (lower-case names, the first value of a repeated one) and
 * the whole body, framed by Content-Length, chunked transfer coding, or the connection's end.
 * A body that arrives whole in one read is a view of it, not a copy. Interim 1xx answers are
 * skipped. Malformed input is an error: the connection it came on cannot be trusted after it.
 */

interface WireResponse {
  status: number;
  headers: Readonly<Record<string, string>>;
  body: Buffer;
  /** The server closes the connection after this response (`connection: close`, HTTP/1.0). */
  closes: boolean;
}

/** A head larger than this is refused (node:http's default limit is 16 kB). */
const maxHeadBytes = 64 * 1024;
const crlf = Buffer.from('\r\n');
const blankLine = Buffer.from('\r\n\r\n');

type Framing =
  | { kind: 'head' }
  | { kind: 'fixed'; remaining: number }
  | { kind: 'chunk-size' }
  | { kind: 'chunk-data'; remaining: number }
  | { kind: 'chunk-end' }
  | { kind: 'trailers' }
  | { kind: 'until-close' };

class ResponseParser {
  /** Bytes received and not consumed yet (part of a head or a chunk-size line). */
  private rest: Buffer | undefined;
  private framing: Framing = { kind: 'head' };
  private current: { status: number; headers: Record<string, string>; closes: boolean } | undefined;
  private parts: Buffer[] = [];
  /** Some bytes of a response not yet complete have arrived. */
  private started = false;

  constructor(private readonly onResponse: (response: WireResponse) => void) {}

  /** Whether part of a response has arrived (a close now loses it, not an unsent request). */
  midResponse(): boolean {
    return this.started || this.rest !== undefined;
  }

  /** Bytes from the connection; each response completed by them is handed on, in order. */
  feed(chunk: Buffer): void {
    const buf = this.rest === undefined ? chunk : Buffer.concat([this.rest, chunk]);
    this.rest = undefined;
    let at = 0;
    while (at < buf.length) {
      const next = this.step(buf, at);
      if (next < 0) {
        // Incomplete: what is left waits for the next chunk.
        this.rest = at === 0 ? buf : buf.subarray(at);
        if (this.rest.length > maxHeadBytes) throw new Error('response head too large');
        return;
      }
      at = next;
    }
  }

  /** The connection ended: a body framed by the close is complete now. */
  end(): void {
    if (this.framing.kind === 'until-close' && this.current !== undefined) this.finish();
  }

  /** Parses from `at`; returns where the next step starts, or -1 when more bytes are needed. */
  private step(buf: Buffer, at: number): number {
    const framing = this.framing;
    switch (framing.kind) {
      case 'head':
        return this.readHead(buf, at);
      case 'fixed':
      case 'chunk-data': {
        const take = Math.min(framing.remaining, buf.length - at);
        this.parts.push(buf.subarray(at, at + take));
        framing.remaining -= take;
        if (framing.remaining === 0) {
          if (framing.kind === 'fixed') this.finish();
          else this.framing = { kind: 'chunk-end' };
        }
        return at + take;
      }
      case 'until-close':
        this.parts.push(buf.subarray(at));
        return buf.length;
      default:
        return this.chunkFraming(framing.kind, buf, at);
    }
  }

  /** A chunk's size line, the CRLF after its data, the trailers after the last. */
  private chunkFraming(kind: 'chunk-size' | 'chunk-end' | 'trailers', buf: Buffer, at: number) {
    if (kind === 'chunk-size') {
      const end = buf.indexOf(crlf, at);
      if (end < 0) return -1;
      const text = buf.toString('latin1', at, end).split(';')[0]!.trim();
      if (!/^[0-9a-fA-F]{1,8}$/.test(text)) throw new Error(`bad chunk size ${text}`);
      const size = parseInt(text, 16);
      this.framing = size === 0 ? { kind: 'trailers' } : { kind: 'chunk-data', remaining: size };
      return end + 2;
    }
    if (buf.length - at < 2) return -1;
    const blank = buf[at] === 13 && buf[at + 1] === 10;
    if (kind === 'chunk-end') {
      if (!blank) throw new Error('chunk not ended by CRLF');
      this.framing = { kind: 'chunk-size' };
      return at + 2;
    }
    // No trailers: one CRLF; else trailer lines up to a blank line (ignored).
    const end = blank ? at - 2 : buf.indexOf(blankLine, at);
    if (end === -1 && !blank) return -1;
    this.finish();
    return end + 4;
  }

  private readHead(buf: Buffer, at: number): number {
    this.started = true;
    const end = buf.indexOf(blankLine, at);
    if (end < 0) return -1;
    const { status, closes, headers } = parseHead(buf.toString('latin1', at, end));
    if (status >= 100 && status < 200 && status !== 101) {
      // An interim answer (100 Continue, 103 Early Hints): the real one follows.
      this.started = false;
      return end + 4;
    }
    this.current = { status, headers, closes };
    const framing = framingOf(status, headers);
    if (framing === undefined) this.finish();
    else this.framing = framing;
    return end + 4;
  }

  private finish(): void {
    const current = this.current;
    if (current === undefined) return;
    const { parts } = this;
    const body =
      parts.length === 0 ? Buffer.alloc(0) : parts.length === 1 ? parts[0]! : Buffer.concat(parts);
    this.current = undefined;
    this.parts = [];
    this.started = false;
    this.framing = { kind: 'head' };
    this.onResponse({ ...current, body });
  }
}

/** The status line and headers (lower-case names, the first of a repeated one). */
function parseHead(text: string) {
  const lines = text.split('\r\n');
  const statusLine = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0]!);
  if (statusLine === null)
    throw new Error(`not an HTTP/1.x status line: ${lines[0]!.slice(0, 40)}`);
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  for (let i = 1; i < lines.length; i += 1) {
    const line = lines[i]!;
    const colon = line.indexOf(':');
    if (colon <= 0) throw new Error('malformed header line');
    headers[line.slice(0, colon).trim().toLowerCase()] ??= line.slice(colon + 1).trim();
  }
  const connection = headers['connection']?.toLowerCase();
  const closes = connection === 'close' || (statusLine[1] === '0' && connection !== 'keep-alive');
  return { status: Number(statusLine[2]), closes, headers };
}

/** How the body after a head ends; undefined when there is none. */
function framingOf(status: number, headers: Readonly<Record<string, string>>): Framing | undefined {
  if (headers['transfer-encoding']?.toLowerCase().includes('chunked') === true)
    return { kind: 'chunk-size' };
  if (status === 204 || status === 304 || status === 101) return undefined;
  const length = headers['content-length'];
  if (length === undefined) return { kind: 'until-close' };
  if (!/^\d{1,15}$/.test(length)) throw new Error(`bad content-length ${length}`);
  const remaining = Number(length);
  return remaining === 0 ? undefined : { kind: 'fixed', remaining };
}

export { ResponseParser };
export type { WireResponse };
