/** A placement diagnostic sink, as `NatsPlacementOptions.log` takes it. */
export type PlacementLog = (msg: string, extra?: object) => void;

/** Per-shard diagnostics folded into one line per message and cause (see `shardLog`). */
export interface ShardLog {
  /** Queues `msg` for `shard`; the same `msg` with the same `extra` for other shards joins the same line. */
  (msg: string, shard: number, extra?: Record<string, unknown>): void;
  /** Writes every queued line now. */
  flush(): void;
}

/**
 * One line per message and cause, naming its shards, instead of one per shard. When the broker goes away
 * every shard's renewal fails for the same reason within the same round, and a worker holding 64 shards
 * wrote 64 identical lines each round; the lines are written `delayMs` after the first of them is queued,
 * which gathers one round's failures (they settle within a few milliseconds of each other).
 */
export function shardLog(log: PlacementLog, delayMs = 50): ShardLog {
  const pending = new Map<string, { msg: string; extra: Record<string, unknown>; shards: number[] }>();
  let timer: NodeJS.Timeout | undefined;

  function flush(): void {
    clearTimeout(timer);
    timer = undefined;
    for (const { msg, extra, shards } of pending.values()) {
      shards.sort((a, b) => a - b);
      log(msg, Object.assign({}, extra, shards.length === 1 ? { shard: shards[0] } : { shards, count: shards.length }));
    }
    pending.clear();
  }

  const queue = (msg: string, shard: number, extra: Record<string, unknown> = {}): void => {
    const key = `${msg}\u0000${JSON.stringify(extra)}`;
    const line = pending.get(key);
    if (line) line.shards.push(shard);
    else pending.set(key, { msg, extra, shards: [shard] });
    if (timer === undefined) {
      timer = setTimeout(flush, delayMs);
      // A diagnostic never keeps the process alive; `stop` flushes what is left.
      timer.unref();
    }
  };
  return Object.assign(queue, { flush });
}
