/**
 * How much of an answer is spoken on a call, and in which pieces. An answer's text comes from the agent (a
 * project function's `conv.say` may hold up to the sandbox's output limit, 256 K characters; a model's reply may
 * be long too), and speech synthesis runs outside the sandbox's limits: text to speech of a whole long answer
 * buffered a WAV of hundreds of megabytes and converted it on the main thread for seconds, stalling every other
 * account's turns. So a call speaks at most `SPOKEN_ANSWER_MAX_CHARS` of an answer, cut at a sentence's end, and
 * synthesizes it in pieces of at most `SPEECH_PIECE_CHARS`, one after the other as the call plays them
 * (`gateway/media/speaker.ts`): no single synthesis, WAV or resampling is large. The conversation's transcript
 * keeps the answer's whole text.
 */

/** The most characters (UTF-16 code units) synthesized at once: about 20 s of speech at 150 words a minute. */
export const SPEECH_PIECE_CHARS = 300;

/**
 * The most characters of one answer spoken on a call (about 2 minutes at 150 words a minute); the rest is not
 * spoken. A phone answer longer than this is a mistake of the agent (or a hostile function), not something a
 * caller listens to.
 */
export const SPOKEN_ANSWER_MAX_CHARS = 2000;

/**
 * The most bytes of WAV read of one piece's synthesis (8 MiB: over 3 minutes at 22 050 Hz, 16-bit mono; the
 * slowest rate of a piece of digits, which are read out as many words, makes about 5 MiB): the rest of its
 * audio is not spoken. Bounds what one synthesis buffers and converts on the main thread, whatever the engine.
 */
export const SYNTHESIS_MAX_WAV_BYTES = 8 * 1024 * 1024;

const SENTENCE_END = new Set(['.', '!', '?', '…', '。', '！', '？']);
const CLAUSE_END = new Set([',', ';', ':', '—', '–', ')', '，', '；', '：']);
const isSpace = (c: string | undefined) => c === ' ' || c === '\n' || c === '\t' || c === '\r' || c === '\u00a0';

/**
 * Where a piece of `text` starting at `from` ends, at most `limit` characters on: after the last sentence's end
 * in the window's later two thirds, else after its last clause's end there, else at its last space, else at
 * `limit` (never between the halves of a surrogate pair). Scanned backwards once per kind: linear in `limit`.
 */
export function pieceEnd(text: string, from: number, limit: number): number {
  const end = from + limit;
  if (end >= text.length) return text.length;
  const floor = from + Math.floor(limit / 3);
  // A break after punctuation counts when a space (or the text's end) follows it: "3.5" and "e.g.x" are not ends.
  const after = (marks: Set<string>, lowest: number) => {
    for (let i = end; i > lowest; i--) if (isSpace(text[i]) && marks.has(text[i - 1]!)) return i;
    return -1;
  };
  const sentence = after(SENTENCE_END, floor);
  if (sentence > 0) return sentence;
  const clause = after(CLAUSE_END, floor);
  if (clause > 0) return clause;
  for (let i = end; i > from; i--) if (isSpace(text[i])) return i;
  const code = text.charCodeAt(end - 1);
  return code >= 0xd800 && code <= 0xdbff && end - 1 > from ? end - 1 : end;
}

/** What a call speaks of an answer: its pieces, in order, and whether its end was left unspoken. */
export interface SpokenPieces {
  pieces: string[];
  /** How many characters of the answer the pieces cover (the answer's length unless `truncated`). */
  spokenChars: number;
  truncated: boolean;
}

/**
 * The pieces a call speaks of `text`: at most `maxChars` of it (cut at a sentence's end, as `pieceEnd` finds it),
 * in pieces of at most `pieceChars`, each trimmed, none empty. A text within one piece is one piece, as it was
 * (its synthesis cached whole: greetings and prompts repeat).
 */
export function spokenPieces(text: string, o: { pieceChars?: number; maxChars?: number } = {}): SpokenPieces {
  const pieceChars = Math.max(1, o.pieceChars ?? SPEECH_PIECE_CHARS);
  const maxChars = Math.max(1, o.maxChars ?? SPOKEN_ANSWER_MAX_CHARS);
  const spokenChars = text.length > maxChars ? pieceEnd(text, 0, maxChars) : text.length;
  const pieces: string[] = [];
  for (let at = 0; at < spokenChars; ) {
    const end = spokenChars - at <= pieceChars ? spokenChars : pieceEnd(text, at, pieceChars);
    const piece = text.slice(at, end).trim();
    if (piece) pieces.push(piece);
    at = end;
  }
  return { pieces, spokenChars, truncated: spokenChars < text.length };
}
