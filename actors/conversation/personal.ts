/**
 * What of a conversation's turns and variables is personal data, as a key without the `pii` permission reads
 * them when the project's `pii_redaction` is on (docs/recordings.md, Transcripts): the recordings' rules
 * (`actors/recording/pii.ts`: `maskText`, `digitsKind`) applied to a turn's fields and to the variables, over
 * the values functions marked (`marks.ts`).
 *
 * Here, not in the edge, because the `conversations` projector records with each ended conversation's
 * document whether it holds any by the rules alone (`ConversationDocument.personal`): the edge then sends a
 * document without it and without marks as stored, unparsed, to keys without `pii` too. The rules are part of
 * the documents' rendering: a change to them is rebuilt from the journal (`switchboard rebuild conversations`).
 */
// The rules alone (a leaf module): the recording kind's public module imports this kind's.
import { digitsKind, maskText, REDACTED } from '../recording/pii.js';

/** A turn as rows carry it (a record's turn or a rendered one), read field by field: either shape will do. */
export type Turn = Record<string, unknown>;

/** The fields of a turn that are utterances, masked whole when they hold personal data. */
const UTTERANCES = ['user_input', 'translated_user_input', 'agent_response', 'english_agent_response'] as const;

/**
 * The turn as a key without `pii` reads it: a copy with its personal data masked, or the turn itself (the
 * same object) when it holds none. Each utterance that holds personal data is masked whole: the caller's words
 * (and their translation), and the agent's answer (and its English rendering), since an agent that reads back
 * a card number or confirms a phone number says the caller's personal data too; keyed digits that form
 * personal data or a marked value, and entity values that are personal data (entities are extracted from the
 * caller's words, so they carry the same values).
 */
export function maskedTurn<T extends Turn>(turn: T, marked: string[]): T {
  let out: Turn | null = null;
  const set = (field: string, value: unknown) => {
    (out ??= { ...turn })[field] = value;
  };
  for (const field of UTTERANCES) {
    const text = turn[field];
    if (typeof text !== 'string') continue;
    const masked = maskText(text, marked);
    if (masked !== text) set(field, masked);
  }
  const dtmf = turn.user_input_dtmf;
  if (typeof dtmf === 'string' && (digitsKind(dtmf.replace(/[^0-9]/g, '')) || marked.includes(dtmf))) set('user_input_dtmf', REDACTED);
  const entities = turn.entities;
  if (entities && typeof entities === 'object' && !Array.isArray(entities)) {
    let masked: Record<string, unknown> | null = null;
    for (const [k, v] of Object.entries(entities as Record<string, unknown>)) {
      if (typeof v === 'string' && (maskText(v, marked) !== v || digitsKind(v.replace(/[^0-9]/g, '')) === 'card_number')) {
        (masked ??= { ...(entities as Record<string, unknown>) })[k] = REDACTED;
      }
    }
    if (masked) set('entities', masked);
  }
  return (out ?? turn) as T;
}

/**
 * Variables the platform sets on every conversation (`builtinState` in `machines/conversation.ts`): the call's
 * addresses and ids, read as stored, as the row's `from_number` and `to_number` are.
 */
const BUILT_IN_STATE = new Set(['from_', 'to', 'conversation_id', 'call_sid']);
/** How deep into a variable's value strings are looked for (a bound on a hostile value's walk). */
const MAX_STATE_DEPTH = 16;

/**
 * A row's `state` (the conversation variables) as a key without `pii` reads it: a function that kept what the
 * caller said (`conv.state.card = message`) keeps personal data, so each string in a variable's value, at any
 * depth, that holds some reads `[redacted]`, by the turns' rules and marks. Numbers are read as they are (a
 * variable holding a count or a timestamp is not a phone number). The state itself when nothing is masked.
 */
export function maskedState(state: unknown, marked: string[]): unknown {
  if (!state || typeof state !== 'object' || Array.isArray(state)) return state;
  return maskedFields(state as Record<string, unknown>, marked, 0, BUILT_IN_STATE);
}

function maskedValue(v: unknown, marked: string[], depth: number): unknown {
  if (typeof v === 'string') return maskText(v, marked);
  if (!v || typeof v !== 'object' || depth >= MAX_STATE_DEPTH) return v;
  if (Array.isArray(v)) {
    const items = v.map((x) => maskedValue(x, marked, depth + 1));
    return items.every((x, i) => x === v[i]) ? v : items;
  }
  return maskedFields(v as Record<string, unknown>, marked, depth + 1);
}

/**
 * An object with each field's value masked (but those named in `asStored`), and each name that holds personal
 * data too (a function that files values under what the caller said, `conv.state.callers[message] = true`):
 * such a field is renamed `[redacted]`, then `[redacted] 2`, `[redacted] 3`... in its place, its value kept
 * (masked by the same rules). The object itself when nothing is masked.
 */
function maskedFields(o: Record<string, unknown>, marked: string[], depth: number, asStored?: Set<string>): Record<string, unknown> {
  const entries: Array<[string, unknown]> = [];
  const names = new Set<string>();
  let changed = false;
  let n = 1;
  for (const [k, v] of Object.entries(o)) {
    if (asStored?.has(k)) {
      entries.push([k, v]);
      names.add(k);
      continue;
    }
    const m = maskedValue(v, marked, depth);
    let name = k;
    if (maskText(k, marked) !== k) {
      name = REDACTED;
      while (Object.hasOwn(o, name) || names.has(name)) name = `${REDACTED} ${++n}`;
    }
    if (name !== k || m !== v) changed = true;
    entries.push([name, m]);
    names.add(name);
  }
  // Rebuilt in order: a renamed field keeps its place among the others.
  return changed ? Object.fromEntries(entries) : o;
}

/**
 * The row's fields besides its turns and state that a function writes free text into: the handoff's
 * destination and reason (`conv.handoff(destination, reason)`, or a model's handoff tool), which may quote
 * what the caller said. Masked whole, as an utterance is.
 */
export const FREE_TEXT_FIELDS = ['handoff_reason', 'handoff_destination'] as const;

/** The row's free-text fields (`FREE_TEXT_FIELDS`) as a key without `pii` reads them: only those it masks. */
export function maskedFreeText(row: Record<string, unknown>, marked: string[]): Partial<Record<(typeof FREE_TEXT_FIELDS)[number], string>> {
  const out: Partial<Record<(typeof FREE_TEXT_FIELDS)[number], string>> = {};
  for (const field of FREE_TEXT_FIELDS) {
    const v = row[field];
    if (typeof v === 'string' && maskText(v, marked) !== v) out[field] = REDACTED;
  }
  return out;
}

/** Whether any turn reads differently to a key without `pii`. */
export function hasMaskedTurn(turns: Turn[], marked: string[]): boolean {
  return turns.some((t) => maskedTurn(t, marked) !== t);
}

/**
 * Whether a key without `pii` reads any of these turns, variables or free-text fields (`FREE_TEXT_FIELDS` of
 * `row`) masked by the rules alone (no marks).
 */
export function holdsPersonalData(turns: Turn[], state: unknown, row: Record<string, unknown> = {}): boolean {
  return hasMaskedTurn(turns, []) || maskedState(state, []) !== state || Object.keys(maskedFreeText(row, [])).length > 0;
}
