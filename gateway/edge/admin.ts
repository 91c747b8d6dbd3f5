import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MAIN } from '../../builder/mod.js';
import { ADMIN } from '../../platform/errors.js';
import type { Services } from '../../platform/services.js';
import { SLUG_PATTERN } from '../../platform/slug.js';
import { toE164 } from '../../platform/phone-numbers.js';
import { CONNECTOR_KINDS, ENVIRONMENTS, viewConnector } from '../../tenancy/connectors.js';
import { KEY_PERMISSIONS, KEY_SCOPES, PROJECT_SCOPES, viewKey } from '../../tenancy/keys.js';
import { operatorAuth } from './auth.js';
import { useErrorShape } from './errors.js';
import { FieldErrorBody } from './schemas.js';

const Account = z.object({ id: z.string(), slug: z.string(), name: z.string(), created_at: z.string() });
const KeyView = z.object({
  id: z.string(),
  scope: z.enum(KEY_SCOPES),
  account_id: z.string(),
  project_id: z.string().nullable(),
  permissions: z.array(z.enum(KEY_PERMISSIONS)),
  created_at: z.string(),
});
const ConnectorView = z.object({
  id: z.string(),
  kind: z.enum(CONNECTOR_KINDS),
  account_id: z.string(),
  project_id: z.string(),
  environment: z.enum(ENVIRONMENTS),
  variant_id: z.string().nullable(),
  host: z.string().nullable(),
  telephony_connector_id: z.string().nullable().optional(),
  from_number: z.string().nullable().optional(),
  created_at: z.string(),
});
const Settings = z.object({ show_transcripts: z.boolean(), chunked_streaming: z.boolean(), pii_redaction: z.boolean(), recording_retention_days: z.number().int().min(0).max(36_500).optional() });
const IdParam = z.object({ id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/) });
const HOST = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$/;
const errors = { 400: FieldErrorBody, 401: FieldErrorBody, 404: FieldErrorBody, 409: FieldErrorBody, 422: FieldErrorBody };

export interface AdminOptions {
  services: Services;
  operatorTokenHash: string;
}

/** The operator's admin API (operator.md): accounts, keys, connectors and project settings. */
export const adminPlugin: FastifyPluginAsync<AdminOptions> = async (root, { services, operatorTokenHash }) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'fields');
  app.addHook('onRequest', operatorAuth(operatorTokenHash));
  const { accounts, keys, connectors, settings, builder } = services;

  /** The agent a project id names, checked to belong to the account. */
  const project = async (accountId: string, projectId: string) => {
    const agent = await builder.agents.access({ accountId, projectId: null, keyId: 'operator' }, projectId).catch(() => null);
    if (!agent) throw ADMIN.PROJECT_NOT_FOUND();
    return agent;
  };

  /** The outbound fields of a connector, checked: the trunk must be the project's, the number E.164. */
  const outboundFields = async (accountId: string, agentId: string, b: { telephony_connector_id?: string | null; from_number?: string | null }) => {
    const out: { telephony_connector_id: string | null; from_number: string | null } = { telephony_connector_id: null, from_number: null };
    if (b.telephony_connector_id != null) {
      await builder.telephony.getConnector({ account_id: accountId, agent_id: agentId }, b.telephony_connector_id).catch(() => {
        throw ADMIN.TELEPHONY_CONNECTOR_NOT_FOUND();
      });
      out.telephony_connector_id = b.telephony_connector_id;
    }
    if (b.from_number != null) {
      out.from_number = toE164(b.from_number);
      if (!out.from_number) throw ADMIN.FROM_NUMBER_INVALID();
    }
    return out;
  };

  app.post('/accounts', {
    schema: {
      tags: ['admin'],
      summary: 'Create an account',
      body: z.object({
        name: z.string().min(1, 'name must be between 1 and 128 characters').max(128, 'name must be between 1 and 128 characters'),
        slug: z.string().regex(SLUG_PATTERN, 'slug must be lowercase letters, digits and dashes (1 to 63)').optional(),
      }),
      response: { 201: Account, ...errors },
    },
  }, async (req, reply) => reply.code(201).send(await accounts.create(req.body)));

  app.get('/accounts', {
    schema: { tags: ['admin'], summary: 'List accounts', response: { 200: z.object({ data: z.array(Account) }), ...errors } },
  }, async () => ({ data: await accounts.list() }));

  /** A list's `account_id` filter, in the id or the slug form (operator.md), as the account's id; unknown: 404. */
  const accountFilter = async (account: string | undefined) => (account === undefined ? {} : { account_id: (await accounts.require(account)).id });

  app.post('/keys', {
    schema: {
      tags: ['admin'],
      summary: 'Issue an API key (the key is shown only in this response)',
      body: z.object({
        account_id: z.string().min(1),
        scope: z.enum(KEY_SCOPES),
        // null as the answers show it: none (an account-wide key).
        project_id: z.string().min(1).nullish(),
        permissions: z.array(z.enum(KEY_PERMISSIONS)).default([]),
      }),
      response: { 201: KeyView.omit({ created_at: true }).extend({ key: z.string() }), ...errors },
    },
  }, async (req, reply) => {
    const account = await accounts.require(req.body.account_id);
    const needsProject = PROJECT_SCOPES.includes(req.body.scope);
    if (needsProject && !req.body.project_id) throw ADMIN.PROJECT_REQUIRED(req.body.scope);
    const projectId = req.body.project_id ? (await project(account.id, req.body.project_id)).id : null;
    const { record, secret: key } = await keys.issue({ account_id: account.id, scope: req.body.scope, project_id: projectId, permissions: [...new Set(req.body.permissions)] });
    const { created_at: _c, ...view } = viewKey(record);
    return reply.code(201).send(Object.assign(view, { key }));
  });

  app.get('/keys', {
    schema: {
      tags: ['admin'],
      summary: 'List API keys (without secrets)',
      querystring: z.object({ account_id: z.string().optional() }),
      response: { 200: z.object({ data: z.array(KeyView) }), ...errors },
    },
  }, async (req) => ({ data: (await keys.list(await accountFilter(req.query.account_id))).map(viewKey) }));

  app.delete('/keys/:id', {
    schema: { tags: ['admin'], summary: 'Revoke an API key at once', params: IdParam, response: { 204: z.null(), ...errors } },
  }, async (req, reply) => {
    if (!(await keys.remove(req.params.id))) throw ADMIN.KEY_NOT_FOUND();
    // Every process's cache drops the key before this answers (tenancy/cache.ts, platform/invalidation.ts).
    await services.tenancy.invalidate({ kind: 'key', id: req.params.id });
    return reply.code(204).send(null);
  });

  app.post('/connectors', {
    schema: {
      tags: ['admin'],
      summary: 'Create a connector (the token is shown only in this response)',
      body: z.object({
        account_id: z.string().min(1),
        project_id: z.string().min(1),
        kind: z.enum(CONNECTOR_KINDS),
        environment: z.enum(ENVIRONMENTS).default('live'),
        // Each optional field may be null, as the answers show it: none.
        variant_id: z.string().min(1).max(128).nullish(),
        host: z.string().regex(HOST, 'host must be a domain name or app namespace, without scheme or path').nullish(),
        telephony_connector_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).nullish(),
        from_number: z.string().min(1).max(32).nullish(),
      }),
      response: { 201: ConnectorView.omit({ created_at: true }).extend({ token: z.string() }), ...errors },
    },
  }, async (req, reply) => {
    const b = req.body;
    if (b.kind === 'messaging' && !b.host) throw ADMIN.HOST_REQUIRED();
    for (const field of ['telephony_connector_id', 'from_number'] as const) if (b.kind !== 'outbound' && b[field] != null) throw ADMIN.OUTBOUND_FIELDS_KIND(field);
    const account = await accounts.require(b.account_id);
    const agent = await project(account.id, b.project_id);
    // As the Chat API refuses a variant_id its project does not have, so does the connector that would send it
    // on every conversation (and a phone number's route, AGENTS_TELEPHONY_VARIANT_UNKNOWN).
    if (b.variant_id != null && !Object.hasOwn((await builder.branches.get(agent, MAIN)).content.variants, b.variant_id)) throw ADMIN.VARIANT_UNKNOWN();
    const outbound = b.kind === 'outbound' ? await outboundFields(account.id, agent.id, b) : {};
    const { record, secret: token } = await connectors.issue({
      kind: b.kind,
      account_id: account.id,
      project_id: agent.id,
      environment: b.environment,
      variant_id: b.variant_id ?? null,
      host: b.host ? b.host.toLowerCase() : null,
      ...outbound,
    });
    const { created_at: _c, ...view } = viewConnector(record);
    return reply.code(201).send(Object.assign(view, { token }));
  });

  app.get('/connectors', {
    schema: {
      tags: ['admin'],
      summary: 'List connectors (without tokens)',
      querystring: z.object({ account_id: z.string().optional() }),
      response: { 200: z.object({ data: z.array(ConnectorView) }), ...errors },
    },
  }, async (req) => ({ data: (await connectors.list(await accountFilter(req.query.account_id))).map(viewConnector) }));

  app.delete('/connectors/:id', {
    schema: { tags: ['admin'], summary: 'Delete a connector; its token stops working at once', params: IdParam, response: { 204: z.null(), ...errors } },
  }, async (req, reply) => {
    if (!(await connectors.remove(req.params.id))) throw ADMIN.CONNECTOR_NOT_FOUND();
    await services.tenancy.invalidate({ kind: 'connector', id: req.params.id });
    return reply.code(204).send(null);
  });

  const ProjectParam = z.object({ project_id: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/) });

  app.get('/projects/:project_id/settings', {
    schema: { tags: ['admin'], summary: 'Read project settings', params: ProjectParam, response: { 200: Settings, ...errors } },
  }, async (req) => {
    await requireProject(services, req.params.project_id);
    return settings.get(req.params.project_id);
  });

  app.patch('/projects/:project_id/settings', {
    schema: {
      tags: ['admin'],
      summary: 'Change project settings',
      params: ProjectParam,
      // `recording_retention_days: null` gives the project back the deployment's `RECORDING_RETENTION_DAYS`.
      body: Settings.partial().extend({ recording_retention_days: z.number().int().min(0).max(36_500).nullable().optional() }).default({}),
      response: { 200: Settings, ...errors },
    },
  }, async (req) => {
    await requireProject(services, req.params.project_id);
    const changed = await settings.patch(req.params.project_id, req.body);
    await services.tenancy.invalidate({ kind: 'settings', id: req.params.project_id });
    return changed;
  });
};

async function requireProject(services: Services, projectId: string): Promise<void> {
  if (!(await services.builder.agents.exists(projectId))) throw ADMIN.PROJECT_NOT_FOUND();
}
