/**
 * What the threads and processes of a deployment start their actor runtime and invalidation bus with, from
 * one config: the embedded default's main thread and edge thread (`main.ts`, `edge-thread-main.ts`) and every
 * process over NATS. In one place, so that a setting cannot reach one thread and miss the other.
 */
import type { Runtime, RuntimeOptions } from '../actors/mod.js';
import type { Store } from '../store/mod.js';
import type { TenancyCache } from '../tenancy/cache.js';
import type { Config } from './config.js';
import type { InvalidationBusOptions } from './invalidation.js';
import type { PlatformLogger } from './logger.js';

/** What `runtimeOptions` sets; the caller sets the rest (kinds, transport, role), none of which it overrides. */
type ConfiguredOption = 'store' | 'shardCount' | 'leaseTtlMs' | 'passivateAfterMs' | 'askTimeoutMs' | 'log' | 'errorLog' | 'healthLog' | 'natsLog' | 'projections';

/** The runtime's and the bus's warnings, as log lines at warn level. */
const warnings = (log: PlatformLogger) => (msg: string, extra?: object) => log.logger.warn(extra ?? {}, msg);

/** The runtime options that come from the config and the logger (the caller adds kinds, transport and roles). */
export function runtimeOptions(config: Config, log: PlatformLogger, store: Store): Pick<RuntimeOptions, ConfiguredOption> {
  return {
    store,
    shardCount: config.shardCount,
    leaseTtlMs: config.leaseTtlMs,
    passivateAfterMs: config.passivateAfterMs,
    askTimeoutMs: config.askTimeoutMs,
    log: warnings(log),
    errorLog: (msg, extra) => log.logger.error(extra ?? {}, msg),
    healthLog: (level, msg, extra) => log.logger[level](extra ?? {}, msg),
    natsLog: (level, msg, extra) => log.logger[level](extra, msg),
    projections: { store: { dataDir: config.dataDir, mongodbUrl: config.mongodbUrl }, ...config.projections },
  };
}

/** The invalidation bus's options for a thread or process whose tenancy cache is `cache`. */
export function busOptions(config: Config, log: PlatformLogger, runtime: Runtime, store: Store, cache: TenancyCache): InvalidationBusOptions {
  return {
    transport: runtime.transport,
    store,
    cache,
    beatTtlMs: Math.max(3000, config.tenancyCache.ttlMs),
    log: warnings(log),
  };
}
