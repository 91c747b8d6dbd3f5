/**
 * What the inspector hides of an actor's context and events unless the operator asks for it
 * (`?unmasked=true`). The rule (docs/inspector.md, Masking):
 *
 * 1. Fields that hold what a person typed or said, or identifies them, are masked whole at any depth, by
 *    name (case-insensitive): the user's words (`user_input`, `translated_user_input`, `user_input_dtmf`,
 *    `message`, `text`, `initialMessage`, `userTyping`, `history`), phone numbers (`fromNumber`,
 *    `toNumber`, `from_number`, `to_number`, `phone`, `caller`, `callee`), e-mail (`email`), and the
 *    free-form bags a client or a tenant's functions fill (`metadata`, `integrationAttributes`,
 *    `integration_attributes`, `sip_headers`, `custom`, `joinCustom`, `payload`, `body`, `data`, `state`
 *    (conversation variables), `userAgent` and `user_agent`). Inside a masked field objects and arrays keep their shape
 *    (keys, lengths); strings become `•••` with their length, numbers become `•••`; booleans and null stay.
 * 2. Every other string is kept, but e-mail addresses and phone numbers in it are replaced (`•••@•••`,
 *    `•••` plus the last two digits): an agent's answer that repeats a caller's address shows none of it.
 * 3. Values a function marked personal (`conv.mark_pii`; `marks.ts`) are replaced by `•••` wherever they appear
 *    (case-insensitive), the `conversation.pii_marked` events that carry them included.
 * Field names are masked by rules 2 and 3 too, inside masked fields as well (a name masked into one already
 * there is numbered: `•••@••• 2`).
 *
 * `state` is masked when it holds an object (a conversation's variables), not when it is a string (an alert
 * rule's status, which is what an engineer reads it for).
 *
 * An agent's words stay readable but for rules 2 and 3: a conversation's `response` is named for none of rule 1,
 * and a messaging session's `session.agent_message` carries the agent's reply in `text`, which rule 1 masks
 * elsewhere (the user's message, `session.user_message`, is named alike): `maskEvent` knows it by its event's type.
 *
 * Ids, states, timestamps, counters, reasons and flags stay readable: they are what an engineer debugging
 * a machine needs. The rule is applied to contexts, journal events and the `@statelyai/inspect` feed alike.
 */

const MASKED_KEYS = new Set(
  [
    'user_input', 'translated_user_input', 'user_input_dtmf', 'message', 'text', 'initialMessage', 'userTyping', 'history',
    'fromNumber', 'toNumber', 'from_number', 'to_number', 'phone', 'caller', 'callee', 'email',
    'metadata', 'integrationAttributes', 'integration_attributes', 'sip_headers', 'custom', 'joinCustom', 'payload', 'body', 'data', 'userAgent', 'user_agent',
  ].map((k) => k.toLowerCase()),
);

/** Whether a field of this name (holding this value) is masked whole. */
export const maskedKey = (key: string, value?: unknown): boolean => {
  const lower = key.toLowerCase();
  return MASKED_KEYS.has(lower) || (lower === 'state' && value !== null && typeof value === 'object');
};

/** `text` with every occurrence of a marked value (case-insensitive, trimmed, non-empty) replaced by `•••`. */
export function hideMarked(text: string, marked: readonly string[]): string {
  if (marked.length === 0 || text === '') return text;
  let out = text;
  for (const raw of marked) {
    const value = raw.trim();
    if (value === '') continue;
    const lowerValue = value.toLowerCase();
    const lower = out.toLowerCase();
    // Lower-casing may change a string's length (a few Unicode letters): then the whole text is hidden.
    if (lower.length !== out.length) {
      if (lower.includes(lowerValue)) return '•••';
      continue;
    }
    let at = lower.indexOf(lowerValue);
    if (at < 0) continue;
    let next = '';
    let last = 0;
    for (; at >= 0; at = lower.indexOf(lowerValue, at + lowerValue.length)) {
      next += `${out.slice(last, at)}•••`;
      last = at + lowerValue.length;
    }
    out = next + out.slice(last);
  }
  return out;
}

// Both scans below are written out by hand, not as backtracking regular expressions: linear in the text,
// since masking runs over whatever people typed (test/regex.test.ts holds the platform's patterns to that).
const isLocal = (c: string) => /[A-Za-z0-9._%+-]/.test(c);
const isDomain = (c: string) => /[A-Za-z0-9.-]/.test(c);
const isLetter = (c: string) => /[A-Za-z]/.test(c);
const isDigit = (c: string) => c >= '0' && c <= '9';
const isPhoneChar = (c: string) => isDigit(c) || c === ' ' || c === '(' || c === ')' || c === '.' || c === '-';
/** Characters that make a number part of something else (an id, a UUID, a timestamp) when they touch it. */
const joinsBefore = (c: string | undefined) => c !== undefined && /[\w.:-]/.test(c);
const joinsAfter = (c: string | undefined) => c !== undefined && /[\w:-]/.test(c);
const DATE = /^\d{4}-\d{2}-\d{2}$/;
/** A phone number is at most this long as written (digits and separators). */
const PHONE_MAX = 30;

/** [start, end) of every e-mail address in `s`. */
function emails(s: string): Array<[number, number]> {
  const found: Array<[number, number]> = [];
  let from = 0;
  for (let at = s.indexOf('@'); at >= 0; at = s.indexOf('@', at + 1)) {
    let start = at;
    while (start > from && isLocal(s[start - 1])) start--;
    let end = at + 1;
    while (end < s.length && isDomain(s[end])) end++;
    while (end > at + 1 && (s[end - 1] === '.' || s[end - 1] === '-')) end--;
    const domain = s.slice(at + 1, end);
    const dot = domain.lastIndexOf('.');
    const tld = dot > 0 ? domain.slice(dot + 1) : '';
    if (start < at && dot > 0 && tld.length >= 2 && [...tld].every(isLetter)) {
      found.push([start, end]);
      from = end;
    }
  }
  return found;
}

/**
 * A string with the e-mail addresses and phone numbers in it replaced. A phone number: 7 or more digits,
 * optionally with a leading + and separators between groups, standing alone (not part of an id, a UUID
 * or a timestamp), not a date.
 */
export function scrubText(text: string): string {
  let s = text;
  if (s.includes('@')) {
    let out = '';
    let last = 0;
    for (const [start, end] of emails(s)) {
      out += `${s.slice(last, start)}•••@•••`;
      last = end;
    }
    s = out + s.slice(last);
  }
  let out = '';
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    const starts = (isDigit(c) || (c === '+' && isDigit(s[i + 1] ?? ''))) && !joinsBefore(s[i - 1]);
    if (starts) {
      let end = i + 1;
      while (end < s.length && end - i < PHONE_MAX && isPhoneChar(s[end])) end++;
      while (end > i && !isDigit(s[end - 1])) end--;
      const run = s.slice(i, end);
      const digits = run.replace(/\D/g, '');
      if (digits.length >= 7 && !joinsAfter(s[end]) && !DATE.test(run)) {
        out += `•••${digits.slice(-2)}`;
        i = end;
        continue;
      }
    }
    out += c;
    i++;
  }
  return out;
}

/**
 * An object's fields with their names masked by rules 2 and 3 (a function that files values under what the
 * caller said, `conv.state.callers[message] = true`) and their values by `value`. A masked name that meets one
 * already there is numbered (`•••@••• 2`): no field is lost to another.
 */
function maskedFields(o: object, marked: readonly string[], value: (k: string, v: unknown) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) {
    const masked = scrubText(hideMarked(k, marked));
    let name = masked;
    for (let n = 2; name !== k && (Object.hasOwn(out, name) || Object.hasOwn(o, name)); n++) name = `${masked} ${n}`;
    out[name] = value(k, v);
  }
  return out;
}

const hideLeaves = (v: unknown, marked: readonly string[]): unknown => {
  if (typeof v === 'string') return v === '' ? '' : `•••(${v.length})`;
  if (typeof v === 'number') return '•••';
  if (Array.isArray(v)) return v.map((x) => hideLeaves(x, marked));
  if (v && typeof v === 'object') return maskedFields(v, marked, (_, x) => hideLeaves(x, marked));
  return v;
};

/** A copy of `value` with personal data masked by the rule above, `marked` the values marked personal. */
export function mask(value: unknown, marked: readonly string[] = []): unknown {
  if (typeof value === 'string') return scrubText(hideMarked(value, marked));
  if (Array.isArray(value)) return value.map((v) => mask(v, marked));
  if (value && typeof value === 'object') return maskedFields(value, marked, (k, v) => maskField(k, v, marked));
  return value;
}

/** A field's value masked by the rule above: whole if its name says so, else as any value. */
const maskField = (key: string, value: unknown, marked: readonly string[]): unknown => (maskedKey(key, value) ? hideLeaves(value, marked) : mask(value, marked));

/**
 * Fields of a domain event, by the event's type, that hold what the agent said under a name rule 1 masks: kept
 * with rules 2 and 3 only. A live agent's message (`session.live_agent_message`) is a person's words and stays masked.
 */
const AGENT_WORDS: Readonly<Record<string, readonly string[]>> = {
  'session.agent_message': ['text'],
};

/** A copy of a domain event's `data` masked by the rule above: as `mask`, but what the agent said is kept (scrubbed). */
export function maskEvent(type: string, data: unknown, marked: readonly string[] = []): unknown {
  const agent = Object.hasOwn(AGENT_WORDS, type) ? AGENT_WORDS[type] : [];
  if (agent.length === 0 || data === null || typeof data !== 'object' || Array.isArray(data)) return mask(data, marked);
  return maskedFields(data, marked, (k, v) => (agent.includes(k) && typeof v === 'string' ? mask(v, marked) : maskField(k, v, marked)));
}

/** `mask(value, marked)`, or `value` itself when the operator asked for it unmasked. */
export const maybeMask = (value: unknown, unmasked: boolean, marked: readonly string[] = []): unknown => (unmasked ? value : mask(value, marked));

/** `maskEvent(type, data, marked)`, or `data` itself when the operator asked for it unmasked. */
export const maybeMaskEvent = (type: string, data: unknown, unmasked: boolean, marked: readonly string[] = []): unknown => (unmasked ? data : maskEvent(type, data, marked));
