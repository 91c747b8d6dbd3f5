/**
 * A request's logger, made only when the request writes a line at an enabled level. Fastify gives every
 * request a child of the process's logger (bound to its request id); pino builds the child's bindings as
 * JSON at once, a measurable share of a chat turn, though most requests never log at the configured level.
 * This child forwards to a pino child created on the first enabled line, so lines keep their `reqId`.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Logger } from 'pino';

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type LogFn = (...args: unknown[]) => void;

class LazyRequestLogger {
  private real: Logger | null = null;

  constructor(
    private readonly parent: Logger,
    private readonly bindings: Record<string, unknown>,
    private readonly opts: object,
  ) {}

  private made(): Logger {
    return (this.real ??= this.parent.child(this.bindings, this.opts));
  }

  private write(level: Level, args: unknown[]): void {
    // The parent's level decides, as the child's would (it inherits it unless changed through this one).
    if (this.real === null && !this.parent.isLevelEnabled(level)) return;
    (this.made()[level] as LogFn).apply(this.real, args);
  }

  get level(): string {
    return this.real?.level ?? this.parent.level;
  }
  set level(value: string) {
    this.made().level = value;
  }
  isLevelEnabled(level: string): boolean {
    return (this.real ?? this.parent).isLevelEnabled(level);
  }
  fatal(...args: unknown[]): void {
    this.write('fatal', args);
  }
  error(...args: unknown[]): void {
    this.write('error', args);
  }
  warn(...args: unknown[]): void {
    this.write('warn', args);
  }
  info(...args: unknown[]): void {
    this.write('info', args);
  }
  debug(...args: unknown[]): void {
    this.write('debug', args);
  }
  trace(...args: unknown[]): void {
    this.write('trace', args);
  }
  silent(): void {}
  /** Lazy too while nothing was logged (the Chat API binds each request's conversation id): the bindings add up. */
  child(bindings: Record<string, unknown>, opts?: object): Logger {
    if (this.real === null && (opts === undefined || Object.keys(opts).length === 0)) {
      return new LazyRequestLogger(this.parent, { ...this.bindings, ...bindings }, this.opts) as unknown as Logger;
    }
    return this.made().child(bindings, opts);
  }
}

/** Fastify's `childLoggerFactory`: a lazy child per request (see above); the edge's logger is pino. */
export function lazyRequestLogger(logger: FastifyBaseLogger, bindings: Record<string, unknown>, opts: object): FastifyBaseLogger {
  return new LazyRequestLogger(logger as Logger, bindings, opts) as unknown as FastifyBaseLogger;
}
