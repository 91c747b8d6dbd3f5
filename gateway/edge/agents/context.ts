import type { FastifyBaseLogger, FastifyInstance, FastifyRequest, RawReplyDefaultExpression, RawRequestDefaultExpression, RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Caller } from '../../../builder/mod.js';
import type { Services } from '../../../platform/services.js';

/** The Fastify instance type the Agents routes are written against (zod type provider). */
export type ZodApp = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, ZodTypeProvider>;

/** Registers one group of routes of a family. */
export type RouteGroup = (app: ZodApp, services: Services) => void;

/** The Agents API caller of an authenticated request. */
export function callerOf(request: FastifyRequest): Caller {
  const key = request.apiKey!;
  return { accountId: key.account_id, projectId: key.project_id, keyId: key.id };
}
