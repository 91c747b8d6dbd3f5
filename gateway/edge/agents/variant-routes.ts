import { z } from 'zod';
import { own } from '../../../platform/own.js';
import { AGENTS } from '../../../platform/errors.js';
import { newId } from '../../../platform/secrets.js';
import type { Attribute, Content, Variant } from '../../../builder/mod.js';
import { BranchRef, fieldErrorResponses, PathId } from '../schemas.js';
import { assertFreeName } from './branch-routes.js';
import { callerOf, type RouteGroup } from './context.js';
import { AttributeView, VariantView, attributeView, byName, variantView } from './views.js';

const BranchParams = z.object({ agentId: PathId, branch: BranchRef });
const Name = z.string().min(1, 'name must be between 1 and 128 characters').max(128, 'name must be between 1 and 128 characters');

/**
 * Attributes (variant dimensions) and variants (a value per attribute), on a branch. They are deployed with
 * the artifact, so a conversation can run a variant and report its id and name.
 */
export const variantRoutes: RouteGroup = (app, { builder }) => {
  const { agents, branches } = builder;

  app.post('/agents/:agentId/branches/:branch/attributes', {
    schema: { tags: ['agents'], summary: 'Create an attribute', params: BranchParams, body: z.object({ name: Name }), response: { 201: AttributeView, ...fieldErrorResponses } },
  }, async (req, reply) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { result } = await branches.edit(agent, req.params.branch, (c) => {
      assertFreeName(c.attributes, req.body.name);
      const attribute: Attribute = { id: newId('attr'), name: req.body.name };
      c.attributes[attribute.id] = attribute;
      return attribute;
    });
    return reply.code(201).send(attributeView(result));
  });

  app.get('/agents/:agentId/branches/:branch/attributes', {
    schema: { tags: ['agents'], summary: 'List attributes', params: BranchParams, response: { 200: z.object({ attributes: z.array(AttributeView) }), ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { attributes: byName((await branches.get(agent, req.params.branch)).content.attributes).map(attributeView) };
  });

  app.get('/agents/:agentId/branches/:branch/attributes/:attributeId', {
    schema: { tags: ['agents'], summary: 'Read an attribute', params: BranchParams.extend({ attributeId: PathId }), response: { 200: AttributeView, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const attribute = own((await branches.get(agent, req.params.branch)).content.attributes, req.params.attributeId);
    if (!attribute) throw AGENTS.ATTRIBUTE_NOT_FOUND();
    return attributeView(attribute);
  });

  app.post('/agents/:agentId/branches/:branch/variants', {
    schema: {
      tags: ['agents'],
      summary: 'Create a variant',
      params: BranchParams,
      body: z.object({
        name: Name,
        isDefault: z.boolean().default(false),
        attributeValues: z.object({ values: z.record(z.string(), z.string().max(4096)).default({}) }).default({ values: {} }),
      }),
      response: { 201: VariantView, ...fieldErrorResponses },
    },
  }, async (req, reply) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const { result } = await branches.edit(agent, req.params.branch, (c) => {
      assertFreeName(c.variants, req.body.name);
      const variant: Variant = {
        id: newId('var'),
        name: req.body.name,
        isDefault: req.body.isDefault || Object.keys(c.variants).length === 0,
        attributeValues: { values: resolveAttributeValues(c, req.body.attributeValues.values) },
      };
      if (variant.isDefault) for (const v of Object.values(c.variants)) v.isDefault = false;
      c.variants[variant.id] = variant;
      return variant;
    });
    return reply.code(201).send(variantView(result));
  });

  app.get('/agents/:agentId/branches/:branch/variants', {
    schema: { tags: ['agents'], summary: 'List variants', params: BranchParams, response: { 200: z.object({ variants: z.array(VariantView) }), ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    return { variants: byName((await branches.get(agent, req.params.branch)).content.variants).map(variantView) };
  });

  app.get('/agents/:agentId/branches/:branch/variants/:variantId', {
    schema: { tags: ['agents'], summary: 'Read a variant', params: BranchParams.extend({ variantId: PathId }), response: { 200: VariantView, ...fieldErrorResponses } },
  }, async (req) => {
    const agent = await agents.access(callerOf(req), req.params.agentId);
    const variant = own((await branches.get(agent, req.params.branch)).content.variants, req.params.variantId);
    if (!variant) throw AGENTS.VARIANT_NOT_FOUND();
    return variantView(variant);
  });
};

/** Attribute values may name an attribute by id or by name; they are stored by id. */
function resolveAttributeValues(content: Content, values: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(values)) {
    const attribute = own(content.attributes, key) ?? Object.values(content.attributes).find((a) => a.name === key);
    if (!attribute) throw AGENTS.ATTRIBUTE_UNKNOWN(key);
    out[attribute.id] = value;
  }
  return out;
}
