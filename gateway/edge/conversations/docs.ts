/**
 * Documentation-only schemas of the Conversations API (contract 4.3, 2.5) and the Concurrent Calls API
 * (4.4, 2.6) for the OpenAPI document. Requests are checked by `query.ts` and `concurrency.ts` (each problem
 * a 400 naming the parameter), so these describe the parameters without validating them.
 */
import { z } from 'zod';
import { ENVIRONMENTS } from './query.js';

const isoTime = (what: string) => z.string().describe(`${what}, ISO 8601 date-time`);
const flag = (what: string) => z.enum(['true', 'false']).describe(what);

/** The query of `GET /{version}/{account_id}/{project_id}/conversations`. */
export const ConversationsQueryDoc = z.object({
  start_time: isoTime('Inclusive lower bound of started_at; required with query_type or sample').optional(),
  end_time: isoTime('Exclusive upper bound of started_at; required with query_type or sample').optional(),
  query_type: z.enum(['transcript', 'semantic']).describe('v3 only: full-text transcript search or semantic (vector) search; needs query').optional(),
  sample: z.enum(['random']).describe('v3 only: a random subset of the time range; not with query_type').optional(),
  query: z.string().max(1000).describe('Search text; required with query_type').optional(),
  turn_type: z.enum(['user', 'agent']).describe('Transcript search only: search user or agent turns (default both)').optional(),
  channel: z.array(z.string().max(64)).max(32).describe('Channels to keep (repeatable, or comma-separated), e.g. WEBCHAT, CHAT, VOICE-SIP').optional(),
  client_env: z.enum(ENVIRONMENTS).default('live').describe('Environment').optional(),
  variant_id: z.string().max(128).describe('Only this variant (not with variant_name)').optional(),
  variant_name: z.string().max(256).describe('Only this variant, by name (not with variant_id)').optional(),
  in_progress: flag('true: in-progress conversations only; false: finished ones only; omitted: all').optional(),
  limit: z.number().int().min(1).max(5000).describe('Page size: v1 1 to 5000 (default 5); v2 and v3 1 to 1000 (default 1000)').optional(),
  offset: z.number().int().min(0).default(0).describe('Legacy offset pagination: the next_offset of the previous page').optional(),
  cursor: z.string().max(2048).describe('v2 and v3: the cursor of the previous page, with the other parameters unchanged; wins over offset').optional(),
  include_latency: flag('v2 and v3: add latency to each turn (default false)').optional(),
  include_context_state: flag('Accepted for compatibility; does not change the response').optional(),
  include_turn_metadata: flag('Accepted for compatibility; does not change the response').optional(),
});

const Turn = z.object({
  user_input: z.string(),
  user_input_dtmf: z.string(),
  user_input_datetime: z.string(),
  barge_in: z.boolean(),
  agent_response: z.string(),
  agent_response_datetime: z.string(),
  latency: z.number().optional().describe('Only with include_latency=true'),
  translated_user_input: z.string(),
  english_agent_response: z.string(),
  intents: z.array(z.string()),
  entities: z.record(z.string(), z.unknown()),
  is_ood: z.boolean(),
  is_silence: z.boolean(),
});

const Conversation = z.object({
  id: z.string(),
  account_id: z.string(),
  project_id: z.string(),
  variant_id: z.string(),
  variant_name: z.string(),
  environment: z.string(),
  started_at: z.string().describe('ISO 8601'),
  channel: z.string(),
  from_number: z.string(),
  to_number: z.string(),
  in_progress: z.boolean(),
  num_turns: z.number().int(),
  total_duration: z.number(),
  polyai_duration: z.number(),
  handoff: z.boolean(),
  handoff_reason: z.string(),
  handoff_destination: z.string(),
  num_silences: z.number().int(),
  num_ood: z.number().int(),
  metrics: z.record(z.string(), z.unknown()),
  state: z.record(z.string(), z.unknown()),
  turns: z.array(Turn).describe('Empty when the project hides transcripts (show_transcripts false)'),
  audio: z.object({
    available: z.boolean().describe('Whether the audio endpoint serves a recording of this conversation'),
    redactions: z.array(z.object({
      start_ms: z.number(),
      end_ms: z.number(),
      kind: z.enum(['card_number', 'phone_number', 'email', 'date_of_birth', 'marked']),
      source: z.enum(['speech', 'dtmf', 'agent']).describe('speech: the caller\'s words; dtmf: the caller\'s keys; agent: an answer the agent spoke'),
    })).optional().describe('What the redacted rendering muted; absent until it is rendered (docs/recordings.md)'),
  }).optional().describe('v3 only'),
});

/** 200 of the list: v2 and v3 (`cursor`, `next_offset` while more exist), or v1 (`descriptions`, nullable fields). */
export const ConversationsResponseDoc = z.union([
  z.object({
    conversations: z.array(Conversation),
    next_offset: z.number().int().optional().describe('Present only when more results exist (not with sample), a cursor page included'),
    cursor: z.string().nullable().describe('Pass on the next request; null at the end'),
  }).describe('v2 and v3'),
  z.object({
    conversations: z.array(z.record(z.string(), z.unknown())).describe('The v3 fields, with empty values as null'),
    descriptions: z.object({ conversations: z.record(z.string(), z.string()) }),
    next_offset: z.number().int().nullable(),
  }).describe('v1'),
]);

/** The query of `GET /v1/{account_id}/{project_id}/conversations/concurrency`. */
export const ConcurrencyQueryDoc = z.object({
  start_time: isoTime('Start, rounded down to a 5-minute mark'),
  end_time: isoTime('End, rounded up to a 5-minute mark; at most one week after start_time'),
  client_env: z.enum(ENVIRONMENTS).default('live').describe('Environment').optional(),
  variant_id: z.string().max(128).describe('Only this variant (not with variant_name)').optional(),
  variant_name: z.string().max(256).describe('Only this variant, by name (not with variant_id)').optional(),
  language: z.string().max(35).describe('Language code filter').optional(),
  phone_number: z.string().max(64).describe('Phone number filter').optional(),
  slice_by: z.enum(['variant', 'language', 'phone_number']).describe('variant: one series per variant; language and phone_number are reserved (501)').optional(),
});

/** The audio endpoint's query (documentation; `audio.ts` reads the raw query). */
export const AudioQueryDoc = z.object({
  direction: z.enum(['combined', 'user', 'agent']).default('combined').describe('combined: both parties mixed; user: the caller only; agent: the agent only').optional(),
  redacted: z.boolean().default(false).describe('true: personal data muted. A key without the pii permission always gets the redacted audio').optional(),
});

/** The audio endpoint's body: a WAV file (8 kHz, 16-bit, mono PCM), whole (200) or the asked range (206). */
export const AudioResponseDoc = z.string().describe('A WAV file (RIFF/WAVE, PCM 8 kHz 16-bit mono); a Range request gets 206 with Content-Range');
