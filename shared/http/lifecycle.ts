/**
 * A function's process, crash-only. It serves until told to stop or until something escapes:
 *  - SIGTERM (Knative's scale-down, sent once queue-proxy has drained the pod) or SIGINT: drain,
 *    release what the function holds, exit 0.
 *  - an uncaught exception or an unhandled rejection, anywhere: logged (fatal) with the trace ids
 *    of the requests in flight, then the same drain, and exit 1 so that Knative restarts the
 *    container instead of leaving a process in an unknown state serving traffic.
 * Draining: readiness answers 503, the listener closes (no new connection is accepted), idle
 * connections close, the requests in flight finish (their answers say `Connection: close`), and
 * after `drainTimeoutMs` whatever is left is cut and the process exits 1.
 */
import type { Server } from 'node:http';
import type { FunctionDefinition } from './define.js';
import { safely } from './handler.js';
import { createFront } from './server.js';
import type { ServerOptions } from './server.js';

/** The parts of `process` this file uses: tests pass a fake one. */
interface ProcessPort {
  on(event: 'uncaughtException', listener: (err: Error, origin: string) => void): unknown;
  on(event: 'unhandledRejection', listener: (reason: unknown) => void): unknown;
  once(event: 'SIGTERM' | 'SIGINT', listener: (signal: NodeJS.Signals) => void): unknown;
  exit(code: number): void;
  exitCode?: number | string | undefined | null;
}

interface ServeOptions extends ServerOptions {
  definition: FunctionDefinition;
  /** Releases what the function holds (clients, workers); called once, after the drain. */
  close(): Promise<void>;
  port: number;
  /** Default: every interface. */
  host?: string;
  drainTimeoutMs: number;
  /** Default: the real process. */
  process?: ProcessPort;
}

interface Serving {
  readonly server: Server;
  /** The port once listening. */
  readonly listening: Promise<number>;
  /** Starts the drain as SIGTERM does; `code` is the exit code once drained. */
  stop(reason: string, code: number): void;
}

/** At most this many trace ids on a crash's log line. */
const listedInFlight = 100;

/**
 * Serves `definition` on `port` and owns the process's end: the signals, the crash handlers,
 * the drain and the exit code. Call once per process.
 */
function serveFunction(options: ServeOptions): Serving {
  const proc: ProcessPort = options.process ?? process;
  const { log } = options.telemetry;
  const { server, handler } = createFront(options.definition, options);
  let code = 0;
  let draining = false;

  const exit = (exitCode: number) => {
    code = Math.max(code, exitCode);
    proc.exit(code);
  };
  /** Releases what the function holds, then exits; `force` still bounds a close that hangs. */
  const release = (force: NodeJS.Timeout) => {
    options.close().then(
      () => {
        clearTimeout(force);
        exit(code);
      },
      (err: unknown) => {
        clearTimeout(force);
        safely(() => log.error({ err }, 'close failed'));
        exit(1);
      },
    );
  };
  /**
   * Starts the drain (once; a later call only raises the exit code). The listener is closed
   * before this returns, so whoever reads the log line written next finds it closed.
   */
  const drain = (reason: string, exitCode: number): boolean => {
    code = Math.max(code, exitCode);
    // A natural exit (the event loop emptied before the drain ended) keeps the code too.
    proc.exitCode = code;
    if (draining) return false;
    draining = true;
    handler.drain(reason);
    const force = setTimeout(() => {
      safely(() =>
        log.error({ inFlight: handler.inFlight().slice(0, listedInFlight) }, 'drain timed out'),
      );
      server.closeAllConnections();
      exit(1);
    }, options.drainTimeoutMs);
    server.close(() => release(force));
    server.closeIdleConnections();
    return true;
  };
  const stop = (reason: string, exitCode: number) => {
    if (drain(reason, exitCode)) {
      safely(() => log.info({ reason, inFlight: handler.inFlight().length }, 'draining'));
    }
  };
  const crash = (err: unknown, origin: string) => {
    drain(`crashed: ${origin}`, 1);
    safely(() =>
      log.fatal(
        { err, origin, inFlight: handler.inFlight().slice(0, listedInFlight) },
        'crashed: draining, then exiting 1',
      ),
    );
  };

  proc.on('uncaughtException', (err, origin) => crash(err, origin));
  proc.on('unhandledRejection', (reason) => crash(reason, 'unhandledRejection'));
  proc.once('SIGTERM', (signal) => stop(signal, 0));
  proc.once('SIGINT', (signal) => stop(signal, 0));

  const listening = new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      const address = server.address();
      resolve(typeof address === 'object' && address !== null ? address.port : options.port);
    });
  });
  listening.then(
    (port) => safely(() => log.info({ port }, 'serving')),
    (err: unknown) => {
      safely(() => log.fatal({ err }, 'cannot listen'));
      exit(1);
    },
  );
  return { server, listening, stop };
}

export { serveFunction };
export type { ServeOptions, Serving, ProcessPort };
