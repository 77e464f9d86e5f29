/**
 * One keep-alive HTTP/1.1 connection of the graph client (http1-client.ts): the requests written
 * on it, oldest first, each answered in turn as its response is read (http1-response.ts). What
 * becomes of a call (answered, failed, sent again on another connection) its owner decides.
 */
import { connect } from 'node:net';
import type { Socket } from 'node:net';
import type { HttpAnswer } from '../http/index.js';
import { ResponseParser } from './http1-response.js';
import type { WireResponse } from './http1-response.js';

interface Call {
  /** Request line and headers, ending with the blank line. */
  head: string;
  body: Buffer | string | undefined;
  /** Fails the call at its deadline (shared/http's deadline book calls it). */
  expire: () => void;
  signal: AbortSignal | undefined;
  state: 'waiting' | 'sent' | 'over';
  /** Sent again once already after a connection closed unanswered. */
  resent: boolean;
  resolve(answer: HttpAnswer): void;
  reject(error: Error): void;
}

/** What a connection asks of the server's pool it belongs to. */
interface ConnectionOwner {
  /** Calls the server will not answer on this connection: on another, once. */
  resend(calls: readonly Call[]): void;
  /** Ends a call once (its answer or failure). */
  settle(call: Call, answer: () => void): void;
  /** The connection closed: no new calls on it. */
  forget(connection: Connection): void;
}

/** An idle connection is closed after this long, before a server's keep-alive timeout (node: 5 s). */
const idleMs = 4_000;

function answerOf(response: WireResponse): HttpAnswer {
  const { headers } = response;
  return { status: response.status, header: (name) => headers[name], body: response.body };
}

class Connection {
  readonly socket: Socket;
  /** Calls written, oldest first: answers come in this order. */
  readonly sent: Call[] = [];
  /** Answers received on it so far. */
  answered = 0;
  /** The server said it closes after an answer, or the socket failed: no new calls. */
  closing = false;
  private readonly parser: ResponseParser;
  /** What broke it (refused, reset, an unreadable answer): the calls still out fail with it. */
  private failure: Error | undefined;

  constructor(
    private readonly owner: ConnectionOwner,
    host: string,
    port: number,
  ) {
    this.parser = new ResponseParser((response) => this.onResponse(response));
    this.socket = connect({ host, port, noDelay: true });
    this.socket.setTimeout(idleMs);
    this.socket.on('data', (chunk: Buffer) => {
      try {
        this.parser.feed(chunk);
      } catch (error) {
        this.failure = new Error(`unreadable answer: ${(error as Error).message}`);
        this.socket.destroy();
      }
    });
    this.socket.on('end', () => {
      this.parser.end();
      this.socket.end();
    });
    this.socket.on('timeout', () => {
      if (this.sent.length === 0) this.socket.destroy();
    });
    this.socket.on('error', (error) => {
      // 'close' follows, with the calls still out: they fail there, with this.
      this.failure ??= error;
    });
    this.socket.on('close', () => this.onClose());
  }

  write(calls: readonly Call[]): void {
    const { socket } = this;
    socket.cork();
    for (const call of calls) {
      call.state = 'sent';
      this.sent.push(call);
      socket.write(call.head);
      if (call.body !== undefined && call.body.length > 0) socket.write(call.body);
    }
    socket.uncork();
  }

  /** Every call on it is over (timed out, aborted): nothing to wait for, so it goes. */
  dropIfAbandoned(): void {
    if (this.sent.length > 0 && this.sent.every((c) => c.state === 'over')) this.socket.destroy();
  }

  private onResponse(response: WireResponse): void {
    const call = this.sent.shift();
    if (call === undefined) {
      this.socket.destroy(new Error('an answer to no request'));
      return;
    }
    this.answered += 1;
    if (response.closes) {
      this.closing = true;
      // The server will not answer what was sent after this: it goes on another connection.
      this.owner.resend(this.sent.splice(0));
    }
    this.owner.settle(call, () => call.resolve(answerOf(response)));
  }

  private onClose(): void {
    this.closing = true;
    this.owner.forget(this);
    const unanswered = this.sent.splice(0).filter((c) => c.state !== 'over');
    if (unanswered.length === 0) return;
    // Closed before any byte of an answer, on a connection that had answered before: the
    // server closed it idle as the requests went (not read). Otherwise they are lost.
    const unread = this.answered > 0 && !this.parser.midResponse();
    const again = unread ? unanswered.filter((c) => !c.resent) : [];
    for (const call of again) call.resent = true;
    this.owner.resend(again);
    const failure =
      this.failure ?? Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    for (const call of unanswered.filter((c) => !again.includes(c)))
      this.owner.settle(call, () => call.reject(failure));
  }
}

export { Connection };
export type { Call, ConnectionOwner };
