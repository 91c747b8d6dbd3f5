import type { FastifyBaseLogger, FastifyInstance, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { SecretBox } from '../../../actors/delivery/mod.js';
import type { Runtime } from '../../../actors/mod.js';
import type { Store } from '../../../store/mod.js';

/** The Fastify instance type these routes are written against (zod type provider). */
export type ZodApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, ZodTypeProvider>;

/** What the webhook routes need. */
export interface WebhooksContext {
  store: Store;
  runtime: Pick<Runtime, 'client'>;
  /** Seals signing secrets at rest. */
  secrets: SecretBox;
  /** `WEBHOOK_ALLOW_PRIVATE_URLS`: accept loopback and private destinations. */
  allowPrivateUrls: boolean;
  /** Endpoints per account (10). */
  maxEndpoints: number;
}

/** Registers one group of routes. */
export type RouteGroup = (app: ZodApp, ctx: WebhooksContext) => void;
