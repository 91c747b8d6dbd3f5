import { randomUUID } from 'node:crypto';
import type { JournalStore } from '../../store/mod.js';
import { minuteOf } from './buckets.js';

/** How often an edge appends its 5xx counts to the journal. */
export const DEFAULT_EDGE_ERRORS_FLUSH_MS = 2000;

/**
 * The 5xx answers of one edge process, counted per minute and per (account, project, family, status), and
 * appended to the journal as one non-actor `edge/<process>` entry of `http.errors` events every few seconds
 * (never on the request's path). The metrics projector turns them into `api_errors`. Counts not yet
 * flushed when the process dies are lost: the metric is a monitoring signal, not a ledger.
 */
export class EdgeErrorCounter {
  private counts = new Map<string, { account_id: string; project_id: string | null; family: string; status: number; minute: number; count: number }>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();
  readonly processId: string;

  constructor(
    private readonly journal: Pick<JournalStore, 'append'>,
    private readonly opts: { flushMs?: number; now?: () => number; processId?: string; onError?: (err: unknown) => void } = {},
  ) {
    this.processId = opts.processId ?? randomUUID();
  }

  /** Counts one 5xx answered for a project (or an account, `projectId` null). */
  record(accountId: string, projectId: string | null, family: string, status: number): void {
    const minute = minuteOf((this.opts.now ?? Date.now)());
    const k = `${accountId}\u0000${projectId ?? ''}\u0000${family}\u0000${status}\u0000${minute}`;
    const c = this.counts.get(k);
    if (c) c.count++;
    else this.counts.set(k, { account_id: accountId, project_id: projectId, family, status, minute, count: 1 });
    if (!this.timer) {
      this.timer = setTimeout(() => {
        this.timer = null;
        void this.flush();
      }, this.opts.flushMs ?? DEFAULT_EDGE_ERRORS_FLUSH_MS);
      this.timer.unref();
    }
  }

  /** Appends what is counted (one entry), if anything. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      if (this.counts.size === 0) return;
      const batch = [...this.counts.values()];
      this.counts.clear();
      try {
        await this.journal.append({
          key: `edge/${this.processId}`,
          kind: 'edge',
          id: this.processId,
          shard: -1,
          version: 0,
          value: null,
          events: batch.map((data) => ({ type: 'http.errors', data })),
        });
      } catch (err) {
        this.opts.onError?.(err);
      }
    });
    return this.flushing;
  }

  /** Flushes and stops the timer (on close). */
  async close(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.flush();
  }
}
