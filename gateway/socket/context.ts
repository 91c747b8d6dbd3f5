import type { Logger } from 'pino';
import type { Runtime } from '../../actors/mod.js';
import { Journal, sessionRecords } from '../../actors/session/mod.js';
import type { MessagingConfig } from '../../platform/config.js';
import type { Services } from '../../platform/services.js';
import type { Connector } from '../../tenancy/connectors.js';
import { HTTP_ERRORS } from './errors.js';
import { HttpFailure } from './http.js';
import { RateLimiter } from './rate-limit.js';
import type { AccessClaims, AccessTokens } from './tokens.js';

/** What every Messaging route of a gateway shares. */
export interface MessagingContext {
  services: Services;
  runtime: Runtime;
  tokens: AccessTokens;
  config: MessagingConfig;
  logger: Logger;
  /** This gateway process, as connections are registered with their session. */
  gatewayId: string;
  journal: Journal;
  records: ReturnType<typeof sessionRecords>;
  /** HTTP requests per connector and client address (token step) or per access token (sessions step). */
  httpLimiter: RateLimiter;
  /** The connector a token names, if it still exists and is a messaging connector. */
  connectorOf(claims: AccessClaims): Promise<Connector | null>;
  /** Throws the 429 with Retry-After when `key` is over the HTTP rate. */
  limitHttp(key: string): void;
}

export function messagingContext(o: Omit<MessagingContext, 'journal' | 'records' | 'httpLimiter' | 'connectorOf' | 'limitHttp'>): MessagingContext {
  const perMinute = o.config.httpRatePerMinute;
  const httpLimiter = new RateLimiter(perMinute / 60, Math.max(1, perMinute));
  return {
    ...o,
    journal: new Journal(o.services.store),
    records: sessionRecords(o.services.store),
    httpLimiter,
    connectorOf: async (claims) => {
      const c = await o.services.connectors.get(claims.connector_id);
      return c && c.kind === 'messaging' && c.account_id === claims.account_id && c.project_id === claims.project_id ? c : null;
    },
    limitHttp: (key) => {
      const wait = httpLimiter.take(key);
      if (wait) throw new HttpFailure(HTTP_ERRORS.rateLimited, { 'retry-after': String(wait) });
    },
  };
}
