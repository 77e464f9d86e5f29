/**
 * One revision of a Knative Service run as one local process: started on a port, probed until
 * ready, restarted with exponential backoff when it exits (CrashLoopBackOff), stopped with
 * SIGTERM and, after a grace period, SIGKILL. Its environment is built again on every start, as
 * the kubelet does, so a Secret created or changed meanwhile is picked up by the next restart.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { probeOnce } from './probe.js';
import type { Probe, RevisionRef } from './types.js';

type Phase = 'starting' | 'ready' | 'failed';

/** What to run: decided for each start (the environment names the port). */
interface Launch {
  command: string;
  args: readonly string[];
  env: Record<string, string>;
  cwd: string | undefined;
}

interface RevisionOptions {
  ref: RevisionRef;
  generation: number;
  probe: Probe | undefined;
  /** Builds the process's command and environment; a throw fails this start (retried). */
  launch(port: number): Promise<Launch>;
  /** A free port no other revision holds; `releasePort` gives it back. */
  pickPort(): Promise<number>;
  releasePort(port: number): void;
  backoff: { initialMs: number; maxMs: number };
  graceMs: number;
  onLog:
    ((source: RevisionRef & { stream: 'stdout' | 'stderr' }, line: string) => void) | undefined;
  /** The phase, failure, port or process changed. */
  onChange(): void;
}

/** How long a process must have been ready for a later exit to restart the backoff. */
const backoffResetMs = 10_000;
const probeIntervalMs = 100;
const tailLines = 5;
const maxLineLength = 300;

class Revision {
  readonly ref: RevisionRef;
  readonly generation: number;
  #phase: Phase = 'starting';
  #failure: string | undefined;
  #everReady = false;
  #readySince: number | undefined;
  #port: number | undefined;
  #child: ChildProcess | undefined;
  #restarts = 0;
  #failures = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopping: Promise<void> | undefined;
  readonly #options: RevisionOptions;
  readonly #tail = { stdout: [] as string[], stderr: [] as string[] };

  constructor(options: RevisionOptions) {
    this.#options = options;
    this.ref = options.ref;
    this.generation = options.generation;
  }

  get phase(): Phase {
    return this.#phase;
  }

  /** Why the last start failed or the process exited, while it is not ready again. */
  get failure(): string | undefined {
    return this.#failure;
  }

  /** The process's own URL once it has been ready (a restart takes a new port: use the route). */
  get url(): string | undefined {
    return this.#everReady && this.#port !== undefined
      ? `http://127.0.0.1:${this.#port}`
      : undefined;
  }

  get port(): number | undefined {
    return this.#port;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  get restarts(): number {
    return this.#restarts;
  }

  start(): void {
    void this.#attempt();
  }

  async #attempt(): Promise<void> {
    this.#timer = undefined;
    if (this.#stopping !== undefined) return;
    let launch: Launch;
    try {
      // Every start takes a fresh port: one someone else grabbed while this revision was down
      // must not fail it for ever, nor answer its readiness probe. Callers reach it through the
      // Service's route, whose port does not change.
      {
        const port = await this.#options.pickPort();
        if (this.#stopping !== undefined) {
          this.#options.releasePort(port);
          return;
        }
        if (this.#port !== undefined) this.#options.releasePort(this.#port);
        this.#port = port;
      }
      launch = await this.#options.launch(this.#port);
    } catch (err) {
      if (this.#stopping === undefined)
        this.#fail(err instanceof Error ? err.message : String(err));
      return;
    }
    if (this.#stopping !== undefined) return;
    this.#tail.stdout = [];
    this.#tail.stderr = [];
    const child = spawn(launch.command, launch.args, {
      cwd: launch.cwd,
      env: launch.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.#child = child;
    this.#readySince = undefined;
    this.#follow(child.stdout, 'stdout');
    this.#follow(child.stderr, 'stderr');
    child.once('exit', (code, signal) => this.#exited(child, code, signal, undefined));
    child.once('error', (err) => this.#exited(child, null, null, err));
    this.#options.onChange();
    void this.#probe(child, this.#port);
  }

  #follow(stream: Readable | null, name: 'stdout' | 'stderr'): void {
    if (stream === null) return;
    const lines = createInterface({ input: stream, crlfDelay: Infinity });
    lines.on('line', (line) => {
      const tail = this.#tail[name];
      tail.push(line.length > maxLineLength ? `${line.slice(0, maxLineLength)}...` : line);
      if (tail.length > tailLines) tail.shift();
      this.#options.onLog?.({ ...this.ref, stream: name }, line);
    });
  }

  async #probe(child: ChildProcess, port: number): Promise<void> {
    while (this.#child === child && this.#stopping === undefined) {
      const ok = await probeOnce(port, this.#options.probe);
      if (this.#child !== child || this.#stopping !== undefined) return;
      if (ok) {
        this.#phase = 'ready';
        this.#failure = undefined;
        this.#everReady = true;
        this.#readySince = Date.now();
        this.#options.onChange();
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, probeIntervalMs));
    }
  }

  #exited(
    child: ChildProcess,
    code: number | null,
    signal: NodeJS.Signals | null,
    error: Error | undefined,
  ): void {
    if (this.#child !== child) return;
    this.#child = undefined;
    if (this.#stopping !== undefined) return;
    if (this.#readySince !== undefined && Date.now() - this.#readySince >= backoffResetMs)
      this.#failures = 0;
    this.#restarts += 1;
    const how =
      error !== undefined
        ? `could not be started (${error.message})`
        : signal !== null
          ? `was killed by ${signal}`
          : `exited with code ${code ?? 'unknown'}`;
    const last = this.#tail.stderr.at(-1) ?? this.#tail.stdout.at(-1);
    this.#fail(`Container failed: the process ${how}${last === undefined ? '' : `: ${last}`}`);
  }

  /** Marks the failure and schedules the next start with exponential backoff. */
  #fail(message: string): void {
    const { initialMs, maxMs } = this.#options.backoff;
    const delay = Math.min(maxMs, initialMs * 2 ** this.#failures);
    this.#failures += 1;
    this.#phase = 'failed';
    this.#failure = `${message} (restarting in ${formatDelay(delay)})`;
    this.#timer = setTimeout(() => void this.#attempt(), delay);
    this.#options.onChange();
  }

  /** SIGTERM, then SIGKILL after the grace period; resolves once the process is gone. */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    clearTimeout(this.#timer);
    const child = this.#child;
    if (child !== undefined && child.pid !== undefined && alive(child)) {
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), this.#options.graceMs);
      await exited;
      clearTimeout(force);
    }
    this.#child = undefined;
    if (this.#port !== undefined) this.#options.releasePort(this.#port);
  }

  /** For a parent that is exiting right now: no grace, no waiting. */
  killNow(): void {
    const child = this.#child;
    if (child !== undefined && alive(child)) child.kill('SIGKILL');
  }
}

function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

function formatDelay(ms: number): string {
  return ms >= 1000 ? `${Math.round(ms / 100) / 10}s` : `${ms}ms`;
}

export { Revision };
export type { Launch, Phase, RevisionOptions };
