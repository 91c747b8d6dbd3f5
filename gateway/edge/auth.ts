import type { FastifyReply, FastifyRequest } from 'fastify';
import { bearerToken } from '../../platform/bearer.js';
import { ADMIN, EDGE } from '../../platform/errors.js';
import type { Services } from '../../platform/services.js';
import { secretMatches } from '../../platform/secrets.js';
import type { Account } from '../../tenancy/accounts.js';
import type { ProjectRef } from '../../tenancy/cache.js';
import type { ApiKey, ApiKeys, KeyScope } from '../../tenancy/keys.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified API key of the request, set by `apiKeyAuth`. */
    apiKey: ApiKey | null;
    /**
     * Whose request this is, once its credentials are verified (a key's or a connector's account and project;
     * project null for an account-wide key): the `api_errors` metric counts its 5xx answers for them.
     */
    tenant: Tenant | null;
  }
}

/** The account and project a request's credentials speak for. */
export interface Tenant {
  account_id: string;
  project_id: string | null;
}

/**
 * Credentials checked in `onRequest`, before the body is read and validated: a request with bad credentials
 * is 401 whatever its body (a malformed body of a caller without a valid key says nothing about the body).
 * `hook` goes in the routes' `onRequest`; the handler takes what `check` found with `of(request)`.
 */
export function credentialsFirst<T>(check: (request: FastifyRequest) => Promise<T>): {
  hook: (request: FastifyRequest) => Promise<void>;
  of: (request: FastifyRequest) => T;
} {
  const found = new WeakMap<FastifyRequest, T>();
  return {
    hook: async (request) => {
      found.set(request, await check(request));
    },
    of: (request) => {
      if (!found.has(request)) throw new Error('credentialsFirst: the route lacks its onRequest hook');
      return found.get(request)!;
    },
  };
}

/** One request header's value (the first, when repeated). */
export function header(request: FastifyRequest, name: string): string | undefined {
  // Own properties only: `constructor` would otherwise name what every object inherits.
  const v = Object.hasOwn(request.headers, name) ? request.headers[name] : undefined;
  return Array.isArray(v) ? v[0] : v;
}

/**
 * An `onRequest` hook that requires an `x-api-key` of one of `scopes`: 401 when missing or not a live key;
 * a key for another interface family gets 403 (`EDGE_API_KEY_SCOPE`), or 401 (`EDGE_API_KEY_OTHER_SCOPE`) with
 * `otherScope: 401`, for a family whose error table has no 403 (the Alerts API: a key that is not an Alerts key
 * is an invalid key there).
 */
export function apiKeyAuth(keys: ApiKeys, scopes: KeyScope[], o: { otherScope?: 401 | 403 } = {}) {
  const otherScope = o.otherScope === 401 ? EDGE.API_KEY_OTHER_SCOPE : EDGE.API_KEY_SCOPE;
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const presented = header(request, 'x-api-key');
    if (!presented) throw EDGE.API_KEY_MISSING();
    const key = await keys.verify(presented);
    if (!key) throw EDGE.API_KEY_INVALID();
    if (!scopes.includes(key.scope)) throw otherScope(key.scope);
    request.apiKey = key;
    request.tenant = key;
  };
}

/** An `onRequest` hook that requires `Authorization: Bearer <OPERATOR_TOKEN>` (read as `bearerToken` reads it). */
export function operatorAuth(tokenHash: string) {
  return async (request: FastifyRequest): Promise<void> => {
    const token = bearerToken(header(request, 'authorization'));
    if (token === null || !secretMatches(token, tokenHash)) throw ADMIN.OPERATOR_TOKEN_INVALID();
  };
}

/**
 * The account and project a path names (id or slug form), as a key of that account may see them: 404 for an
 * unknown account or project. The interface families check the key against them afterwards, in their order.
 * Both come through the process's tenancy cache: a project's id, account and slug never change and projects
 * are never deleted, so only what a request needs of it is kept (`ProjectRef`); unknown ones are not cached.
 */
export async function resolvePathProject(services: Services, keyId: string, accountParam: string, projectParam: string): Promise<{ account: Account; project: ProjectRef }> {
  const account = await services.accounts.resolve(accountParam);
  if (!account) throw EDGE.ACCOUNT_NOT_FOUND();
  const project = await services.tenancy.projects.read(`${account.id}/${projectParam}`, async () => {
    const agent = await services.builder.agents.access({ accountId: account.id, projectId: null, keyId }, projectParam).catch(() => null);
    return agent ? { id: agent.id, account_id: agent.account_id, slug: agent.slug } : null;
  });
  if (!project) throw EDGE.PROJECT_NOT_FOUND();
  return { account, project };
}
