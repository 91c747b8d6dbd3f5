/**
 * The process's logger: pino, as JSON lines for log collectors, or pretty and quieter for a person at a
 * terminal. `LOG_FORMAT=auto` (the default) picks pretty when stdout is a TTY and JSON otherwise.
 */
import { pino, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { traceFields } from './telemetry.js';

/** How log lines are written. */
export type LogFormat = 'auto' | 'json' | 'pretty';

export interface LoggerOptions {
  level: string;
  format: LogFormat;
  /** Whether stdout is a terminal (`process.stdout.isTTY`). */
  isTTY: boolean;
  /** Fields on every line (e.g. the process's roles). */
  base?: Record<string, unknown>;
}

/** A logger and what it decided: whether lines are pretty, and at which level each HTTP request is logged. */
export interface PlatformLogger {
  logger: Logger;
  pretty: boolean;
  /**
   * `info`: Fastify's own line per request and response (what log collectors want); `debug`: one line per
   * response at debug (server errors at warn), so a terminal shows what matters (the pretty default).
   */
  requestLevel: 'info' | 'debug';
}

/** Decides the format and builds the logger. */
export function createLogger(o: LoggerOptions): PlatformLogger {
  const isPretty = o.format === 'pretty' || (o.format === 'auto' && o.isTTY);
  // Lines written inside a traced span carry its `trace_id` and `span_id` (nothing while tracing is off).
  const options = { level: o.level, base: o.base, mixin: traceFields };
  if (!isPretty) return { logger: pino(options), pretty: false, requestLevel: 'info' };
  // In-process and synchronous: no worker thread for a developer's terminal, and lines keep their order with
  // the start-up lines written straight to stdout.
  const stream = pretty({ colorize: o.isTTY, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', sync: true });
  return { logger: pino(options, stream), pretty: true, requestLevel: 'debug' };
}
