/**
 * Slots: the conversations that started in one hour, by hundreds (`<hour id>/0` holds the first 100, ...),
 * in two collections the read APIs scan by hour:
 *
 * - `conversation_spans`: start, end and the filter fields of each conversation (concurrency, random
 *   sampling);
 * - `conversation_vector_buckets`: the final embedding of each ended conversation (semantic search).
 *
 * A slot is stored packed: its entries as one string (entries separated by `ENTRY_END`, fields by
 * `FIELD_END`) and, for vectors, every vector's int8 components concatenated into one binary block. A week
 * of 200,000 conversations is then about 2,000 strings to decode instead of 200,000 arrays or strings, and
 * readers find fields by offset (`eachEntry`) without cutting them out.
 *
 * Writers read, merge and write the slot back (one entry per conversation, the newest wins), made atomic
 * across processes by a revision compared on write (`Collection.putNewer`), and coalesced per slot inside a
 * process: entries queued while a slot's write is in flight go out together in the next one.
 */
import { randomBytes } from 'node:crypto';
import type { Collection, Doc } from '../../store/mod.js';

/** Ends a field of a packed entry. */
export const FIELD_END = '\u0000';
/** Ends an entry of a packed slot. */
export const ENTRY_END = '\u0001';

/** A conversation in a slot: [id, start ms, end ms or null (in progress), channel, variant id, variant name, language, from, to]. */
export type SpanEntry = [string, number, number | null, string, string, string, string, string, string];
/** An ended conversation's vector: [id, start ms, channel, variant id, variant name, model, vector (int8)]. */
export type VectorEntry = [string, number, string, string, string, string, Int8Array];

/** Field positions of a packed span entry. */
export const SPAN = { id: 0, start: 1, end: 2, channel: 3, variantId: 4, variantName: 5, language: 6, from: 7, to: 8, count: 9 } as const;
/** Field positions of a packed vector head (the vector itself is in the block). */
export const HEAD = { id: 0, start: 1, channel: 2, variantId: 3, variantName: 4, model: 5, dims: 6, count: 7 } as const;

interface SlotDoc extends Doc {
  project_id: string;
  environment: string;
  /** The hour its conversations started in, ISO 8601. */
  bucket: string;
  /** Compared on write: a writer that read revision n writes n + 1, and only over n. */
  rev?: number;
}

export interface SpanSlot extends SlotDoc {
  /** Packed span entries (see `SPAN`). */
  entries?: string;
}

export interface VectorSlot extends SlotDoc {
  /** Packed vector heads (see `HEAD`), in the order of the block. */
  heads?: string;
  /** The heads' vectors, int8 per dimension, concatenated (binary: one copy per slot when read). */
  block?: Uint8Array;
  /** The distinct models of the heads: a reader skips a slot without its model, and checks no head when it is the only one. */
  models?: string[];
  /**
   * The heads' one dimension, when they share one: the block is then a vector of `dims` bytes per head, in
   * order, and a scan of the whole slot reads no head (`scoreVectorSlot`).
   */
  dims?: number;
}

const clean = (s: string) => (/[\u0000\u0001]/.test(s) ? s.replace(/[\u0000\u0001]/g, '') : s);

/** The packed form of a span entry. */
export function packSpan(e: SpanEntry): string {
  return [clean(e[0]), String(e[1]), e[2] === null ? '' : String(e[2]), ...e.slice(3).map((f) => clean(f as string))].join(FIELD_END);
}

/**
 * Reads the entry of packed `text` starting at `pos`: field k runs from `at[k]` to `at[k + 1] - 1`, and
 * `at[count]` is -1 when the entry has fewer than `count` fields. Returns where the next entry starts.
 * For loops that cannot afford a callback per entry; `eachEntry` is the same walk with one.
 */
export function readEntry(text: string, pos: number, count: number, at: Int32Array): number {
  let end = text.indexOf(ENTRY_END, pos);
  if (end < 0) end = text.length;
  at[0] = pos;
  let k = 1;
  for (let p = pos; k < count; k++) {
    const f = text.indexOf(FIELD_END, p);
    if (f < 0 || f >= end) break;
    at[k] = f + 1;
    p = f + 1;
  }
  at[count] = k === count ? end + 1 : -1;
  return end + 1;
}

/**
 * Calls `visit` for every entry of packed `text` that has `count` fields, with the offsets of its fields
 * (see `readEntry`; `at` is reused from entry to entry).
 */
export function eachEntry(text: string, count: number, visit: (at: Int32Array, index: number) => void): void {
  const at = new Int32Array(count + 1);
  for (let pos = 0, index = 0; pos < text.length; index++) {
    pos = readEntry(text, pos, count, at);
    if (at[count] >= 0) visit(at, index);
  }
}

/** Field k of the entry at `at`. */
export const field = (text: string, at: Int32Array, k: number): string => text.slice(at[k], at[k + 1] - 1);

/**
 * Whether field k of the entry at `at` is `value`, compared in place by a `charCodeAt` loop: nothing is cut
 * out of the packed text, and the lengths are compared first.
 */
export function fieldIs(text: string, at: Int32Array, k: number, value: string): boolean {
  const a = at[k];
  if (at[k + 1] - 1 - a !== value.length) return false;
  for (let i = 0; i < value.length; i++) if (text.charCodeAt(a + i) !== value.charCodeAt(i)) return false;
  return true;
}

/** Field k read as a non-negative integer in place; NaN when empty or not digits. */
export function fieldNumber(text: string, at: Int32Array, k: number): number {
  const a = at[k];
  const b = at[k + 1] - 1;
  if (b <= a) return NaN;
  let n = 0;
  for (let i = a; i < b; i++) {
    const c = text.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return NaN;
    n = n * 10 + c;
  }
  return n;
}

/** Whether span entry `incoming` replaces `stored` (same conversation): an entry with an end is the later one. */
const spanReplaces = (stored: SpanEntry, incoming: SpanEntry) => !(stored[2] !== null && incoming[2] === null);

/** The span entries of a slot, one per conversation (for writers and tests; readers use `eachEntry`). */
export function spanEntries(slot: SpanSlot): SpanEntry[] {
  const byId = new Map<string, SpanEntry>();
  const put = (e: SpanEntry) => {
    const had = byId.get(e[0]);
    if (had === undefined || spanReplaces(had, e)) byId.set(e[0], e);
  };
  if (typeof slot.entries === 'string') {
    const text = slot.entries;
    eachEntry(text, SPAN.count, (at) => {
      const end = fieldNumber(text, at, SPAN.end);
      put([
        field(text, at, SPAN.id), fieldNumber(text, at, SPAN.start), Number.isNaN(end) ? null : end,
        ...[3, 4, 5, 6, 7, 8].map((k) => field(text, at, k)),
      ] as SpanEntry);
    });
  }
  return [...byId.values()];
}

/** The vector entries of a slot, one per conversation, the last written winning. */
export function vectorEntries(slot: VectorSlot): VectorEntry[] {
  const byId = new Map<string, VectorEntry>();
  if (typeof slot.heads === 'string') {
    const heads = slot.heads;
    const block = blockOf(slot);
    let offset = 0;
    eachEntry(heads, HEAD.count, (at) => {
      const dims = fieldNumber(heads, at, HEAD.dims);
      const v = new Int8Array(block.buffer, block.byteOffset + offset, Math.min(dims, Math.max(0, block.length - offset)));
      offset += dims;
      byId.set(field(heads, at, HEAD.id), [
        field(heads, at, HEAD.id), fieldNumber(heads, at, HEAD.start), field(heads, at, HEAD.channel),
        field(heads, at, HEAD.variantId), field(heads, at, HEAD.variantName), field(heads, at, HEAD.model), v,
      ]);
    });
  }
  return [...byId.values()];
}

/** Where a slot lives: the fields a new slot document starts with. */
export interface SlotPlace {
  project_id: string;
  environment: string;
  bucket: string;
}

/** The slot document holding `entries`. */
export function spanSlotOf(id: string, place: SlotPlace, entries: SpanEntry[]): SpanSlot {
  return { id, entries: entries.map(packSpan).join(ENTRY_END), ...place };
}

export function vectorSlotOf(id: string, place: SlotPlace, entries: VectorEntry[]): VectorSlot {
  const heads = entries.map((e) =>
    [clean(e[0]), String(e[1]), clean(e[2]), clean(e[3]), clean(e[4]), clean(e[5]), String(e[6].length)].join(FIELD_END),
  );
  const block = Buffer.concat(entries.map((e) => Buffer.from(e[6].buffer, e[6].byteOffset, e[6].byteLength)));
  const models = [...new Set(entries.map((e) => clean(e[5])))];
  const dims = entries.length > 0 && entries.every((e) => e[6].length === entries[0][6].length) ? entries[0][6].length : undefined;
  return { id, heads: heads.join(ENTRY_END), block, models, ...(dims === undefined ? {} : { dims }), ...place };
}

/** A vector slot's block as int8 (both store backends return binary fields as bytes). */
export function blockOf(slot: VectorSlot): Int8Array {
  const bytes = slot.block instanceof Uint8Array ? slot.block : new Uint8Array(0);
  return new Int8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** A span slot's packed entries. */
export function packedSpans(slot: SpanSlot): string {
  return typeof slot.entries === 'string' ? slot.entries : '';
}

/** A vector slot's packed heads, block, models (null: not listed) and shared dimension (null: none). */
export function packedVectors(slot: VectorSlot): { heads: string; block: Int8Array; models: string[] | null; dims: number | null } {
  const dims = typeof slot.dims === 'number' && Number.isInteger(slot.dims) && slot.dims > 0 ? slot.dims : null;
  return { heads: slot.heads ?? '', block: blockOf(slot), models: Array.isArray(slot.models) ? slot.models : null, dims };
}

/** Where entry `index` of packed `text` starts (its id); -1 past the last. */
export function entryStart(text: string, index: number): number {
  let pos = 0;
  for (let i = 0; i < index; i++) {
    const end = text.indexOf(ENTRY_END, pos);
    if (end < 0) return -1;
    pos = end + 1;
  }
  return pos < text.length ? pos : -1;
}

/** Gives up on a slot after this many lost compare-and-set rounds (other writers keep winning). */
const MAX_ATTEMPTS = 100;

/**
 * A writer of one kind of slot. `add` resolves once the entry is stored. Entries added while the slot's
 * previous write is in flight are merged into the next write.
 */
export function slotWriter<S extends SlotDoc, E extends [string, ...unknown[]]>(
  slots: Collection<S>,
  read: (slot: S) => E[],
  build: (id: string, place: SlotPlace, entries: E[]) => S,
  /** Whether `incoming` replaces `stored` for the same conversation. */
  replaces: (stored: E, incoming: E) => boolean,
  /** Awaited after each write of a slot, before its entries' writes resolve. */
  written: (place: SlotPlace) => Promise<void>,
): (id: string, place: SlotPlace, entry: E) => Promise<void> {
  interface Pending {
    place: SlotPlace;
    entries: E[];
    waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }>;
  }
  const pending = new Map<string, Pending>();
  const writing = new Set<string>();

  const writeOnce = async (id: string, batch: Pending): Promise<void> => {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await slots.get(id);
      const byId = new Map<string, E>();
      for (const e of current ? read(current) : []) byId.set(e[0], e);
      for (const e of batch.entries) {
        const stored = byId.get(e[0]);
        if (stored === undefined || replaces(stored, e)) byId.set(e[0], e);
      }
      const place = current ? { project_id: current.project_id, environment: current.environment, bucket: current.bucket } : batch.place;
      const next = build(id, place, [...byId.values()]);
      next.rev = (current?.rev ?? 0) + 1;
      if (await slots.putNewer(next, 'rev')) return written(place);
    }
    throw new Error(`slot ${id}: gave up after ${MAX_ATTEMPTS} conflicting writes`);
  };

  const drain = async (id: string): Promise<void> => {
    writing.add(id);
    try {
      for (let batch = pending.get(id); batch; batch = pending.get(id)) {
        pending.delete(id);
        try {
          await writeOnce(id, batch);
          for (const w of batch.waiters) w.resolve();
        } catch (err) {
          for (const w of batch.waiters) w.reject(err);
        }
      }
    } finally {
      writing.delete(id);
    }
  };

  return (id, place, entry) =>
    new Promise<void>((resolve, reject) => {
      let batch = pending.get(id);
      if (!batch) pending.set(id, (batch = { place, entries: [], waiters: [] }));
      batch.entries.push(entry);
      batch.waiters.push({ resolve, reject });
      if (!writing.has(id)) void drain(id);
    });
}

/** After a slot is stored, never before, a new token for its hour's slots of that kind (`slot-cache.ts`). */
const tokenChange = (hours: Collection<Doc & { vectors?: string; spans?: string }>, kind: 'vectors' | 'spans') => async (place: SlotPlace) => {
  await hours.update({ id: hourId(place.project_id, place.environment, place.bucket) }, { $set: { [kind]: randomBytes(9).toString('base64url') } });
};

/**
 * The span writer: an entry with an end is never replaced by one without. After each slot is stored it
 * changes the token of the slot's hour (`spans` of its count record in `hours`): a reader that keeps decoded
 * slots and sees the new token reads the new slot (`slot-cache.ts`).
 */
export const spanSlotWriter = (slots: Collection<SpanSlot>, hours: Collection<Doc & { spans?: string }>) =>
  slotWriter<SpanSlot, SpanEntry>(slots, spanEntries, spanSlotOf, spanReplaces, tokenChange(hours, 'spans'));

/** The id of an hour's count record (`conversation_hours`); its slots are `<hour id>/0`, `<hour id>/1`, ... */
export const hourId = (projectId: string, environment: string, hour: string) => `${projectId}|${environment}|${hour}`;

/**
 * The vector writer. After each slot is stored, never before, it changes the token of the slot's hour
 * (`vectors` of its count record in `hours`): a reader that keeps decoded slots and sees the new token reads
 * the new slot (`slot-cache.ts`).
 */
export const vectorSlotWriter = (slots: Collection<VectorSlot>, hours: Collection<Doc & { vectors?: string }>) =>
  slotWriter<VectorSlot, VectorEntry>(slots, vectorEntries, vectorSlotOf, () => true, tokenChange(hours, 'vectors'));
