import type { TemplatedApp } from '@trufflesuite/uws-js-unofficial';
import { createHash } from 'node:crypto';
import type { SessionReply } from '../../actors/session/mod.js';
import type { SessionInfo } from '../../machines/session.js';
import { bearerToken } from '../../platform/bearer.js';
import { timeOrderedId } from '../../platform/ids.js';
import type { MessagingContext } from './context.js';
import { HTTP_ERRORS } from './errors.js';
import { bodyObject, HttpFailure, ok } from './http.js';

/** `platform` values a session may name (contract 4.7 plus the addendum's web variants). */
export const PLATFORMS = ['web', 'ios', 'android', 'custom', 'ios-web', 'android-web'] as const;

/**
 * The access token of an `Authorization: Bearer` header (`bearerToken`: the rule every Bearer route reads), with
 * the contract's session-step errors.
 */
export async function bearer(ctx: MessagingContext, authorization: string) {
  if (!authorization) throw new HttpFailure(HTTP_ERRORS.missingAccessToken);
  const token = bearerToken(authorization);
  if (token === null) throw new HttpFailure(HTTP_ERRORS.missingAuthHeaders);
  const claims = await ctx.tokens.verify(token);
  if (!claims || !(await ctx.connectorOf(claims))) throw new HttpFailure(HTTP_ERRORS.invalidAccessToken);
  return { claims, token };
}

/**
 * `POST /api/v1/sessions` (contract 4.7): creates a session actor (`session/<id>`); its first step, durable
 * before this answers, commits `session.started` (SESSION_START, and who the session belongs to).
 */
export function mountSessions(app: TemplatedApp, ctx: MessagingContext): void {
  app.post('/api/v1/sessions', ctx.route(['authorization', 'user-agent'], 0, async ({ headers, body, contentCoding, remote }) => {
    const wait = ctx.limitAddress(remote);
    if (wait) throw new HttpFailure(HTTP_ERRORS.rateLimited, { 'retry-after': String(wait) });
    const { claims, token } = await bearer(ctx, headers.authorization);
    ctx.limitHttp(`t:${createHash('sha256').update(token).digest('base64url').slice(0, 22)}`);
    const parsed = bodyObject({ body, contentCoding });
    const streaming = parsed.streaming_enabled ?? false;
    const platform = parsed.platform ?? 'web';
    if (typeof streaming !== 'boolean') throw new HttpFailure(HTTP_ERRORS.badRequest, {}, 'streaming_enabled must be a boolean');
    if (typeof platform !== 'string' || !(PLATFORMS as readonly string[]).includes(platform)) {
      throw new HttpFailure(HTTP_ERRORS.badRequest, {}, `platform must be one of ${PLATFORMS.join(', ')}`);
    }
    const id = timeOrderedId('ses');
    const info: SessionInfo = {
      accountId: claims.account_id,
      projectId: claims.project_id,
      connectorId: claims.connector_id,
      environment: claims.environment,
      variantId: claims.variant_id,
      streaming,
      platform,
      userAgent: headers['user-agent'].slice(0, 512),
      createdAt: Date.now(),
      idleMs: ctx.config.sessionIdleMs,
      maxConnections: ctx.config.maxConnections,
      connectionTtlMs: ctx.config.connectionTtlMs,
      handoffTimeoutMs: ctx.config.handoffTimeoutMs,
      queueStatusMs: ctx.config.queueStatusMs,
    };
    let reply: SessionReply;
    try {
      reply = await ctx.runtime.client.ask<SessionReply>('session', id, { type: 'CREATE', info });
    } catch (err) {
      ctx.logger.error({ err, session: id }, 'session creation failed');
      throw new HttpFailure(HTTP_ERRORS.sessionCreateFailed);
    }
    if (!reply.ok) throw new HttpFailure(HTTP_ERRORS.sessionCreateFailed);
    return ok({ session_id: id });
  }));
}
