import type { TemplatedApp } from '@trufflesuite/uws-js-unofficial';
import type { MessagingContext } from './context.js';
import { HTTP_ERRORS } from './errors.js';
import { bodyObject, HttpFailure, ok } from './http.js';

/** A host as connectors register it: no scheme, path, port or trailing dot; lower case. */
export function normalizeHost(value: string): string {
  let h = value.trim().toLowerCase();
  h = h.replace(/^[a-z][a-z0-9+.-]*:\/\//, '');
  h = h.split(/[/?#]/)[0];
  h = h.replace(/:\d+$/, '').replace(/\.$/, '');
  return h;
}

/** A host name once normalized: dot-separated labels, none empty, of letters, digits, `-` and `_`. */
const HOST_NAME = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

/**
 * `X-Host` matches the registered host exactly or as a subdomain of it. What is presented must be a host name
 * (with a scheme, path or port, as a page's origin or address gives it): `.example.com` or `a..example.com`
 * ends with the registered host but names none of its subdomains.
 */
export function hostMatches(presented: string, registered: string): boolean {
  const p = normalizeHost(presented);
  const r = normalizeHost(registered);
  return HOST_NAME.test(p) && (p === r || p.endsWith(`.${r}`));
}

/**
 * `POST /api/v1/access-token` (contract 4.7): a messaging connector's token (`X-Token`) and a host
 * (`X-Host`) matching the one registered for it give a short-lived JWT. The body is an empty JSON object,
 * and may be omitted; one that is not a JSON object is a 400 (contract 7.4: "malformed body"), once the
 * credentials have passed, as the session step checks its body after the access token.
 */
export function mountAccessToken(app: TemplatedApp, ctx: MessagingContext): void {
  app.post('/api/v1/access-token', ctx.route(['x-token', 'x-host'], 0, async ({ headers, body, contentCoding, remote }) => {
    const wait = ctx.limitAddress(remote);
    if (wait) throw new HttpFailure(HTTP_ERRORS.rateLimited, { 'retry-after': String(wait) });
    const token = headers['x-token'];
    const host = headers['x-host'];
    if (!token || !host) throw new HttpFailure(HTTP_ERRORS.missingAuthHeaders);
    const connector = await ctx.services.connectors.verify(token);
    if (!connector) throw new HttpFailure(HTTP_ERRORS.connectorUnknown);
    // Every visitor of a site shares its connector token: the limit is per connector and client address.
    ctx.limitHttp(`c:${connector.id}:${remote}`);
    if (!connector.host) throw new HttpFailure(HTTP_ERRORS.connectorNoHost);
    if (connector.kind !== 'messaging') throw new HttpFailure(HTTP_ERRORS.connectorUnknown);
    if (!hostMatches(host, connector.host)) throw new HttpFailure(HTTP_ERRORS.connectorHostMismatch);
    bodyObject({ body, contentCoding });
    let accessToken: string;
    try {
      accessToken = await ctx.tokens.sign({
        account_id: connector.account_id,
        project_id: connector.project_id,
        connector_id: connector.id,
        environment: connector.environment,
        variant_id: connector.variant_id,
      });
    } catch (err) {
      ctx.logger.error({ err }, 'access token signing failed');
      throw new HttpFailure(HTTP_ERRORS.tokenCreateFailed);
    }
    return ok({ access_token: accessToken, expires_in: ctx.tokens.ttlSeconds, token_type: 'Bearer' });
  }));
}
