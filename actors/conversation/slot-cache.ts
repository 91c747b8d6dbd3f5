/**
 * The slots of a kind (vectors for semantic search, spans for concurrency and random sampling), kept decoded
 * between reads. A week's search or report reads about 2,000 slots, though only those of the hours in which
 * conversations started or ended since the last one have changed.
 *
 * Each hour's count record (`conversation_hours`) carries a token per kind that the slot writer changes
 * after every write of one of the hour's slots (`HourCount.vectors`, `HourCount.spans`). A read takes the
 * range's hour records (one small record an hour), the slots of each hour whose token is the one it kept
 * them under, and reads the others, consecutive hours in one query. A slot read after its hour's token was
 * read is as new as the token or newer, so what is kept is never older than its token says; a newer one is
 * read again the next time. After a rebuild the hours have new tokens. Hours without a token (no slot of
 * the kind written yet) are read every time.
 *
 * Least recently used out first, within a byte budget (blocks and packed texts); per process, so every
 * edge keeps its own.
 */
import type { Collection } from '../../store/mod.js';
import type { HourCount } from './search.js';
import type { SpanSlot, VectorSlot } from './slots.js';

interface Held<S> {
  token: string;
  slots: S[];
  bytes: number;
}

/** What an hour's slots cost in memory: the blocks, the packed texts' characters (two bytes at most), the records. */
const bytesOf = (slots: Array<VectorSlot | SpanSlot>) => {
  let n = 0;
  for (const s of slots as Array<VectorSlot & SpanSlot>) n += (s.block?.byteLength ?? 0) + 2 * ((s.heads?.length ?? 0) + (s.entries?.length ?? 0)) + 256;
  return n;
};

export class SlotCache<S extends VectorSlot | SpanSlot> {
  private readonly held = new Map<string, Held<S>>();
  private bytes = 0;

  /** `token`: the hours' token of this kind of slot; `maxBytes`: the budget, 0 keeping nothing (every read reads its slots). */
  constructor(
    private readonly hours: Collection<HourCount>,
    private readonly slots: Collection<S>,
    private readonly token: 'vectors' | 'spans',
    private readonly maxBytes: number,
  ) {}

  /** The bytes held now (tests, metrics). */
  get size(): number {
    return this.bytes;
  }

  /** The slots of a project's environment whose hour is in `range` (a filter on the hour: `$gte`, `$lt`; null: all), in no particular order. */
  async find(projectId: string, environment: string, range: Record<string, string> | null): Promise<S[]> {
    const place = { project_id: projectId, environment };
    if (this.maxBytes <= 0) return this.slots.find(Object.assign({}, place, range ? { bucket: range } : {}));
    const hours = await this.hours.find(Object.assign({}, place, range ? { hour: range } : {}), { sort: { hour: 1 } });
    const out: S[] = [];
    const runs: HourCount[][] = [];
    let run: HourCount[] | null = null;
    for (const hour of hours) {
      const token = hour[this.token];
      const kept = typeof token === 'string' ? this.take(hour.id, token) : undefined;
      if (kept) {
        for (const slot of kept) out.push(slot);
        run = null;
      } else {
        if (!run) runs.push((run = []));
        run.push(hour);
      }
    }
    for (const r of runs) {
      const first = r[0].hour;
      const last = r[r.length - 1].hour;
      const read = await this.slots.find(Object.assign({}, place, { bucket: first === last ? first : { $gte: first, $lte: last } }));
      const byHour = new Map<string, S[]>();
      for (const slot of read) {
        out.push(slot);
        const of = byHour.get(slot.bucket);
        if (of) of.push(slot);
        else byHour.set(slot.bucket, [slot]);
      }
      for (const hour of r) {
        const token = hour[this.token];
        if (typeof token === 'string') this.keep(hour.id, token, byHour.get(hour.hour) ?? []);
      }
    }
    return out;
  }

  /** The slots kept under `token` for hour `id` (marked most recently used), else undefined (and a stale entry dropped). */
  private take(id: string, token: string): S[] | undefined {
    const held = this.held.get(id);
    if (!held) return undefined;
    this.held.delete(id);
    if (held.token !== token) {
      this.bytes -= held.bytes;
      return undefined;
    }
    this.held.set(id, held);
    return held.slots;
  }

  private keep(id: string, token: string, slots: S[]): void {
    const bytes = bytesOf(slots);
    const old = this.held.get(id);
    if (old) {
      this.held.delete(id);
      this.bytes -= old.bytes;
    }
    if (bytes > this.maxBytes) return;
    this.held.set(id, { token, slots, bytes });
    this.bytes += bytes;
    for (const [oldest, held] of this.held) {
      if (this.bytes <= this.maxBytes) break;
      this.held.delete(oldest);
      this.bytes -= held.bytes;
    }
  }
}
