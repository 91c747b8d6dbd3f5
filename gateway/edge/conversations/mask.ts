/**
 * What a key without the `pii` permission reads of a conversation when the project's `pii_redaction` is on
 * (docs/recordings.md, Transcripts), in one place: the rows it is sent and the text its searches match.
 *
 * Both must be the same text. A transcript search matched on the raw turns would answer, for a value the
 * key is shown as `[redacted]`, which conversations hold it: the personal data the masking hides, learnt
 * from which rows come back. So transcript search matches each turn as `maskedTurn` renders it
 * (`reader.ts`), and semantic search, whose stored vectors were computed from the raw turns, leaves out the
 * conversations that have a masked turn (`semantic.ts`).
 *
 * The rules are the recordings' (`actors/recording`: `maskText`, `digitsKind`), applied to a turn and to the
 * variables by `actors/conversation/personal.ts`, over the marked values the `conversations` projector writes
 * before the turns they mask (`actors/conversation/marks.ts`); this module applies them to rows and searches.
 */
import { maskText } from '../../../actors/recording/mod.js';
import { maskedFreeText, maskedState, maskedTurn, projectedMarksOf, searchTerms, type Turn } from '../../../actors/conversation/mod.js';
import type { Store } from '../../../store/mod.js';

export type { Turn };

/** The sides of a conversation transcript search can look at: `u` the user's turns, `a` the agent's. */
export type Side = 'u' | 'a';

/** A request's masking: the marked values of the conversations it reads. */
export interface Masking {
  /**
   * The marked values of each conversation (empty when none), read once per request and conversation: the
   * rows a search kept are rendered with the very marks they were matched with, although the marks may grow
   * meanwhile.
   */
  marks(conversationIds: string[]): Promise<Map<string, string[]>>;
  /**
   * The turns of the rows a search kept, as its filter parsed them (raw), by row: the renderer masks these
   * instead of parsing the row's JSON again (absent: the renderer parses).
   */
  readonly kept?: WeakMap<object, Turn[]>;
}

/** The masking of one request of a key without `pii`, reading marks from the store's projection. */
export function requestMasking(store: Store): Masking {
  const known = new Map<string, string[]>();
  return {
    kept: new WeakMap(),
    async marks(ids) {
      const missing = [...new Set(ids.filter((id) => !known.has(id)))];
      if (missing.length > 0) for (const [id, values] of await projectedMarksOf(store, missing)) known.set(id, values);
      return new Map(ids.map((id) => [id, known.get(id) ?? []]));
    },
  };
}

/** A row's JSON (chunks) with each turn, its state and its free-text fields masked; the chunks themselves when nothing is. */
export function maskedRow(parts: Buffer[], marked: string[]): Buffer[] {
  const row = JSON.parse(Buffer.concat(parts).toString()) as { turns?: unknown; state?: unknown };
  return maskedObject(row, marked) ? [Buffer.from(JSON.stringify(row))] : parts;
}

/**
 * Masks a row object's turns, state and free-text fields (the handoff's, `maskedFreeText`) in place (a row
 * rendered for this request, or parsed from its JSON); whether anything was masked. Assigning an existing key
 * keeps its place: its JSON then differs from the raw row's only in the masked values.
 */
export function maskedObject(row: { turns?: unknown; state?: unknown }, marked: string[]): boolean {
  const turns = Array.isArray(row.turns) ? (row.turns as Turn[]).map((t) => maskedTurn(t, marked)) : null;
  const state = maskedState(row.state, marked);
  const free = maskedFreeText(row as Record<string, unknown>, marked);
  const turnsMasked = turns !== null && turns.some((t, i) => t !== (row.turns as Turn[])[i]);
  const freeMasked = Object.keys(free).length > 0;
  if (!turnsMasked && state === row.state && !freeMasked) return false;
  if (turnsMasked) row.turns = turns;
  if (state !== row.state) row.state = state;
  if (freeMasked) Object.assign(row, free);
  return true;
}

const NULL = Buffer.from('null');

/**
 * A row's JSON whose turns array is the bytes `[at, end)` of `json` and parses to `turns`, with each turn, its
 * state and its free-text fields masked: the same bytes `maskedRow` gives (the JSON was written by `JSON.stringify`, so re-writing
 * the rest changes nothing), without parsing the turns again (the bulk of a row): only the fields around them
 * are, for the state. The JSON itself when nothing is masked.
 */
export function maskedTurnsOf(json: Buffer, at: number, end: number, turns: Turn[], marked: string[]): Buffer[] {
  const masked = turns.map((t) => maskedTurn(t, marked));
  const rest = JSON.parse(Buffer.concat([json.subarray(0, at), NULL, json.subarray(end)]).toString()) as { turns: unknown; state?: unknown };
  const state = maskedState(rest.state, marked);
  const free = maskedFreeText(rest as Record<string, unknown>, marked);
  if (state !== rest.state || Object.keys(free).length > 0) {
    rest.state = state;
    Object.assign(rest, free);
    rest.turns = masked;
    return [Buffer.from(JSON.stringify(rest))];
  }
  if (masked.every((t, i) => t === turns[i])) return [json];
  return [json.subarray(0, at), Buffer.from(JSON.stringify(masked)), json.subarray(end)];
}

const text = (v: unknown) => (typeof v === 'string' ? v : '');

/**
 * The search terms of a conversation's turns as a key without `pii` reads them, on the given sides: the
 * postings index the same fields (`user_input` for `u`, `agent_response` for `a`, `searchTerms`), raw. A
 * masked utterance gives no term at all, not even the mask's `redacted`: transcript search reads the
 * postings first, so a match on the mask's word would need the raw text to hold it too, and would tell
 * whether a hidden utterance said "redacted".
 */
export function maskedTerms(turns: Turn[], marked: string[], sides: readonly Side[]): Set<string> {
  const terms = new Set<string>();
  for (const turn of turns) {
    // Only the utterance decides here (`maskedTurn`'s rule for it): the postings index no other field of the turn.
    const said = text(turn.user_input);
    if (sides.includes('u') && maskText(said, marked) === said) for (const t of searchTerms(said)) terms.add(t);
    const answered = text(turn.agent_response);
    if (sides.includes('a') && maskText(answered, marked) === answered) for (const t of searchTerms(answered)) terms.add(t);
  }
  return terms;
}
