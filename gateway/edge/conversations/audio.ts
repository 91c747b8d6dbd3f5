/**
 * `GET /v3/{account_id}/{project_id}/conversations/{conversation_id}/audio` (contract 4.3): a call's
 * recording as a WAV file, `direction` combined (default, both parties mixed), `user` or `agent`, and
 * `redacted`. A key without the `pii` permission always gets the redacted rendering; with it, raw audio
 * unless it asks for redaction. Streamed, with single `Range` requests answered 206 (416 outside the file).
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { conversationRecords } from '../../../actors/conversation/mod.js';
import { CONVERSATIONS } from '../../../platform/errors.js';
import type { Services } from '../../../platform/services.js';
import type { BlobStore } from '../../../store/blobs/mod.js';
import { isComplete, markedValues, mix, RECORDING_RATE, recordingPrefix, redactedTracks, renderRedacted, wavHeader, type RecordingMeta, type Redaction } from '../../../actors/recording/mod.js';
import { bool, oneOf, type RawQuery } from './params.js';

export const DIRECTIONS = ['combined', 'user', 'agent'] as const;
const PIECE = 64 * 1024;

export interface AudioRequest {
  account: { id: string };
  project: { id: string };
  permissions: readonly string[];
}

/**
 * The WAV bytes of one rendering of a call: header then PCM. `tracks`: a redacted rendering computed for
 * this answer (an unfinished recording's, never stored); otherwise the stored tracks.
 */
async function wavOf(blobs: BlobStore, prefix: string, direction: (typeof DIRECTIONS)[number], redacted: boolean, tracks?: { caller: Buffer; agent: Buffer }): Promise<Buffer | null> {
  const name = (track: 'caller' | 'agent') => `${prefix}/${redacted ? `redacted-${track}` : track}`;
  const read = (track: 'caller' | 'agent') => (tracks ? Promise.resolve(tracks[track].length ? tracks[track] : null) : blobs.read(name(track)));
  const [caller, agent] = await Promise.all([direction === 'agent' ? null : read('caller'), direction === 'user' ? null : read('agent')]);
  const pcm = direction === 'user' ? caller : direction === 'agent' ? agent : caller || agent ? mix(caller ?? Buffer.alloc(0), agent ?? Buffer.alloc(0)) : null;
  if (!pcm) return null;
  const even = pcm.subarray(0, pcm.length & ~1);
  return Buffer.concat([wavHeader(even.length, RECORDING_RATE), even]);
}

/** `bytes=a-b`, `bytes=a-`, `bytes=-n` over a file of `size` bytes; null: serve it all; 'bad': 416. */
export function parseRange(header: string | undefined, size: number): { start: number; end: number } | null | 'bad' {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  // Several ranges or another unit: the whole file (RFC 9110 lets a server ignore Range).
  if (!m || (m[1] === '' && m[2] === '')) return null;
  if (m[1] === '') {
    const n = Number(m[2]);
    if (n === 0) return 'bad';
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(m[1]);
  // A last position before the first makes the range invalid, which RFC 9110 (14.1.1, and RFC 7233 2.1's
  // "MUST ignore") reads as no Range at all: the whole file, not 416.
  if (m[2] !== '' && Number(m[2]) < start) return null;
  const end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  if (start >= size) return 'bad';
  return { start, end };
}

export async function serveAudio(services: Services, req: FastifyRequest, reply: FastifyReply, conversationId: string, who: AudioRequest) {
  const q = req.query as RawQuery;
  const direction = oneOf(q, 'direction', DIRECTIONS) ?? 'combined';
  const asked = bool(q, 'redacted') ?? false;
  const redacted = asked || !who.permissions.includes('pii');
  const record = await conversationRecords(services.store).get(conversationId);
  if (!record || record.account_id !== who.account.id || record.project_id !== who.project.id) throw CONVERSATIONS.CONVERSATION_NOT_FOUND(conversationId);
  const blobs = services.blobs;
  if (!blobs) throw CONVERSATIONS.AUDIO_NOT_FOUND(conversationId);
  const prefix = recordingPrefix(record.account_id, record.project_id, record.id);
  const metaRaw = await blobs.read(`${prefix}/meta`);
  const meta = metaRaw ? (JSON.parse(metaRaw.toString()) as RecordingMeta) : null;
  if (!meta || meta.expires_at <= Date.now()) throw CONVERSATIONS.AUDIO_NOT_FOUND(conversationId);
  let redactions: Redaction[] | null = null;
  let unkept: { caller: Buffer; agent: Buffer } | undefined;
  if (redacted) {
    const r = await ensureRedacted(blobs, prefix, record, meta, () => markedValues(services.store, record.id));
    redactions = r.spans;
    unkept = r.tracks;
  }
  const wav = await wavOf(blobs, prefix, direction, redacted, unkept);
  if (!wav) throw CONVERSATIONS.AUDIO_NOT_FOUND(conversationId);
  // No validator is sent (the file may be rendered again), so an If-Range never matches: the whole file (RFC 9110, 13.1.5).
  const range = req.headers['if-range'] !== undefined ? null : parseRange(req.headers.range, wav.length);
  if (range === 'bad') {
    reply.header('content-range', `bytes */${wav.length}`);
    throw CONVERSATIONS.RANGE_NOT_SATISFIABLE(wav.length);
  }
  reply.header('accept-ranges', 'bytes').header('content-type', 'audio/wav').header('cache-control', 'private, no-store');
  reply.header('x-audio-redacted', String(redacted));
  if (redactions) reply.header('x-audio-redactions', JSON.stringify(redactions));
  const { start, end } = range ?? { start: 0, end: wav.length - 1 };
  if (range) reply.code(206).header('content-range', `bytes ${start}-${end}/${wav.length}`);
  reply.header('content-length', end - start + 1);
  return reply.send(Readable.from(pieces(wav, start, end + 1)));
}

function* pieces(b: Buffer, from: number, to: number): Generator<Buffer> {
  for (let o = from; o < to; o += PIECE) yield b.subarray(o, Math.min(to, o + PIECE));
}

/**
 * The redacted rendering: the stored one; else, once the conversation has ended, rendered now and stored
 * when the recording is complete (its meta's `ended_at`, written after the last chunks: the same rendering
 * the recordings projector makes), or, while the media gateway is still writing it (a call the agent ended
 * with `conv.end()` ends its conversation before the goodbye is spoken and the call hung up; or a gateway
 * that died mid-call), rendered for this answer only and not kept, so the stored rendering is always of the
 * whole recording.
 */
async function ensureRedacted(
  blobs: BlobStore,
  prefix: string,
  record: { id: string; in_progress: boolean; turns: Array<{ user_input: string; user_input_dtmf: string; is_silence: boolean }> },
  meta: RecordingMeta,
  marked: () => Promise<string[]>,
): Promise<{ spans: Redaction[]; tracks?: { caller: Buffer; agent: Buffer } }> {
  const done = await blobs.read(`${prefix}/redactions`);
  if (done) return { spans: JSON.parse(done.toString()) as Redaction[] };
  if (record.in_progress) throw CONVERSATIONS.AUDIO_NOT_READY(record.id);
  if (!isComplete(meta)) {
    const r = await redactedTracks(blobs, prefix, record.turns, await marked());
    return { spans: r.spans, tracks: { caller: r.caller, agent: r.agent } };
  }
  return { spans: await renderRedacted(blobs, prefix, record.turns, await marked()) };
}
