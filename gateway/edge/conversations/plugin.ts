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
import {
  conversationDocuments,
  conversationHours,
  conversationRecords,
  conversationSpans,
  conversationTerms,
  conversationVectorBuckets,
  conversationVectors,
  createEmbedderFromEnv,
  SlotCache,
  type ConversationRecord,
  type Embedder,
} from '../../../actors/conversation/mod.js';
import { CONVERSATIONS, EDGE } from '../../../platform/errors.js';
import type { Services } from '../../../platform/services.js';
import { header, resolvePathProject } from '../auth.js';
import { useErrorShape } from '../errors.js';
import { PathId } from '../schemas.js';
import { concurrency, parseConcurrencyQuery } from './concurrency.js';
import { serveAudio } from './audio.js';
import { audioOf, type AudioInfo } from '../../../actors/recording/mod.js';
import { AudioQueryDoc, AudioResponseDoc, ConcurrencyQueryDoc, ConversationsQueryDoc, ConversationsResponseDoc } from './docs.js';
import { cursorCodec, malformedCursor, type Position } from './cursor.js';
import type { RawQuery } from './params.js';
import { filterKey, parseListQuery, VERSIONS, type Version } from './query.js';
import { keysetRows, randomRows, type ReadSources, type Row, type Rows } from './reader.js';
import { maskedObject, requestMasking } from './mask.js';
import { semanticRows } from './semantic.js';
import { conversationV1, maskedJson, rowJson, V1_DESCRIPTIONS, type ViewOptions } from './views.js';

export interface ConversationsOptions {
  services: Services;
  /** Keys the cursor MAC; the same on every edge of a deployment. */
  cursorSecret: string;
  /** Embeds semantic queries; must be the embedder the workers index with (default: from the environment). */
  embedder?: Embedder;
  /** Memory for each kind of slot kept decoded between reads (`SLOT_CACHE_MB`); 0 or absent: none kept. */
  slotCacheBytes?: number;
}

const ErrorBody = z.object({ error_message: z.string() });
const errors = { 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 501: ErrorBody };
/**
 * The path as it comes: an account, project or conversation id that no one could have been given is not found
 * (404) once the key is checked (401 first, as for any id), as the contract's tables have it for this family;
 * a malformed id (422) is the Agents API's answer, not this family's.
 */
const Params = z.object({ version: z.string(), account_id: z.string(), project_id: z.string() });
const Query = z.record(z.string(), z.union([z.string(), z.array(z.string())]));

export const conversationsPlugin: FastifyPluginAsync<ConversationsOptions> = async (root, opts) => {
  const app = root.withTypeProvider<ZodTypeProvider>();
  useErrorShape(app, 'error_message');
  const { services } = opts;
  const hours = conversationHours(services.store);
  const src: ReadSources = {
    records: conversationRecords(services.store),
    documents: conversationDocuments(services.store),
    vectors: conversationVectors(services.store),
    terms: conversationTerms(services.store),
    hours,
    vectorSlots: new SlotCache(hours, conversationVectorBuckets(services.store), 'vectors', opts.slotCacheBytes ?? 0),
    spanSlots: new SlotCache(hours, conversationSpans(services.store), 'spans', opts.slotCacheBytes ?? 0),
    embedder: opts.embedder ?? createEmbedderFromEnv(),
  };
  const cursors = cursorCodec(opts.cursorSecret);

  /** The key, account and project of a request: 401, then 404, then 403. */
  const authorize = async (req: FastifyRequest, params: z.infer<typeof Params>, needsData: boolean) => {
    const presented = header(req, 'x-api-key');
    if (!presented) throw EDGE.API_KEY_MISSING();
    const key = await services.keys.verify(presented);
    if (!key) throw EDGE.API_KEY_INVALID();
    const { account, project } = await resolvePathProject(services, key.id, params.account_id, params.project_id);
    if (key.scope !== 'conversations') throw EDGE.API_KEY_SCOPE(key.scope);
    if (key.account_id !== account.id || key.project_id !== project.id) throw CONVERSATIONS.KEY_OTHER_PROJECT();
    if (needsData && !key.permissions.includes('conversations_data')) throw CONVERSATIONS.KEY_NO_DATA_PERMISSION();
    req.tenant = key;
    return { account, project, key };
  };

  app.get('/:version/:account_id/:project_id/conversations', {
    // Every answer is sent as JSON text (streamed with chunked streaming), never serialized: documented only.
    config: { openapiQuery: ConversationsQueryDoc, openapiResponses: { 200: ConversationsResponseDoc } },
    schema: {
      tags: ['conversations'],
      summary: 'Conversation records of a project (v1, v2, v3), filtered, paginated, searchable (v3)',
      params: Params,
      querystring: Query,
      response: { 200: z.any(), ...errors },
    },
  }, async (req, reply) => {
    const version = req.params.version as Version;
    if (!(VERSIONS as readonly string[]).includes(version)) throw CONVERSATIONS.VERSION_NOT_FOUND(req.params.version.slice(0, 16));
    const { project, key } = await authorize(req, req.params, true);
    const q = parseListQuery(version, req.query as RawQuery);
    const settings = await services.settings.get(project.id);
    // A search by what was said would tell what the hidden transcripts hold (contract 4.3, rule 7).
    if (!settings.show_transcripts && (q.mode === 'transcript' || q.mode === 'semantic')) throw CONVERSATIONS.TRANSCRIPTS_HIDDEN();
    const filters = filterKey(project.id, q);
    const position = q.cursor !== null ? cursors.decode(filters, q.cursor) : null;
    if (position && (position.kind === 'rank') !== (q.mode === 'semantic')) throw malformedCursor();
    // Ended conversations are served from their stored v3 rendering where it is the answer: v2/v3, no latency.
    const documents = version !== 'v1' && !q.includeLatency;
    // With the project's pii_redaction on, a key without the pii permission reads transcripts with personal
    // data masked, and its searches match what it reads (mask.ts): the rows and the search share the marks.
    const masking = settings.pii_redaction && !key.permissions.includes('pii') ? requestMasking(services.store) : null;
    const rows: Rows =
      q.mode === 'semantic' ? await semanticRows(src, project.id, q, position, documents, masking)
      : q.mode === 'random' ? await randomRows(src, project.id, q, documents)
      : keysetRows(src, project.id, q, position, documents, masking);
    const view: ViewOptions = { version, showTranscripts: settings.show_transcripts, includeLatency: q.includeLatency };
    const tail = () => {
      const next = rows.next();
      if (version === 'v1') return { next_offset: next.nextOffset };
      const cursor = next.position ? cursors.encode(filters, next.position as Position) : null;
      // Contract 2.5: next_offset whenever more results exist, a cursor's page included (random samples have no pages).
      return next.more && q.mode !== 'random' ? { next_offset: next.nextOffset, cursor } : { cursor };
    };
    // Rows are rendered a batch at a time: a batch's marks and its call rows' audio are one query each.
    const marksOf = async (batch: Row[]) => (masking ? masking.marks(batch.map((r) => r.id)) : NO_MARKS);
    if (version === 'v1') {
      const conversations: unknown[] = [];
      for await (const batch of inBatches(rows.rows, RENDER_BATCH)) {
        const marks = await marksOf(batch);
        for (const r of batch) {
          const row = conversationV1(r as ConversationRecord, view);
          // Masked as rendered (null where v1 has no text is no string: left as it is, as in its JSON).
          if (masking) maskedObject(row, marks.get(r.id) ?? []);
          conversations.push(row);
        }
      }
      return reply.type('application/json').send(JSON.stringify({ conversations, descriptions: { conversations: V1_DESCRIPTIONS }, ...tail() }));
    }
    const render = async (batch: Row[]): Promise<Buffer[][]> => {
      const marks = await marksOf(batch);
      const rendered = batch.map((r) => (masking ? maskedJson(r, view, marks.get(r.id) ?? [], masking) : rowJson(r, view)));
      if (version !== 'v3') return rendered;
      // v3 rows say whether the call has audio (and, once rendered, what its redacted rendering muted).
      const audio = await audioOf(services.store, project.id, batch.filter((r) => r.channel === 'VOICE-SIP').map((r) => r.id));
      return rendered.map((json, i) => withAudio(json, audio.get(batch[i].id) ?? NO_AUDIO));
    };
    const body = jsonBody(inBatches(rows.rows, RENDER_BATCH), render, tail);
    if (settings.chunked_streaming) return reply.type('application/json').send(Readable.from(body, { objectMode: false }));
    const chunks: Buffer[] = [];
    for await (const chunk of body) chunks.push(chunk);
    return reply.type('application/json').send(Buffer.concat(chunks));
  });

  app.get('/:version/:account_id/:project_id/conversations/:conversation_id/audio', {
    config: { openapiQuery: AudioQueryDoc, openapiResponses: { 200: AudioResponseDoc, 206: AudioResponseDoc }, openapiResponseMedia: 'audio/wav' },
    schema: {
      tags: ['conversations'],
      summary: 'A call\'s recording as WAV (direction combined, user or agent; redacted; Range)',
      params: Params.extend({ conversation_id: z.string() }),
      querystring: Query,
      response: { 200: z.any(), 206: z.any(), ...errors, 416: ErrorBody },
    },
  }, async (req, reply) => {
    if (req.params.version !== 'v3') throw CONVERSATIONS.VERSION_NOT_FOUND(req.params.version.slice(0, 16));
    // A recording is conversation data (contract 5, rule 5): the key needs `conversations_data`; `pii` then
    // decides whether it may hear the raw rendering.
    const { account, project, key } = await authorize(req, req.params, true);
    if (!PathId.safeParse(req.params.conversation_id).success) throw CONVERSATIONS.CONVERSATION_NOT_FOUND(req.params.conversation_id.slice(0, 128));
    return serveAudio(services, req, reply, req.params.conversation_id, { account, project, permissions: key.permissions });
  });

  app.get('/:version/:account_id/:project_id/conversations/concurrency', {
    config: { openapiQuery: ConcurrencyQueryDoc },
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
        // Contract 7.3 lists it for this route.
        500: ErrorBody,
      },
    },
  }, async (req) => {
    if (req.params.version !== 'v1') throw CONVERSATIONS.CONCURRENCY_VERSION_NOT_FOUND(req.params.version.slice(0, 16));
    const { account, project } = await authorize(req, req.params, false);
    const q = parseConcurrencyQuery(req.query as RawQuery);
    return { account_id: account.id, project_id: project.id, intervals: await concurrency(src.spanSlots, project.id, q) };
  });
};

const NO_AUDIO: AudioInfo = { available: false };
const NO_MARKS = new Map<string, string[]>();
/** Rows rendered together: their marks and audio read in one query each (a page's windows are read whole anyway). */
const RENDER_BATCH = 256;

/** The items of `items` in arrays of up to `size`, each yielded once full (the last once the items end). */
async function* inBatches<T>(items: AsyncIterable<T>, size: number): AsyncGenerator<T[]> {
  let batch: T[] = [];
  for await (const item of items) {
    batch.push(item);
    if (batch.length === size) {
      yield batch;
      batch = [];
    }
  }
  if (batch.length > 0) yield batch;
}

/** A row's JSON chunks with `"audio": {...}` added as its last field (the row is an object: it ends in `}`). */
function withAudio(parts: Buffer[], audio: AudioInfo): Buffer[] {
  const last = parts[parts.length - 1];
  return [...parts.slice(0, -1), last.subarray(0, last.length - 1), Buffer.from(`,"audio":${JSON.stringify(audio)}}`)];
}

const OPEN = Buffer.from('{"conversations":[');
const COMMA = Buffer.from(',');

/**
 * `{"conversations": [...], <tail>}` as byte chunks, each batch of rows as soon as it is read and rendered (what
 * chunked streaming sends); the tail (next_offset, cursor) is known once the rows are.
 */
async function* jsonBody(batches: AsyncIterable<Row[]>, render: (rows: Row[]) => Promise<Buffer[][]>, tail: () => object): AsyncGenerator<Buffer> {
  yield OPEN;
  let first = true;
  for await (const batch of batches) {
    for (const parts of await render(batch)) {
      if (!first) yield COMMA;
      yield* parts;
      first = false;
    }
  }
  const rest = JSON.stringify(tail());
  yield Buffer.from(rest === '{}' ? ']}' : `],${rest.slice(1)}`);
}
