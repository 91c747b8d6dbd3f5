import type { Doc, Store } from '../../store/mod.js';

interface GatewayBeat extends Doc {
  seen_at: number;
}

/**
 * The socket gateways alive now, for counting a session's connections across gateways. Each gateway
 * writes one heartbeat record every TTL/3 and reads the live list as often; a session's CONNECT carries
 * that list, and connections of a gateway missing from it (it died without saying DISCONNECT) stop
 * counting. One write per gateway per period replaces asking every session with an open socket, which
 * kept every such session's actor awake and writing.
 */
export class GatewayDirectory {
  private readonly beats;
  private liveIds: string[];
  private timer: NodeJS.Timeout | null = null;

  constructor(
    store: Store,
    readonly id: string,
    private readonly ttlMs: number,
  ) {
    this.beats = store.collection<GatewayBeat>({ name: 'socket_gateways' });
    this.liveIds = [id];
  }

  /** Writes the first heartbeat and keeps beating (and re-reading the live list) every TTL/3. */
  async start(): Promise<void> {
    await this.beat();
    this.timer = setInterval(() => void this.beat().catch(() => undefined), Math.max(100, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
  }

  /** Gateways whose heartbeat is younger than the TTL, this one included. */
  live(): string[] {
    return this.liveIds;
  }

  /** Stops beating and removes this gateway's record (its sockets have said DISCONNECT). */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.beats.delete({ id: this.id }).catch(() => undefined);
  }

  private async beat(): Promise<void> {
    const now = Date.now();
    await this.beats.update({ id: this.id }, { $set: { seen_at: now } }, { upsert: true });
    const alive = await this.beats.find({ seen_at: { $gt: now - this.ttlMs } });
    const ids = alive.map((b) => b.id);
    // Records of gateways long gone are dropped, so the list stays as short as the deployment.
    if (alive.length) await this.beats.delete({ seen_at: { $lt: now - 10 * this.ttlMs } });
    this.liveIds = ids.includes(this.id) ? ids : [...ids, this.id];
  }
}
