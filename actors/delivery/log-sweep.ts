import type { Store } from '../../store/mod.js';
import { webhookDeliveries } from './deliveries.js';
import { webhookEndpoints } from './endpoints.js';
import { deleteInBatches, idSlice, startSweeps, SWEEP_DELETE_BATCH, SWEEP_SLICES, type Sweeps } from '../sweeps.js';

/**
 * The retention of the delivery log (`webhook_deliveries`): a record is written for every delivery and was
 * never deleted, its endpoint's deletion included (about 4.6 KB a delivery, an audit). A worker's sweep deletes
 * the deliveries that finished (`succeeded`, `failed`) more than `WEBHOOK_DELIVERY_RETENTION_MS` ago (their
 * `updated_at`) and every delivery of an endpoint that no longer exists (the endpoint's DELETE removes its
 * log at once, `deleteEndpointLog`; a delivery in flight then writes its record once more as it fails, and
 * the sweep takes that one). Pending deliveries of a live endpoint stay whatever their age.
 */

/** How long a finished delivery stays in the log (`WEBHOOK_DELIVERY_RETENTION_MS`). */
export const WEBHOOK_DELIVERY_RETENTION_MS = 30 * 86_400_000;
/** How often a worker sweeps (once at start, then at this interval). */
export const DELIVERY_SWEEP_EVERY_MS = 3_600_000;

/**
 * Deletes the log of endpoint `endpointId` of account `accountId`, newest first, `SWEEP_DELETE_BATCH` records a
 * write (each read costs its batch: the `endpoint_id, created_at` index in order). Returns how many.
 */
export async function deleteEndpointLog(store: Store, accountId: string, endpointId: string): Promise<number> {
  const log = webhookDeliveries(store);
  let removed = 0;
  for (;;) {
    const batch = await log.find({ endpoint_id: endpointId, account_id: accountId }, { sort: { created_at: -1 }, limit: SWEEP_DELETE_BATCH });
    if (batch.length === 0) return removed;
    removed += await log.delete({ id: { $in: batch.map((d) => d.id) }, endpoint_id: endpointId });
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * One pass over the delivery log: deletes, slice by slice, the deliveries finished before `now - retentionMs`
 * and those whose endpoint is gone. Each delete names what it read (the finished status and time, or the
 * endpoint). Returns how many it deleted.
 */
export async function sweepDeliveryLog(store: Store, now = Date.now(), retentionMs = WEBHOOK_DELIVERY_RETENTION_MS, stopped = () => false): Promise<number> {
  const log = webhookDeliveries(store);
  const endpoints = webhookEndpoints(store);
  const before = new Date(now - retentionMs).toISOString();
  const finished = { $in: ['succeeded', 'failed'] };
  const exists = new Map<string, boolean>();
  let removed = 0;
  // The log's ids are `whd_` and 32 hex digits (`idSlice`).
  for (let i = 0; i < SWEEP_SLICES && !stopped(); i++) {
    const rows = await log.find({ id: idSlice('whd_', i) });
    const old: string[] = [];
    const orphans = new Map<string, string[]>();
    for (const d of rows) {
      if (!exists.has(d.endpoint_id)) exists.set(d.endpoint_id, (await endpoints.get(d.endpoint_id)) !== null);
      if (!exists.get(d.endpoint_id)) {
        const ids = orphans.get(d.endpoint_id);
        if (ids) ids.push(d.id);
        else orphans.set(d.endpoint_id, [d.id]);
      }
      else if ((d.status === 'succeeded' || d.status === 'failed') && d.updated_at < before) old.push(d.id);
    }
    removed += await deleteInBatches(log, old, { status: finished, updated_at: { $lt: before } });
    for (const [endpointId, ids] of orphans) removed += await deleteInBatches(log, ids, { endpoint_id: endpointId });
    await new Promise((resolve) => setImmediate(resolve));
  }
  return removed;
}

/** Sweeps the delivery log at once, then every `everyMs` (`startSweeps`). */
export function startDeliveryLogSweeps(
  store: Store,
  log: (msg: string, extra: Record<string, unknown>) => void,
  retentionMs = WEBHOOK_DELIVERY_RETENTION_MS,
  everyMs = DELIVERY_SWEEP_EVERY_MS,
): Sweeps {
  return startSweeps((stopped) => sweepDeliveryLog(store, Date.now(), retentionMs, stopped), everyMs, log, 'webhook delivery log sweep failed');
}
