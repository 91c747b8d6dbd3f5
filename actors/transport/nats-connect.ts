/**
 * The first connection to NATS, which may have to wait for the server: the roles of a deployment are started
 * in any order (a process manager starts them together, a container's NATS comes up after the workers), so a
 * role that finds no server keeps trying rather than exiting. Credentials a server refuses are not retried:
 * they will not fix themselves, and an operator learns it from the exit at once rather than from a role that
 * waits for ever.
 */
import { AuthorizationError, connect, InvalidArgumentError, UserAuthenticationExpiredError, type NatsConnection } from '@nats-io/transport-node';

/** Time between two attempts while no server answers. */
export const NATS_RETRY_MS = 2_000;
/** Time between two warnings while waiting (the first is logged at the first failed attempt). */
export const NATS_WAIT_WARN_MS = 30_000;

/** Where the waiting is told: a warning when it starts and every `NATS_WAIT_WARN_MS`, info when it ends. */
export type NatsWaitLog = (level: 'warn' | 'info', msg: string, extra: Record<string, unknown>) => void;

export interface NatsConnectOptions {
  /** Connection name shown by the server's monitoring. */
  name?: string;
  /** Aborted (the process is told to stop while it waits): no more attempts; rejects with `signal.reason`. */
  signal?: AbortSignal;
  log?: NatsWaitLog;
}

/** The server refused the credentials (or they expired): connecting again would be refused again. */
export class NatsCredentialsError extends Error {
  constructor(server: string, cause: Error) {
    super(`NATS at ${server} refused this process's credentials (${cause.message}): check the user and password (or token) in NATS_URL; not retrying`, { cause });
    this.name = 'NatsCredentialsError';
  }
}

/** The server part and the credentials of a NATS URL (`nats://user:pass@host:port`, `nats://token@host:port`). */
export interface NatsServer {
  /**
   * The URL without its credentials: what logs show. A comma-separated list of servers (as the Go client and
   * the `nats` command line take) stays one, each server without its credentials; nats.js is given the list.
   */
  server: string;
  user?: string;
  pass?: string;
  token?: string;
}

/**
 * A NATS URL that does not name its servers unambiguously, so that a connection would go to a wrong address
 * (or send part of a password as the host). Its message never shows the URL: it may hold a password.
 */
export class NatsUrlError extends Error {
  constructor(why: string) {
    super(`NATS_URL ${why}: it must be nats://[user:password@]host[:port] or nats://token@host[:port] (or a comma-separated list of such URLs); percent-encode any '@', ':', '/' or ',' in the user, password or token (%40, %3A, %2F, %2C)`);
    this.name = 'NatsUrlError';
  }
}

/** A host name, an IPv4 address or a bracketed IPv6 address, with an optional port and an optional `/`. */
const HOST_PORT = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?::\d{1,5})?\/?$/;

function decoded(part: string, what: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new NatsUrlError(`has a ${what} that is not percent-encoded correctly`);
  }
}

/** One server URL of the list. */
function parseOne(url: string, n: number, of: number): NatsServer {
  const which = of > 1 ? ` (server ${n + 1} of ${of})` : '';
  const m = /^([a-z][a-z0-9+.-]*:\/\/)?(.*)$/is.exec(url)!;
  const [scheme, rest] = [m[1] ?? '', m[2]];
  const at = rest.indexOf('@');
  if (at >= 0 && rest.indexOf('@', at + 1) >= 0) throw new NatsUrlError(`has more than one '@'${which}, so the server's address is ambiguous`);
  const userInfo = at >= 0 ? rest.slice(0, at) : null;
  const hostPort = at >= 0 ? rest.slice(at + 1) : rest;
  if (userInfo !== null && /[/?#]/.test(userInfo)) throw new NatsUrlError(`has a '/', '?' or '#' in its user, password or token${which}`);
  if (!HOST_PORT.test(hostPort)) throw new NatsUrlError(`does not name one host and port${which}`);
  const server = `${scheme}${hostPort}`;
  if (userInfo === null) return { server };
  const colon = userInfo.indexOf(':');
  if (colon < 0) return { server, token: decoded(userInfo, 'token') };
  return { server, user: decoded(userInfo.slice(0, colon), 'user'), pass: decoded(userInfo.slice(colon + 1), 'password') };
}

/**
 * Splits the credentials off a NATS URL, or a comma-separated list of them. nats.js v3 ignores a URL's user
 * info (the Go client and the `nats` command line read it), so they are passed as options; and a password
 * must never reach a log line. Throws `NatsUrlError` for a URL that does not name each server's host and port
 * cleanly (an unencoded '@' in a password, say) and for servers with different credentials.
 */
export function parseNatsUrl(url: string): NatsServer {
  const urls = url.split(',').map((u) => u.trim());
  if (urls.some((u) => u === '')) throw new NatsUrlError('has an empty server in its comma-separated list');
  const servers = urls.map((u, i) => parseOne(u, i, urls.length));
  const auth = servers.filter((s) => s.user !== undefined || s.token !== undefined);
  const same = (a: NatsServer, b: NatsServer) => a.user === b.user && a.pass === b.pass && a.token === b.token;
  if (auth.some((s) => !same(s, auth[0]))) throw new NatsUrlError('gives its servers different credentials, and one connection uses one set');
  return { ...auth[0], server: servers.map((s) => s.server).join(',') };
}

function refusedCredentials(err: unknown): err is Error {
  return err instanceof AuthorizationError || err instanceof UserAuthenticationExpiredError;
}

/** Resolves after `ms`, or rejects with the signal's reason once it is aborted. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** `attempt`, unless the signal is aborted first; a connection that arrives after that is closed. */
function unlessAborted(attempt: Promise<NatsConnection>, signal?: AbortSignal): Promise<NatsConnection> {
  if (!signal) return attempt;
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      void attempt.then((nc) => nc.close(), () => {});
      return reject(signal.reason);
    }
    const onAbort = () => {
      void attempt.then((nc) => nc.close(), () => {});
      reject(signal.reason);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    attempt.then(
      (nc) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) void nc.close();
        else resolve(nc);
      },
      (err) => {
        signal.removeEventListener('abort', onAbort);
        reject(err);
      },
    );
  });
}

/**
 * Connects to the NATS server at `url`, trying every `NATS_RETRY_MS` until one answers. Once connected, the
 * connection reconnects without limit by itself (nats.js). Throws `NatsCredentialsError` when the server
 * refuses the credentials, and the signal's reason when it is aborted while waiting.
 */
export async function connectNats(url: string, o: NatsConnectOptions = {}): Promise<NatsConnection> {
  const { server, ...auth } = parseNatsUrl(url);
  const began = Date.now();
  let warnedAt: number | null = null;
  for (;;) {
    try {
      const nc = await unlessAborted(
        connect({
          servers: server.split(','),
          ...auth,
          name: o.name,
          maxReconnectAttempts: -1,
          // Async traces allocate an Error per request to improve stacks; not worth it on the hot path.
          noAsyncTraces: true,
        }),
        o.signal,
      );
      if (warnedAt !== null) o.log?.('info', 'connected to NATS', { nats: server, waited_s: Math.round((Date.now() - began) / 1000) });
      return nc;
    } catch (err) {
      if (o.signal?.aborted) throw o.signal.reason;
      if (refusedCredentials(err)) throw new NatsCredentialsError(server, err);
      // A URL nats.js cannot parse (or options it refuses) will not parse on the next attempt either.
      if (err instanceof TypeError || err instanceof InvalidArgumentError) throw new Error(`NATS_URL ${server} is not usable: ${err.message}`, { cause: err });
      const now = Date.now();
      if (warnedAt === null || now - warnedAt >= NATS_WAIT_WARN_MS) {
        warnedAt = now;
        o.log?.('warn', `NATS is not reachable yet: retrying every ${NATS_RETRY_MS / 1000} s`, {
          nats: server,
          waited_s: Math.round((now - began) / 1000),
          err: err instanceof Error ? err.message : String(err),
        });
      }
    }
    await pause(NATS_RETRY_MS, o.signal);
  }
}
