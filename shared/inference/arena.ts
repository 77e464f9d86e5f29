/**
 * How a run's inputs reach its worker thread: through shared memory, not the message. Posting a
 * typed array copies it twice (serialized on the HTTP thread into a fresh buffer, then into
 * another in the thread), and on a VM each fresh buffer of a few hundred KB costs its page
 * faults: posting a batch-64 request's 200 KB cost the HTTP thread 380-640 us of CPU, against
 * 45-90 us for copying it into the arena and posting its offsets (a micro-benchmark on the 2 vCPU
 * dev VM; the edge worker's HTTP thread went from 961 to 802 us of CPU per batch-64 request,
 * medians of four interleaved rounds). Instead
 * each thread has an arena (a SharedArrayBuffer, grown by doubling, kept up to `retainBytes`):
 * the HTTP thread copies each input's requests into it back to back, which joins them along the
 * first dimension on the way, and posts only names, shapes and offsets. The thread copies the
 * arena into memory of its own (onnxruntime does not take shared memory) and runs on views of
 * it. One run per thread at a time: the arena is rewritten only after the thread has answered.
 * An input some requests left unchecked for finiteness (finite.ts) carries their element ranges,
 * which the thread checks before it runs.
 */
import type { FiniteCheck } from './finite.js';
import type { Datatype, Tensor } from './tensor.js';

/**
 * One input of a run, joined: fixed-size elements at `offset` in the arena, or strings.
 * `finite`: the ranges the thread must find finite, as triples (the request's index in the run,
 * its first element in the joined input, its element count).
 */
type ArenaInput =
  | {
      name: string;
      datatype: Datatype;
      shape: number[];
      offset: number;
      length: number;
      finite?: number[];
    }
  | { name: string; datatype: 'BYTES'; shape: number[]; strings: string[] };

/** A run as posted to a thread; `arena` comes along when the thread does not have it yet. */
interface RunMessage {
  arena?: SharedArrayBuffer;
  inputs: ArenaInput[];
}

/** Arenas up to this size are kept for the next run; a larger one serves its run alone. */
const retainBytes = 64 << 20;

const align8 = (n: number) => Math.ceil(n / 8) * 8;

/** The first dimension of the joined tensor: the parts' rows, added up. */
function joinedShape(parts: readonly Tensor[]): number[] {
  const [first] = parts;
  if (parts.length === 1) return [...first!.shape];
  const rows = parts.reduce((n, part) => n + (part.shape[0] ?? 1), 0);
  return [rows, ...first!.shape.slice(1)];
}

/** One thread's arena: `pack` writes a run's inputs into it. */
class InputArena {
  private buffer: SharedArrayBuffer | undefined;

  /**
   * The run message for `requests` (each a request's inputs by name), joining each input of
   * `names` along the first dimension, in request order; `unchecked[i]` are the inputs request i
   * left to the thread to check for finiteness.
   */
  pack(
    names: readonly string[],
    requests: ReadonlyArray<Readonly<Record<string, Tensor>>>,
    unchecked: ReadonlyArray<readonly FiniteCheck[] | undefined> = [],
  ) {
    let bytes = 0;
    for (const name of names) {
      let size = 0;
      for (const request of requests) {
        const { data } = request[name]!;
        if (!Array.isArray(data)) size += data.byteLength;
      }
      bytes += align8(size);
    }
    let arena = this.buffer;
    const fresh = arena === undefined || arena.byteLength < bytes;
    if (fresh) {
      arena = new SharedArrayBuffer(2 ** Math.ceil(Math.log2(Math.max(bytes, 1 << 16))));
      this.buffer = arena.byteLength <= retainBytes ? arena : undefined;
    }
    const into = new Uint8Array(arena!);
    let at = 0;
    const inputs = names.map((name): ArenaInput => {
      const parts = requests.map((request) => request[name]!);
      const { datatype } = parts[0]!;
      const shape = joinedShape(parts);
      if (datatype === 'BYTES') {
        const strings = parts.flatMap((part) => part.data as string[]);
        return { name, datatype, shape, strings };
      }
      const offset = at;
      let length = 0;
      let finite: number[] | undefined;
      parts.forEach(({ data }, i) => {
        const typed = data as Exclude<Tensor['data'], string[]>;
        into.set(new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength), at);
        if (unchecked[i]?.some((check) => check.input === name) === true) {
          (finite ??= []).push(i, length, typed.length);
        }
        at += typed.byteLength;
        length += typed.length;
      });
      at = align8(at);
      return finite === undefined
        ? { name, datatype, shape, offset, length }
        : { name, datatype, shape, offset, length, finite };
    });
    const message: RunMessage = fresh ? { arena: arena!, inputs } : { inputs };
    return message;
  }
}

export { InputArena };
export type { ArenaInput, RunMessage };
