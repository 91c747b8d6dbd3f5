import type { Logger } from 'pino';
import type { Runtime } from '../../actors/mod.js';
import { sessionHistory, sessionRecords, type SessionHistory } from '../../actors/session/mod.js';
import type { MessagingConfig } from '../../platform/config.js';
import type { Region } from '../../platform/region.js';
import type { Services } from '../../platform/services.js';
import type { Connector } from '../../tenancy/connectors.js';
import { HTTP_ERRORS } from './errors.js';
import { HttpFailure, route } from './http.js';
import { RateLimiter } from '../../platform/rate-limit.js';
import type { AccessClaims, AccessTokens } from './tokens.js';

/** A session id as the routes take one (anything else names no session: 404 without a read). */
export const SESSION_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** What every Messaging route of a gateway shares. */
export interface MessagingContext {
  services: Services;
  runtime: Runtime;
  tokens: AccessTokens;
  config: MessagingConfig;
  logger: Logger;
  /** This gateway process, as connections are registered with their session. */
  gatewayId: string;
  /** Sessions' frames and owners, read from the actor journal (the Messaging API's own answers). */
  history: SessionHistory;
  /** The session records (a projection, behind the journal): the desk's lists only. */
  records: ReturnType<typeof sessionRecords>;
  /** HTTP requests per connector and client address (token step) or per access token (sessions step). */
  httpLimiter: RateLimiter;
  /** Token steps, session steps and socket upgrades per client address, whatever their credentials. */
  addressLimiter: RateLimiter;
  /** The connector a token names, if it still exists and is a messaging connector. */
  connectorOf(claims: AccessClaims): Promise<Connector | null>;
  /** Throws the 429 with Retry-After when `key` is over the HTTP rate. */
  limitHttp(key: string): void;
  /**
   * Takes a token of the client address's bucket: 0 when allowed, else the seconds for Retry-After. Checked
   * before any credential is read, so a client that floods with junk credentials is cut as early.
   */
  limitAddress(remote: string): number;
  /** The region this deployment serves (`REGION`), when requests naming another are refused. */
  region?: Region;
  /** `route` of `http.ts` with this gateway's body deadline and region. */
  route: typeof route;
}

export function messagingContext(o: Omit<MessagingContext, 'history' | 'records' | 'httpLimiter' | 'addressLimiter' | 'connectorOf' | 'limitHttp' | 'limitAddress' | 'route'>): MessagingContext {
  const perMinute = o.config.httpRatePerMinute;
  const httpLimiter = new RateLimiter(perMinute / 60, Math.max(1, perMinute));
  const perAddress = o.config.addressRatePerMinute;
  const addressLimiter = new RateLimiter(perAddress / 60, Math.max(1, perAddress));
  return {
    history: sessionHistory(o.services.store),
    records: sessionRecords(o.services.store),
    httpLimiter,
    addressLimiter,
    connectorOf: async (claims) => {
      const c = await o.services.connectors.get(claims.connector_id);
      return c && c.kind === 'messaging' && c.account_id === claims.account_id && c.project_id === claims.project_id ? c : null;
    },
    limitHttp: (key) => {
      const wait = httpLimiter.take(key);
      if (wait) throw new HttpFailure(HTTP_ERRORS.rateLimited, { 'retry-after': String(wait) });
    },
    limitAddress: (remote) => addressLimiter.take(`a:${remote}`),
    route: (headerNames, paramCount, handler, opts = {}) => route(headerNames, paramCount, handler, { bodyTimeoutMs: o.config.bodyTimeoutMs, region: o.region, ...opts }),
    ...o,
  };
}
