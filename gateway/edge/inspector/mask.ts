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
 *    (conversation variables), `userAgent`). Inside a masked field objects and arrays keep their shape
 *    (keys, lengths); strings become `•••` with their length, numbers become `•••`; booleans and null stay.
 * 2. Every other string is kept, but e-mail addresses and phone numbers in it are replaced (`•••@•••`,
 *    `•••` plus the last two digits): an agent's answer that repeats a caller's address shows none of it.
 *
 * Ids, states, timestamps, counters, reasons and flags stay readable: they are what an engineer debugging
 * a machine needs. The rule is applied to contexts, journal events and the `@statelyai/inspect` feed alike.
 */

const MASKED_KEYS = new Set(
  [
    'user_input', 'translated_user_input', 'user_input_dtmf', 'message', 'text', 'initialMessage', 'userTyping', 'history',
    'fromNumber', 'toNumber', 'from_number', 'to_number', 'phone', 'caller', 'callee', 'email',
    'metadata', 'integrationAttributes', 'integration_attributes', 'sip_headers', 'custom', 'joinCustom', 'payload', 'body', 'data', 'state', 'userAgent',
  ].map((k) => k.toLowerCase()),
);

/** Whether a field of this name is masked whole. */
export const maskedKey = (key: string): boolean => MASKED_KEYS.has(key.toLowerCase());

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}/g;
// A phone number: 7 or more digits, optionally with a leading + and separators between groups, standing
// alone (not part of an id, a UUID or a timestamp).
const PHONE = /(?<![\w.:-])\+?\d[\d\s().-]{5,24}\d(?![\w:-])/g;
const DATE = /^\d{4}-\d{2}-\d{2}$/;

/** A string with the e-mail addresses and phone numbers in it replaced. */
export function scrubText(s: string): string {
  return s.replace(EMAIL, '•••@•••').replace(PHONE, (m) => {
    const digits = m.replace(/\D/g, '');
    return digits.length >= 7 && !DATE.test(m) ? `•••${digits.slice(-2)}` : m;
  });
}

const hideLeaves = (v: unknown): unknown => {
  if (typeof v === 'string') return v === '' ? '' : `•••(${v.length})`;
  if (typeof v === 'number') return '•••';
  if (Array.isArray(v)) return v.map(hideLeaves);
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, hideLeaves(x)]));
  return v;
};

/** A copy of `value` with personal data masked by the rule above. */
export function mask(value: unknown): unknown {
  if (typeof value === 'string') return scrubText(value);
  if (Array.isArray(value)) return value.map(mask);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskedKey(k) ? hideLeaves(v) : mask(v)]));
  }
  return value;
}

/** `mask(value)`, or `value` itself when the operator asked for it unmasked. */
export const maybeMask = (value: unknown, unmasked: boolean): unknown => (unmasked ? value : mask(value));
