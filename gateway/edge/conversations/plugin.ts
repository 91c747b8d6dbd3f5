/**
 * The Conversations API (contract 4.3) and the Concurrent Calls API (4.4) under
 * `/{version}/{account_id}/{project_id}/conversations[/concurrency]`, read straight from the store.
 * Errors are `{error_message}` like the family's concurrency endpoint: 400 bad parameters (a malformed
 * cursor included), 401 no or an unknown key, 403 a key of another scope, account or project, or (list)
 * without the `conversations_data` permission, 404 unknown version, account or project, 501 reserved
 * `slice_by` values.
 */
import { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { conversationRecords, type ConversationRecord } from '../../../actors/conversation/record.js';
import { conversationHours, conversationSpans, conversationTerms, conversationVectorBuckets, conversationVectors } from '../../../actors/conversation/search.js';
import { createEmbedderFromEnv, type Embedder } from '../../../actors/conversation/embedding.js';
import { forbidden, notFound, unauthorized } from '../../../platform/errors.js';
import type { Services } from '../../../platform/services.js';
import { header, resolvePathProject } from '../auth.js';
import { useErrorShape } from '../errors.js';
import { PathId } from '../schemas.js';
import { concurrency, parseConcurrencyQuery } from './concurrency.js';
import { cursorCodec, malformedCursor, type Position } from './cursor.js';
import type { RawQuery } from './params.js';
import { filterKey, parseListQuery, VERSIONS, type Version } from './query.js';
import { keysetRows, randomRows, semanticRows, type ReadSources, type Rows } from './reader.js';
import { conversationV1, conversationV3, V1_DESCRIPTIONS, type ViewOptions } from './views.js';

export interface ConversationsOptions {
  services: Services;
  /** Keys the cursor MAC; the same on every edge of a deployment. */
  cursorSecret: string;
  /** Embeds semantic queries; must be the embedder the workers index with (default: from the environment). */
  embedder?: Embedder;
}

const ErrorBody = z.object({ error_message: z.string() });
const errors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 501: ErrorBody };
const Params = z.object({ version: z.string().max(16), account_id: PathId, project_id: PathId });
const Query = z.record(z.string(), z.union([z.string(), z.array(z.string())]));

export const conversationsPlugin: FastifyPluginAsync<ConversationsOptions> = async (root, opts) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'error_message');
  const { services } = opts;
  const src: ReadSources = {
    records: conversationRecords(services.store),
    vectors: conversationVectors(services.store),
    terms: conversationTerms(services.store),
    hours: conversationHours(services.store),
    spans: conversationSpans(services.store),
    vectorBuckets: conversationVectorBuckets(services.store),
    embedder: opts.embedder ?? createEmbedderFromEnv(),
  };
  const cursors = cursorCodec(opts.cursorSecret);

  /** The key, account and project of a request: 401, then 404, then 403. */
  const authorize = async (req: FastifyRequest, params: z.infer<typeof Params>, needsData: boolean) => {
    const presented = header(req, 'x-api-key');
    if (!presented) throw unauthorized('missing x-api-key header');
    const key = await services.keys.verify(presented);
    if (!key) throw unauthorized('invalid API key');
    const { account, project } = await resolvePathProject(services, key.id, params.account_id, params.project_id);
    if (key.scope !== 'conversations') throw forbidden(`this key is for the ${key.scope} API`);
    if (key.account_id !== account.id || key.project_id !== project.id) throw forbidden('this key is not valid for this project');
    if (needsData && !key.permissions.includes('conversations_data')) throw forbidden('this key lacks the conversations_data permission');
    return { account, project };
  };

  app.get('/:version/:account_id/:project_id/conversations', {
    schema: {
      tags: ['conversations'],
      summary: 'Conversation records of a project (v1, v2, v3), filtered, paginated, searchable (v3)',
      params: Params,
      querystring: Query,
      response: { 200: z.any(), ...errors },
    },
  }, async (req, reply) => {
    const version = req.params.version as Version;
    if (!(VERSIONS as readonly string[]).includes(version)) throw notFound(`Conversations API version ${req.params.version}`);
    const { project } = await authorize(req, req.params, true);
    const q = parseListQuery(version, req.query as RawQuery);
    const settings = await services.settings.get(project.id);
    const filters = filterKey(project.id, q);
    const position = q.cursor !== null ? cursors.decode(filters, q.cursor) : null;
    if (position && (position.kind === 'rank') !== (q.mode === 'semantic')) throw malformedCursor();
    const rows: Rows =
      q.mode === 'semantic' ? await semanticRows(src, project.id, q, position)
      : q.mode === 'random' ? await randomRows(src, project.id, q)
      : keysetRows(src, project.id, q, position);
    const view: ViewOptions = { version, showTranscripts: settings.show_transcripts, includeLatency: q.includeLatency };
    const render = version === 'v1' ? conversationV1 : conversationV3;
    const tail = () => {
      const next = rows.next();
      if (version === 'v1') return { next_offset: next.nextOffset };
      return {
        ...(next.more && q.cursor === null && q.mode !== 'random' ? { next_offset: next.nextOffset } : {}),
        cursor: next.position ? cursors.encode(filters, next.position as Position) : null,
      };
    };
    if (version !== 'v1' && settings.chunked_streaming) return stream(reply, rows, (r) => render(r, view), tail);
    const conversations: unknown[] = [];
    for await (const r of rows.rows) conversations.push(render(r, view));
    const body = version === 'v1'
      ? { conversations, descriptions: { conversations: V1_DESCRIPTIONS }, ...tail() }
      : { conversations, ...tail() };
    return reply.type('application/json').send(JSON.stringify(body));
  });

  app.get('/:version/:account_id/:project_id/conversations/concurrency', {
    schema: {
      tags: ['concurrency'],
      summary: 'Peak concurrent conversations per 5-minute interval',
      params: Params,
      querystring: Query,
      response: {
        200: z.object({
          account_id: z.string(),
          project_id: z.string(),
          intervals: z.array(z.object({
            time: z.string(),
            max_concurrent_conversations: z.number().int(),
            variant_id: z.string().optional(),
            variant_name: z.string().optional(),
          })),
        }),
        ...errors,
      },
    },
  }, async (req) => {
    if (req.params.version !== 'v1') throw notFound(`Concurrent Calls API version ${req.params.version}`);
    const { account, project } = await authorize(req, req.params, false);
    const q = parseConcurrencyQuery(req.query as RawQuery);
    return { account_id: account.id, project_id: project.id, intervals: await concurrency(src.spans, project.id, q) };
  });
};

/**
 * Sends `{"conversations": [...], <tail>}` with chunked transfer encoding, each row as soon as it is
 * read; the tail (next_offset, cursor) is known once the rows are.
 */
function stream(reply: FastifyReply, rows: Rows, render: (r: ConversationRecord) => unknown, tail: () => object): FastifyReply {
  async function* body(): AsyncGenerator<string> {
    yield '{"conversations":[';
    let first = true;
    for await (const r of rows.rows) {
      yield (first ? '' : ',') + JSON.stringify(render(r));
      first = false;
    }
    const rest = JSON.stringify(tail());
    yield rest === '{}' ? ']}' : `],${rest.slice(1)}`;
  }
  return reply.type('application/json').send(Readable.from(body(), { objectMode: false }));
}

