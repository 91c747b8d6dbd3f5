import { z } from 'zod';
import { MAIN, SIP_TRANSPORTS, TRANSFER_MODES, viewPhoneNumber, viewTelephonyConnector } from '../../../builder/mod.js';
import { AGENTS } from '../../../platform/errors.js';
import { toE164 } from '../../../platform/phone-numbers.js';
import { fieldErrorResponses, PathId } from '../schemas.js';
import { callerOf, type RouteGroup } from './context.js';

const HOST = /^[A-Za-z0-9](?:[A-Za-z0-9.:-]{0,251}[A-Za-z0-9])?$/;
/**
 * A digest username travels inside a SIP header as a quoted string (RFC 3261 25.1, `Authorization:
 * Digest username="…"`): a line break would end the header and start one of the caller's choosing, and a quote or
 * backslash would end or escape the string. None of them belongs in a trunk's user name.
 */
const SIP_USERNAME = /^[^\x00-\x1f\x7f"\\]+$/;
const ConnectorView = z.object({
  id: z.string(),
  name: z.string(),
  host: z.string(),
  port: z.number(),
  transport: z.enum(SIP_TRANSPORTS),
  username: z.string().nullable(),
  has_password: z.boolean(),
  max_concurrent_calls: z.number().nullable(),
  transfer: z.enum(TRANSFER_MODES),
  created_at: z.string(),
});
const NumberView = z.object({ id: z.string(), number: z.string(), connector_id: z.string(), variant_id: z.string().nullable(), created_at: z.string() });
const Name = z.string().min(1).max(128);
const Host = z.string().regex(HOST, 'host must be a host name or IP address, without scheme or port');
const Port = z.number().int().min(1).max(65535);
const Username = z.string().min(1).max(256).regex(SIP_USERNAME, 'username must hold no control characters (line breaks included), quotes or backslashes: it is sent in a SIP header');
const Password = z.string().min(1).max(256);
const MaxCalls = z.number().int().min(1).max(100_000);
const VariantId = z.string().min(1).max(128);
const AgentParams = z.object({ agentId: PathId });
const ConnectorParams = z.object({ agentId: PathId, connectorId: PathId });
const NumberParams = z.object({ agentId: PathId, phoneNumberId: PathId });

/**
 * Telephony resources (contract 2.1, not branch-scoped): SIP trunks (connectors) and the E.164 numbers bound
 * to them. A connector's password is accepted at create and never returned (reads show `has_password`).
 * Deleting a connector that numbers are bound to is refused with 409: delete the numbers first. Both can be
 * changed (PATCH) in place: a trunk's address, credentials, limit or transfer mode, a number's trunk or variant.
 */
export const telephonyRoutes: RouteGroup = (app, { builder }) => {
  const { agents, telephony, branches } = builder;
  const scopeOf = async (req: { params: { agentId: string } } & Parameters<typeof callerOf>[0]) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { agent, scope: { account_id: agent.account_id, agent_id: agent.id } };
  };

  /** A variant a number may start its calls in: one the main branch defines. */
  const variantOf = async (agent: Awaited<ReturnType<typeof scopeOf>>['agent'], variantId: string) => {
    const main = await branches.get(agent, MAIN);
    if (!Object.hasOwn(main.content.variants, variantId)) throw AGENTS.TELEPHONY_VARIANT_UNKNOWN();
  };

  app.post('/agents/:agentId/telephony/connectors', {
    schema: {
      tags: ['agents'],
      summary: 'Add a SIP trunk (its password is never shown again)',
      params: AgentParams,
      body: z.object({
        name: Name,
        host: Host,
        port: Port,
        transport: z.enum(SIP_TRANSPORTS),
        username: Username.optional(),
        password: Password.optional(),
        max_concurrent_calls: MaxCalls.optional(),
        transfer: z.enum(TRANSFER_MODES).optional(),
      }).strict(),
      response: { 201: ConnectorView, ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const { scope } = await scopeOf(req);
    return reply.code(201).send(viewTelephonyConnector(await telephony.createConnector(scope, req.body)));
  });

  app.get('/agents/:agentId/telephony/connectors', {
    schema: { tags: ['agents'], summary: 'List SIP trunks', params: AgentParams, response: { 200: z.object({ connectors: z.array(ConnectorView) }), ...fieldErrorResponses } },
  }, async (req) => {
    const { scope } = await scopeOf(req);
    return { connectors: (await telephony.listConnectors(scope)).map(viewTelephonyConnector) };
  });

  app.get('/agents/:agentId/telephony/connectors/:connectorId', {
    schema: { tags: ['agents'], summary: 'Read a SIP trunk', params: ConnectorParams, response: { 200: ConnectorView, ...fieldErrorResponses } },
  }, async (req) => {
    const { scope } = await scopeOf(req);
    return viewTelephonyConnector(await telephony.getConnector(scope, req.params.connectorId));
  });

  app.patch('/agents/:agentId/telephony/connectors/:connectorId', {
    schema: {
      tags: ['agents'],
      summary: 'Change a SIP trunk: the fields given replace the stored ones, null clears an optional one (the next call uses it)',
      params: ConnectorParams,
      body: z.object({
        name: Name.optional(),
        host: Host.optional(),
        port: Port.optional(),
        transport: z.enum(SIP_TRANSPORTS).optional(),
        username: Username.nullable().optional(),
        password: Password.nullable().optional(),
        max_concurrent_calls: MaxCalls.nullable().optional(),
        transfer: z.enum(TRANSFER_MODES).optional(),
      }).strict(),
      response: { 200: ConnectorView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const { scope } = await scopeOf(req);
    return viewTelephonyConnector(await telephony.updateConnector(scope, req.params.connectorId, req.body));
  });

  app.delete('/agents/:agentId/telephony/connectors/:connectorId', {
    schema: { tags: ['agents'], summary: 'Delete a SIP trunk (409 while numbers are bound to it)', params: ConnectorParams, response: { 204: z.null(), ...fieldErrorResponses } },
  }, async (req, reply) => {
    const { scope } = await scopeOf(req);
    await telephony.deleteConnector(scope, req.params.connectorId);
    return reply.code(204).send(null);
  });

  app.post('/agents/:agentId/telephony/phone-numbers', {
    schema: {
      tags: ['agents'],
      summary: 'Bind an E.164 number to a SIP trunk of this agent (a number is bound once platform-wide)',
      params: AgentParams,
      body: z.object({
        number: z.string().min(1).max(64),
        connector_id: z.string().min(1).max(128),
        variant_id: VariantId.optional(),
      }).strict(),
      response: { 201: NumberView, ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const { agent, scope } = await scopeOf(req);
    // E.164 only (contract 2.1): a leading `+`, and a number valid in its country's plan.
    const number = toE164(req.body.number);
    if (!number || number !== req.body.number.trim()) throw AGENTS.TELEPHONY_NUMBER_INVALID();
    if (req.body.variant_id !== undefined) await variantOf(agent, req.body.variant_id);
    const created = await telephony.createNumber(scope, { number, connector_id: req.body.connector_id, variant_id: req.body.variant_id ?? null });
    return reply.code(201).send(viewPhoneNumber(created));
  });

  app.get('/agents/:agentId/telephony/phone-numbers', {
    schema: { tags: ['agents'], summary: 'List phone numbers', params: AgentParams, response: { 200: z.object({ phoneNumbers: z.array(NumberView) }), ...fieldErrorResponses } },
  }, async (req) => {
    const { scope } = await scopeOf(req);
    return { phoneNumbers: (await telephony.listNumbers(scope)).map(viewPhoneNumber) };
  });

  app.get('/agents/:agentId/telephony/phone-numbers/:phoneNumberId', {
    schema: { tags: ['agents'], summary: 'Read a phone number', params: NumberParams, response: { 200: NumberView, ...fieldErrorResponses } },
  }, async (req) => {
    const { scope } = await scopeOf(req);
    return viewPhoneNumber(await telephony.getNumber(scope, req.params.phoneNumberId));
  });

  app.patch('/agents/:agentId/telephony/phone-numbers/:phoneNumberId', {
    schema: {
      tags: ['agents'],
      summary: 'Bind a phone number to another SIP trunk of this agent, or to another variant (null: none); the next INVITE uses it',
      params: NumberParams,
      body: z.object({ connector_id: z.string().min(1).max(128).optional(), variant_id: VariantId.nullable().optional() }).strict(),
      response: { 200: NumberView, ...fieldErrorResponses },
    },
  }, async (req) => {
    const { agent, scope } = await scopeOf(req);
    if (typeof req.body.variant_id === 'string') await variantOf(agent, req.body.variant_id);
    return viewPhoneNumber(await telephony.updateNumber(scope, req.params.phoneNumberId, req.body));
  });

  app.delete('/agents/:agentId/telephony/phone-numbers/:phoneNumberId', {
    schema: { tags: ['agents'], summary: 'Unbind a phone number', params: NumberParams, response: { 204: z.null(), ...fieldErrorResponses } },
  }, async (req, reply) => {
    const { scope } = await scopeOf(req);
    await telephony.deleteNumber(scope, req.params.phoneNumberId);
    return reply.code(204).send(null);
  });
};
