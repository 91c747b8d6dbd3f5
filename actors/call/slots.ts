import { StoreDuplicateError, type Collection, type Doc, type Store } from '../../store/mod.js';
import type { Task } from '../task.js';

/**
 * The call slots of SIP trunks: a trunk (telephony connector) carries at most `limit` calls at once, across
 * every worker, so its slots live in the store. A slot is a record `<connector>#<n>` whose `holder` is the
 * call_sid using it (null: free); claiming is a compare-and-set on `holder`, so two workers never hold the
 * same slot. A call holds its slot from `calling` until it ends.
 *
 * A call waiting for a slot re-tries when a call on this worker frees one, and every `POLL_MS` for slots
 * freed elsewhere. Waiters are not strictly first-come-first-served across workers; on one worker the
 * earliest waiter tries first.
 */
export interface TrunkSlot extends Doc {
  connector_id: string;
  holder: string | null;
  since: number | null;
}

const POLL_MS = 250;

export class TrunkSlots {
  private readonly slots: Collection<TrunkSlot>;
  /** Waiters on this worker by connector, oldest first. */
  private readonly waiters = new Map<string, Array<() => void>>();

  constructor(store: Store) {
    this.slots = store.collection<TrunkSlot>({ name: 'call_trunk_slots', indexes: [{ fields: ['connector_id', 'holder'] }] });
  }

  /** Claims a slot for `callSid` once one is free; resolves with when. Idempotent: a held slot is kept. */
  acquire(connectorId: string, callSid: string, limit: () => Promise<number>): Task<number> {
    let cancelled = false;
    let wake: (() => void) | null = null;
    let timer: NodeJS.Timeout | null = null;
    const done = (async () => {
      for (;;) {
        if (cancelled) throw new Error('cancelled');
        if (await this.tryClaim(connectorId, callSid, await limit())) return Date.now();
        await new Promise<void>((resolve) => {
          wake = resolve;
          const list = this.waiters.get(connectorId) ?? [];
          list.push(resolve);
          this.waiters.set(connectorId, list);
          timer = setTimeout(resolve, POLL_MS);
        });
        this.forget(connectorId, wake!);
        if (timer) clearTimeout(timer);
      }
    })();
    return {
      done,
      cancel: () => {
        cancelled = true;
        if (timer) clearTimeout(timer);
        if (wake) {
          this.forget(connectorId, wake);
          wake();
        }
      },
    };
  }

  /** Frees the slot `callSid` holds on this trunk, if any, and wakes this worker's first waiter. */
  async release(connectorId: string, callSid: string): Promise<void> {
    await this.slots.update({ connector_id: connectorId, holder: callSid }, { $set: { holder: null, since: null } });
    this.waiters.get(connectorId)?.[0]?.();
  }

  /** How many calls hold a slot of this trunk now. */
  inUse(connectorId: string): Promise<number> {
    return this.slots.count({ connector_id: connectorId, holder: { $ne: null } });
  }

  private async tryClaim(connectorId: string, callSid: string, limit: number): Promise<boolean> {
    if (await this.slots.findOne({ connector_id: connectorId, holder: callSid })) return true;
    for (let n = 0; n < limit; n++) {
      const id = `${connectorId}#${n}`;
      try {
        await this.slots.insert({ id, connector_id: connectorId, holder: callSid, since: Date.now() });
        return true;
      } catch (err) {
        if (!(err instanceof StoreDuplicateError)) throw err;
      }
      if (await this.slots.update({ id, holder: null }, { $set: { holder: callSid, since: Date.now() } })) return true;
    }
    return false;
  }

  private forget(connectorId: string, fn: () => void): void {
    const list = this.waiters.get(connectorId);
    if (!list) return;
    const i = list.indexOf(fn);
    if (i >= 0) list.splice(i, 1);
    if (!list.length) this.waiters.delete(connectorId);
  }
}
