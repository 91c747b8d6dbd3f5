import { StoreDuplicateError, type Collection, type Doc, type Store } from '../../store/mod.js';
import type { Task } from '../task.js';

/**
 * The call slots of SIP trunks: a trunk (telephony connector) carries at most `limit` calls at once, across
 * every worker, so its slots live in the store. A slot is a record `<connector>#<n>` whose `holder` is the
 * call_sid using it (null: free); claiming is a compare-and-set on `holder`, so two workers never hold the
 * same slot. A call holds its slot from `calling` until it ends.
 *
 * The calls waiting for a trunk's slots on one worker form its line there, ordered by when each call was
 * placed: only the head of the line claims, one pass at a time, so a freed slot goes to the earliest waiter
 * and to no later one while it still waits (waiters that each retried on their own timer handed it to
 * whichever retried next). A pass runs when a waiter joins, when a call on this worker frees a slot of the
 * trunk, and every `POLL_MS` for slots freed elsewhere. Each worker serves its own line in order; across
 * workers the heads of their lines compete for a slot, and which one gets it is not ordered.
 */
export interface TrunkSlot extends Doc {
  connector_id: string;
  holder: string | null;
  since: number | null;
}

const POLL_MS = 250;

/**
 * The call's trunk (telephony connector) no longer exists: the one failure of a claim that ends the wait (the
 * call fails, `trunk_missing`). Any other (the store failing, a trunk's record unreadable for a moment) leaves
 * the call in its place in the line, tried again at the next look, until its queue timeout.
 */
export class TrunkMissingError extends Error {
  constructor(connectorId: string) {
    super(`telephony connector ${connectorId} not found`);
    this.name = 'TrunkMissingError';
  }
}

/** A call waiting for a slot on this worker. */
interface Waiter {
  callSid: string;
  /** When the call was placed: the line's order (calls placed in the same millisecond: the order they joined). */
  queuedAt: number;
  limit: () => Promise<number>;
  resolve: (at: number) => void;
  reject: (err: unknown) => void;
}

/** One trunk's waiters on this worker, and the pass serving them. */
interface Line {
  /** Earliest placed first. */
  waiters: Waiter[];
  /** Whether a pass runs: at most one per line, so two waiters never claim at once. */
  serving: boolean;
  /** Asked for again while a pass ran: the pass goes round once more before it ends. */
  again: boolean;
  /** The claim in flight and its call: a release of that call waits for it (`release`). */
  claiming: { callSid: string; done: Promise<unknown> } | null;
  poll: NodeJS.Timeout | null;
  /** Whether the last claim failed other than for a missing trunk (logged once, not at every look). */
  failing: boolean;
}

export class TrunkSlots {
  private readonly slots: Collection<TrunkSlot>;
  /** Lines of this worker by connector; a line with no waiter is dropped. */
  private readonly lines = new Map<string, Line>();

  constructor(
    store: Store,
    /** Told when claims for a line start failing (the store), once until one succeeds again. */
    private readonly warn: (msg: string, err: unknown) => void = () => undefined,
  ) {
    this.slots = store.collection<TrunkSlot>({ name: 'call_trunk_slots', indexes: [{ fields: ['connector_id', 'holder'] }] });
  }

  /**
   * Claims a slot for `callSid`, placed at `queuedAt`, once one is free and no call placed before it waits
   * on this worker; resolves with when. Idempotent: a held slot is kept. Rejects when `limit` throws
   * `TrunkMissingError` (a deleted trunk); any other failure is retried at the line's next look.
   */
  acquire(connectorId: string, callSid: string, queuedAt: number, limit: () => Promise<number>): Task<number> {
    let waiter!: Waiter;
    const done = new Promise<number>((resolve, reject) => {
      waiter = { callSid, queuedAt, limit, resolve, reject };
    });
    const line = this.lineOf(connectorId);
    let i = line.waiters.length;
    while (i > 0 && queuedAt < line.waiters[i - 1].queuedAt) i--;
    line.waiters.splice(i, 0, waiter);
    this.serve(connectorId, line);
    // A call that holds a slot already (its claim landed as its actor stopped; it resumes here) need not wait
    // for its turn: it has the slot, which the calls before it in the line could not get while it holds it.
    void this.slots.findOne({ connector_id: connectorId, holder: callSid }).then(
      (held) => {
        if (held && this.leave(connectorId, line, waiter)) waiter.resolve(Date.now());
      },
      () => undefined,
    );
    return {
      done,
      cancel: () => {
        if (this.leave(connectorId, line, waiter)) waiter.reject(new Error('cancelled'));
      },
    };
  }

  /** Frees the slot `callSid` holds on this trunk, if any, and serves this worker's line for the trunk. */
  async release(connectorId: string, callSid: string): Promise<void> {
    // A claim for this call still in flight (it stopped waiting meanwhile: its queue timeout) lands first,
    // so that the slot it may take is the one freed here rather than held for good.
    const claiming = this.lines.get(connectorId)?.claiming;
    if (claiming?.callSid === callSid) await claiming.done.catch(() => undefined);
    await this.slots.update({ connector_id: connectorId, holder: callSid }, { $set: { holder: null, since: null } });
    const line = this.lines.get(connectorId);
    if (line) this.serve(connectorId, line);
  }

  /** How many calls hold a slot of this trunk now. */
  inUse(connectorId: string): Promise<number> {
    return this.slots.count({ connector_id: connectorId, holder: { $ne: null } });
  }

  private lineOf(connectorId: string): Line {
    let line = this.lines.get(connectorId);
    if (!line) this.lines.set(connectorId, (line = { waiters: [], serving: false, again: false, claiming: null, poll: null, failing: false }));
    return line;
  }

  /** Takes `waiter` out of the line; false when it had left already. Drops a line left empty and idle. */
  private leave(connectorId: string, line: Line, waiter: Waiter): boolean {
    const i = line.waiters.indexOf(waiter);
    if (i < 0) return false;
    line.waiters.splice(i, 1);
    if (!line.waiters.length && !line.serving) this.drop(connectorId, line);
    return true;
  }

  private drop(connectorId: string, line: Line): void {
    if (line.poll) clearTimeout(line.poll);
    line.poll = null;
    if (this.lines.get(connectorId) === line) this.lines.delete(connectorId);
  }

  /** Starts a pass over the line, or has the running one go round again (a slot freed or a waiter joined meanwhile). */
  private serve(connectorId: string, line: Line): void {
    if (line.serving) {
      line.again = true;
      return;
    }
    if (line.poll) clearTimeout(line.poll);
    line.poll = null;
    line.serving = true;
    void this.pass(connectorId, line);
  }

  /**
   * Claims slots for the head of the line, one waiter after the other, until one finds none free; then, while
   * waiters are left, looks again after `POLL_MS` (slots freed on other workers are not announced here).
   */
  private async pass(connectorId: string, line: Line): Promise<void> {
    try {
      do {
        line.again = false;
        for (let head = line.waiters[0]; head; head = line.waiters[0]) {
          const claim = this.claimFor(connectorId, line, head);
          line.claiming = { callSid: head.callSid, done: claim };
          let claimed: boolean | null;
          try {
            claimed = await claim;
            line.failing = false;
          } catch (err) {
            if (err instanceof TrunkMissingError) {
              if (this.leave(connectorId, line, head)) head.reject(err);
              continue;
            }
            // Not the call's fault: it keeps its place, and the line is looked at again after POLL_MS.
            if (!line.failing) this.warn(`claiming a slot of trunk ${connectorId} failed; the line tries again`, err);
            line.failing = true;
            line.again = false;
            break;
          } finally {
            line.claiming = null;
          }
          if (claimed === false) break;
          if (claimed === null) continue;
          // A waiter cancelled meanwhile keeps what it claimed: its next activation finds the slot its own, or
          // its failure frees it (`release`).
          if (this.leave(connectorId, line, head)) head.resolve(Date.now());
        }
      } while (line.again);
    } finally {
      // Synchronously after the last look at `again`: a waiter joining from here on starts a pass of its own.
      line.serving = false;
      if (!line.waiters.length) this.drop(connectorId, line);
      else line.poll = setTimeout(() => this.serve(connectorId, line), POLL_MS);
    }
  }

  /**
   * Claims a slot for the head of the line: true when it has one, false when none is free, null when a call
   * placed before it joined the line while the claim was in flight (a call resumed on this worker), which is
   * then the head: the slot is given back for it.
   */
  private async claimFor(connectorId: string, line: Line, head: Waiter): Promise<boolean | null> {
    if (!(await this.tryClaim(connectorId, head.callSid, await head.limit()))) return false;
    if (line.waiters[0] === head || !line.waiters.includes(head)) return true;
    await this.slots.update({ connector_id: connectorId, holder: head.callSid }, { $set: { holder: null, since: null } });
    return null;
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
}
