/**
 * How many levels of arrays and objects a JSON body (edge, Messaging HTTP steps), socket frame, or a project
 * function's state or value may nest.
 * Deeper documents are refused before parsing (400, or an error event on the socket): real payloads
 * (integration attributes, metadata, real-time config variables) nest a few levels, and encoders further in
 * recurse, so a bound keeps hostile depth away from them. A constant, not a setting: stored data and
 * every process of a deployment must agree on it.
 */
export const JSON_MAX_DEPTH = 64;

/**
 * Whether a JSON text nests arrays and objects deeper than `max` levels (`{}` and `[]` are one level).
 *
 * One pass over the raw text, counting brackets outside strings, with no recursion and nothing allocated,
 * so it cannot overflow the stack whatever the input, and it runs before `JSON.parse` builds anything.
 * Why a limit at all: `JSON.parse` copes with any depth, but what the platform does next with a value
 * (msgpackr encoding of actor events and snapshots, `JSON.stringify`, validation) recurses, and a body
 * nested some thousands of levels deep overflows the stack there: a 500 or a lost event instead of a 400.
 * The text need not be valid JSON: invalid text is refused by the parser afterwards.
 */
export function jsonTooDeep(text: string, max: number = JSON_MAX_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character, quotes included
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

/** The message every interface uses when refusing a too-deep document. */
export const tooDeepMessage = (max: number = JSON_MAX_DEPTH) => `JSON nests deeper than ${max} levels`;
