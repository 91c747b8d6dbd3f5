/** The query of `GET /{version}/{account_id}/{project_id}/conversations` (contract 4.3, addendum). */
import { characters } from '../../../platform/characters.js';
import { CONVERSATIONS } from '../../../platform/errors.js';
import { bool, integer, many, oneOf, single, text, time, type RawQuery } from './params.js';

export const VERSIONS = ['v1', 'v2', 'v3'] as const;
export type Version = (typeof VERSIONS)[number];
export const ENVIRONMENTS = ['sandbox', 'pre-release', 'live'] as const;

export interface ListQuery {
  version: Version;
  /** Inclusive lower bound of `started_at`, ISO (null: none). */
  start: string | null;
  /** Exclusive upper bound of `started_at`, ISO (null: none). */
  end: string | null;
  mode: 'list' | 'transcript' | 'semantic' | 'random';
  query: string;
  turnType: 'user' | 'agent' | null;
  channels: string[];
  environment: string;
  variantId: string | null;
  variantName: string | null;
  inProgress: boolean | null;
  limit: number;
  offset: number;
  cursor: string | null;
  includeLatency: boolean;
}

const MAX_QUERY = 1000;

/** Parses and checks the query string; every problem is a 400 naming the parameter. */
export function parseListQuery(version: Version, q: RawQuery): ListQuery {
  const legacy = version === 'v1';
  const queryType = oneOf(q, 'query_type', ['transcript', 'semantic'] as const);
  const sample = oneOf(q, 'sample', ['random'] as const);
  const cursor = single(q, 'cursor');
  if (legacy) {
    for (const name of ['query_type', 'sample', 'query', 'turn_type', 'cursor'] as const) {
      if (single(q, name) !== undefined) throw CONVERSATIONS.PARAM_NOT_ON_V1(name);
    }
  }
  if (queryType && sample) throw CONVERSATIONS.MODES_EXCLUSIVE();
  if (sample && version !== 'v3') throw CONVERSATIONS.PARAM_V3_ONLY('sample');
  if (queryType && version !== 'v3') throw CONVERSATIONS.PARAM_V3_ONLY('query_type');
  const query = text(q, 'query', MAX_QUERY);
  if (queryType && !query?.trim()) throw CONVERSATIONS.QUERY_REQUIRED();
  if (!queryType && query !== undefined) throw CONVERSATIONS.QUERY_WITHOUT_TYPE();
  const turnType = oneOf(q, 'turn_type', ['user', 'agent'] as const);
  if (turnType && queryType !== 'transcript') throw CONVERSATIONS.TURN_TYPE_NOT_TRANSCRIPT();

  const startMs = time(q, 'start_time');
  const endMs = time(q, 'end_time');
  if ((queryType || sample) && (startMs === undefined || endMs === undefined)) {
    throw CONVERSATIONS.RANGE_REQUIRED(startMs === undefined ? 'start_time' : 'end_time');
  }
  if (startMs !== undefined && endMs !== undefined && endMs <= startMs) throw CONVERSATIONS.RANGE_REVERSED();

  const variantId = text(q, 'variant_id', 128);
  const variantName = text(q, 'variant_name', 256);
  if (variantId && variantName) throw CONVERSATIONS.VARIANT_AMBIGUOUS();
  const channels = many(q, 'channel');
  if (channels.length > 32 || channels.some((c) => characters(c) > 64)) throw CONVERSATIONS.CHANNELS_TOO_MANY();

  const limit = legacy ? (integer(q, 'limit', 1, 5000) ?? 5) : (integer(q, 'limit', 1, 1000) ?? 1000);
  const offset = integer(q, 'offset', 0, 1_000_000_000) ?? 0;
  const includeLatency = bool(q, 'include_latency') ?? false;
  if (legacy && includeLatency) throw CONVERSATIONS.LATENCY_NOT_ON_V1();
  // Rule 6: accepted for compatibility; they do not change this implementation's responses.
  bool(q, 'include_context_state');
  bool(q, 'include_turn_metadata');
  if (cursor !== undefined && (cursor.length === 0 || cursor.length > 2048)) throw CONVERSATIONS.CURSOR_MALFORMED();

  return {
    version,
    start: startMs === undefined ? null : new Date(startMs).toISOString(),
    end: endMs === undefined ? null : new Date(endMs).toISOString(),
    mode: queryType ?? sample ?? 'list',
    query: query?.trim() ?? '',
    turnType: turnType ?? null,
    // Channel labels are stored upper-case (`WEBCHAT`, `VOICE-SIP`); a client may name one as it created it
    // (`channel: "webchat"` on the Chat API).
    channels: [...new Set(channels.map((c) => c.toUpperCase()))].sort(),
    environment: oneOf(q, 'client_env', ENVIRONMENTS) ?? 'live',
    variantId: variantId ?? null,
    variantName: variantName ?? null,
    inProgress: bool(q, 'in_progress') ?? null,
    limit,
    offset,
    cursor: cursor ?? null,
    includeLatency,
  };
}

/** What a cursor is bound to: every parameter that decides which rows come back, in a fixed order. */
export function filterKey(projectId: string, q: ListQuery): string {
  return JSON.stringify([
    projectId, q.version === 'v1' ? 'v1' : 'v23', q.start, q.end, q.mode, q.query, q.turnType, q.channels,
    q.environment, q.variantId, q.variantName, q.inProgress,
  ]);
}
