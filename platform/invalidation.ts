/**
 * Carries the operator's writes to the tenancy caches of every process (or thread) that serves requests or
 * runs actors (edge, socket gateway, worker), over NATS, so that a deleted key or connector, or changed settings, stop
 * being served everywhere before the admin call answers, and a real-time config change reaches every
 * worker's next turn.
 *
 * Each such process (a holder) subscribes to `sb.tenancy.invalidate` (broadcast) and to
 * `sb.tenancy.invalidate.<holder id>` (asked directly, answered once applied), then writes a heartbeat record
 * (`tenancy_caches`, every TTL/3) so that the others know whom to wait for. Invalidating: apply locally,
 * broadcast, then ask every other holder whose heartbeat is fresh, and wait for each answer; a holder that is
 * gone (no responders) is skipped, one that does not answer within `ACK_TIMEOUT_MS` is logged and left to its
 * cache's TTL, which bounds how long any process can serve a revoked credential.
 *
 * Without NATS the platform is one process. With its edge in a thread of its own (the embedded default,
 * `platform/edge-thread.ts`) each thread has its cache and the bus runs between them over the thread's port, as
 * between processes; with `EDGE_THREAD=off` the admin call invalidates the one cache directly and no bus is started.
 */
import { randomBytes } from 'node:crypto';
import { decode, encode, type Subscription, type Transport } from '../actors/mod.js';
import type { Doc, Store } from '../store/mod.js';
import type { Invalidation, TenancyCache } from '../tenancy/cache.js';

export const INVALIDATE_SUBJECT = 'sb.tenancy.invalidate';
/** How long an admin call waits for one other process's acknowledgement. */
export const ACK_TIMEOUT_MS = 2000;

interface HolderBeat extends Doc {
  seen_at: number;
}

export interface InvalidationBusOptions {
  transport: Transport;
  store: Store;
  cache: TenancyCache;
  /** A holder's heartbeat counts for this long (the cache TTL, at least 3 s). */
  beatTtlMs: number;
  log: (msg: string, extra?: object) => void;
}

export interface InvalidationBus {
  readonly id: string;
  stop(): Promise<void>;
}

/** Subscribes this process's cache to the bus, registers it as a holder, and sets `cache.propagate`. */
export async function startInvalidationBus(o: InvalidationBusOptions): Promise<InvalidationBus> {
  const id = `tc-${process.pid}-${randomBytes(4).toString('hex')}`;
  const beats = o.store.collection<HolderBeat>({ name: 'tenancy_caches' });
  const apply = (change: () => Invalidation): void => {
    // The write that caused the invalidation is committed: the reloads that follow must read it, not this
    // thread's older read snapshot of the embedded store, or they would cache the revoked record again.
    o.store.refresh();
    try {
      o.cache.invalidateLocal(change());
    } catch {
      // Unreadable: drop everything rather than keep something that might be revoked.
      o.cache.invalidateLocal({ kind: 'all' });
    }
  };
  const received = (data: Uint8Array) => () => decode(data) as Invalidation;
  const subs: Subscription[] = [
    o.transport.subscribe(INVALIDATE_SUBJECT, (data) => apply(received(data))),
    o.transport.subscribe(`${INVALIDATE_SUBJECT}.${id}`, (data, respond) => {
      apply(received(data));
      respond?.(new Uint8Array(0));
    }),
  ];
  // Cut off from NATS, this process may have missed invalidations (the admin call that sent them answered after
  // its ask to this holder timed out): everything cached is dropped once the connection is back, rather than
  // served until its TTL.
  const unwatch = o.transport.onReconnect?.(() => {
    apply(() => ({ kind: 'all' }));
    o.log('tenancy cache dropped: reconnected to NATS, invalidations may have been missed', {});
  });
  // Subscribed at the server before anyone can find this holder in the directory.
  await o.transport.flush();
  const beat = async () => {
    const now = Date.now();
    await beats.update({ id }, { $set: { seen_at: now } }, { upsert: true });
    // Records of processes long gone are dropped, so the directory stays as short as the deployment.
    await beats.delete({ seen_at: { $lt: now - 10 * o.beatTtlMs } });
  };
  await beat();
  const timer = setInterval(() => void beat().catch(() => undefined), Math.max(100, Math.floor(o.beatTtlMs / 3)));
  timer.unref();

  o.cache.propagate = async (change) => {
    const data = encode(change);
    try {
      o.transport.publish(INVALIDATE_SUBJECT, data);
    } catch (err) {
      // The record is already gone from the store: the holders asked below, or their TTL, still drop it.
      o.log('tenancy cache invalidation not broadcast', { err: String(err), change });
    }
    const live = await beats.find({ seen_at: { $gt: Date.now() - o.beatTtlMs } });
    await Promise.all(
      live
        .filter((h) => h.id !== id)
        .map(async (h) => {
          try {
            await o.transport.request(`${INVALIDATE_SUBJECT}.${h.id}`, data, ACK_TIMEOUT_MS);
          } catch (err) {
            // NO_RESPONDERS: that process is gone (its heartbeat has not expired yet). Anything else: it may
            // still serve what it cached, until the entry's TTL.
            const code = (err as { code?: string }).code;
            if (code !== 'NO_RESPONDERS') o.log('tenancy cache invalidation not acknowledged', { holder: h.id, code, change });
          }
        }),
    );
    // The broadcast has left this process too (it carries the change to holders not yet in the directory).
    await o.transport.flush().catch(() => undefined);
  };

  return {
    id,
    stop: async () => {
      clearInterval(timer);
      unwatch?.();
      o.cache.propagate = null;
      for (const s of subs) s.unsubscribe();
      await beats.delete({ id }).catch(() => undefined);
    },
  };
}
