import type { JournalEntry, Store } from '../../store/mod.js';
import type { Partitioning, Projector } from '../projection/types.js';
import { accountScope, emptyCounts, metricBuckets, minuteOf, projectScope, type Count, type MetricBucket } from './buckets.js';
import { bucketOf } from './histogram.js';

/** The projector's name: its checkpoint id and `switchboard rebuild metrics`. */
export const METRICS_PROJECTOR = 'metrics';

/** `call.failed` reasons that are failures of ours (not the callee's: busy, no answer, ...). */
export const CRASH_REASONS = new Set(['crash', 'crashed', 'actor_crash', 'sandbox_crash', 'media_crash', 'internal_error']);

/** One entry's contributions to one bucket. */
interface Contribution {
  count?: Count;
  n?: number;
  latencyMs?: number;
  minute: number;
}

/** What an entry adds to the metrics, for its owner. */
function contributions(entry: JournalEntry): Array<{ account: string; project: string | null; c: Contribution }> {
  const out: Array<{ account: string; project: string | null; c: Contribution }> = [];
  const minute = minuteOf(entry.at);
  for (const ev of entry.events) {
    const d = ev.data as Record<string, unknown>;
    const account = typeof d.account_id === 'string' ? d.account_id : null;
    if (!account) continue;
    const project = typeof d.project_id === 'string' && d.project_id ? d.project_id : null;
    const add = (c: Contribution) => out.push({ account, project, c });
    switch (ev.type) {
      case 'conversation.started':
        add({ count: 'call_volume', minute });
        break;
      case 'conversation.turn': {
        const latency = Number(d.latency_ms);
        add({ count: 'turns', minute, ...(Number.isFinite(latency) && latency >= 0 ? { latencyMs: latency } : {}) });
        const errors = Number(d.function_errors);
        if (Number.isInteger(errors) && errors > 0) add({ count: 'function_errors', n: errors, minute });
        break;
      }
      case 'conversation.ended':
        if (d.crashed === true) add({ count: 'call_crashes', minute });
        break;
      case 'call.failed':
        if (d.crashed === true || (typeof d.reason === 'string' && CRASH_REASONS.has(d.reason))) add({ count: 'call_crashes', minute });
        break;
      case 'http.errors': {
        // The edge's per-minute counts: the minute they were answered in, not the flush's.
        const n = Number(d.count);
        const status = Number(d.status);
        const m = Number.isInteger(d.minute) ? (d.minute as number) : minute;
        if (Number.isInteger(n) && n > 0 && status >= 500) add({ count: 'api_errors', n, minute: m });
        break;
      }
    }
  }
  return out;
}

/** The partitioning of a caller that names none: every entry in one partition. */
const ONE_PARTITION: Partitioning = { count: 1, of: () => 0 };

/**
 * An entry's lane: its journal partition, named with the partition count (a deployment that changes the count
 * starts new lanes, whose seqs are not compared with the old ones). A lane's entries reach the projector from
 * one runner, in seq order. Lanes per shard or per edge process (as they were) made a cycle under load write a
 * bucket per shard it touched (two scopes each), several times the partitions' (bench/README.md, forty-fourth
 * session).
 */
const laneOf = (entry: JournalEntry, partitions: Partitioning): string => `${partitions.of(entry)}/${partitions.count}`;

/**
 * The `metrics` projector: per-minute buckets of the six alert metrics, per project and per account
 * (`buckets.ts`), from conversation, call and edge entries. Idempotent per lane: an entry at or below a
 * bucket's `last_seq` was applied already.
 */
export function metricsProjector(): Projector {
  return {
    name: METRICS_PROJECTOR,
    kinds: ['conversation', 'call', 'edge'],
    async apply(entries: JournalEntry[], store: Store, partitions: Partitioning = ONE_PARTITION): Promise<void> {
      const buckets = metricBuckets(store);
      const touched = new Map<string, { scope: string; minute: number; lane: string; adds: Array<{ seq: number; c: Contribution }> }>();
      for (const entry of entries) {
        const lane = laneOf(entry, partitions);
        for (const { account, project, c } of contributions(entry)) {
          for (const scope of project ? [projectScope(project), accountScope(account)] : [accountScope(account)]) {
            const id = `${scope}|${c.minute}|${lane}`;
            let b = touched.get(id);
            if (!b) touched.set(id, (b = { scope, minute: c.minute, lane, adds: [] }));
            b.adds.push({ seq: entry.seq, c });
          }
        }
      }
      // Every bucket at once: their writes queue in the same event-loop turn and share one commit (one after
      // the other, each bucket would wait for a commit and its flush of its own).
      await Promise.all([...touched].map(async ([id, b]) => {
        const doc: MetricBucket = (await buckets.get(id)) ?? { id, scope: b.scope, minute: b.minute, lane: b.lane, last_seq: 0, counts: emptyCounts(), latency: {} };
        const from = doc.last_seq;
        let changed = false;
        for (const { seq, c } of b.adds) {
          if (seq <= from) continue;
          changed = true;
          doc.last_seq = Math.max(doc.last_seq, seq);
          if (c.count) doc.counts[c.count] = (doc.counts[c.count] ?? 0) + (c.n ?? 1);
          if (c.latencyMs !== undefined) {
            const k = String(bucketOf(c.latencyMs));
            doc.latency[k] = (doc.latency[k] ?? 0) + 1;
          }
        }
        // Written whole, unless a bucket this far along the lane is stored already: one read and one write, where
        // an update would also match a filter and copy the stored bucket (a cycle under load writes dozens).
        if (changed) await buckets.putNewer(doc, 'last_seq');
      }));
    },
    async reset(store: Store): Promise<void> {
      await metricBuckets(store).delete({});
    },
  };
}
