/**
 * A join's answer, built by splicing its inputs' bytes: the one place the join shape is written,
 * used by the executor (built-in joins, in process) and by the joiner function (remote joins), so
 * both answer the same bytes for the same inputs. No input is parsed or printed again: each is
 * put in as received. The shape:
 *
 *     {"puid":"p1","partial":false,"missing":0,"inputs":{"large":<large's answer>,"small":<...>}}
 *
 * inputs in source-name order (code units, as the joiner's Redis fields sort). A binary input (an
 * OIP answer in the binary tensor extension) puts its JSON header there and its tensor bytes
 * after the joined header, in the same order: the joined answer is then binary too, its header
 * length the joined header's.
 */

/** One input of a join: a JSON answer's text, or a binary answer's header and tensor bytes. */
interface JoinPart {
  readonly source: string;
  /** The JSON text as received: a JSON body, or a binary body's JSON header. */
  readonly json: Buffer | string;
  /** A binary answer's bytes after its header. */
  readonly tensors?: Buffer | undefined;
}

interface JoinFacts {
  readonly puid: string;
  /** Handed out before every input it allowed for came (an outer join's window, a deadline). */
  readonly partial: boolean;
  /** Inputs the tightest bound still allowed for when the join ended (0 when complete). */
  readonly missing: number;
  /** The joiner's `GET /joins/{puid}` adds the join's state last. */
  readonly state?: string | undefined;
}

/** A spliced JSON object: its bytes, and the tensor bytes that follow it when any part had some. */
interface Spliced {
  readonly json: Buffer;
  readonly tensors: readonly Buffer[];
}

const bySource = (a: JoinPart, b: JoinPart) =>
  a.source < b.source ? -1 : a.source > b.source ? 1 : 0;

/** `{"name":<json>,...}` from parts in the order given. */
function spliceObject(
  parts: ReadonlyArray<{ name: string; json: Buffer | string; tensors?: Buffer | undefined }>,
  prefix = '{',
  suffix = '}',
): Spliced {
  const pieces: Buffer[] = [];
  const tensors: Buffer[] = [];
  let text = prefix;
  parts.forEach((part, i) => {
    text += `${i === 0 ? '' : ','}${JSON.stringify(part.name)}:`;
    if (typeof part.json === 'string') text += part.json;
    else {
      pieces.push(Buffer.from(text));
      pieces.push(part.json);
      text = '';
    }
    if (part.tensors !== undefined && part.tensors.length > 0) tensors.push(part.tensors);
  });
  pieces.push(Buffer.from(text + suffix));
  return { json: pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces), tensors };
}

/** The join's answer from its facts and inputs (any order: sorted here by source). */
function joinedAnswer(facts: JoinFacts, parts: readonly JoinPart[]): Spliced {
  const sorted = [...parts].sort(bySource);
  const head =
    `{"puid":${JSON.stringify(facts.puid)},"partial":${facts.partial},` +
    `"missing":${facts.missing},"inputs":{`;
  const tail = facts.state === undefined ? '}}' : `},"state":${JSON.stringify(facts.state)}}`;
  return spliceObject(
    sorted.map((p) => ({ name: p.source, json: p.json, tensors: p.tensors })),
    head,
    tail,
  );
}

/**
 * Whether a text looks like one JSON value at a glance (its first and last non-blank bytes): a
 * spliced input is not parsed, but a plain-text answer must not make the joined answer unreadable.
 */
function looksLikeJson(json: Buffer | string): boolean {
  const bytes = typeof json === 'string' ? Buffer.from(json) : json;
  let start = 0;
  let end = bytes.length - 1;
  const blank = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
  while (start <= end && blank(bytes[start]!)) start += 1;
  while (end >= start && blank(bytes[end]!)) end -= 1;
  if (start > end) return false;
  const first = bytes[start]!;
  const last = bytes[end]!;
  const pairs: Record<number, (b: number) => boolean> = {
    0x7b: (b) => b === 0x7d, // { }
    0x5b: (b) => b === 0x5d, // [ ]
    0x22: (b) => b === 0x22, // " "
    0x74: (b) => b === 0x65, // true
    0x66: (b) => b === 0x65, // false
    0x6e: (b) => b === 0x6c, // null
  };
  const digit = (b: number) => b >= 0x30 && b <= 0x39;
  if (first === 0x2d || digit(first)) return digit(last);
  return pairs[first]?.(last) ?? false;
}

export { joinedAnswer, spliceObject, looksLikeJson };
export type { JoinPart, JoinFacts, Spliced };
