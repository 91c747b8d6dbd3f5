/**
 * Greetings, thanks and small talk for the offline responder: recognised by whole words (no regular
 * expression runs over the message), so "Hi there" is a greeting, not an out-of-domain question.
 */
import { STOP_WORDS, words } from './text.js';

/** What a message says besides (or instead of) a question: its small-talk intents, strongest first. */
export type SmallTalkIntent = 'smalltalk:identity' | 'smalltalk:how_are_you' | 'thanks' | 'greeting' | 'acknowledge';

/** Phrases of each intent, as lowercase words (apostrophes removed); the order of this list is the intents' strength. */
const PHRASES: ReadonlyArray<readonly [SmallTalkIntent, readonly string[]]> = [
  ['smalltalk:identity', ['who are you', 'are you a bot', 'are you a robot', 'are you human', 'are you a human', 'are you real', 'are you a person', 'what is your name', 'whats your name', 'what are you']],
  ['smalltalk:how_are_you', ['how are you', 'how are you doing', 'how r u', 'hows it going', 'how is it going', 'how are things', 'how do you do', 'whats up', 'how is your day', 'hows your day']],
  ['thanks', ['thanks', 'thank you', 'thank u', 'thx', 'ty', 'cheers', 'much appreciated', 'appreciate it', 'many thanks', 'thanks a lot', 'thank you so much']],
  ['greeting', ['hi', 'hello', 'hey', 'hiya', 'howdy', 'greetings', 'yo', 'good morning', 'good afternoon', 'good evening', 'good day', 'morning', 'hey there', 'hi there', 'hello there']],
  ['acknowledge', ['ok', 'okay', 'great', 'cool', 'perfect', 'got it', 'sounds good', 'alright', 'all right', 'awesome', 'nice', 'understood', 'i see']],
];

/** Words that add nothing to small talk ("hi there", "thanks so much", "good morning to you"). */
const FILLER: ReadonlySet<string> = new Set(['there', 'so', 'much', 'very', 'again', 'today', 'doing', 'folks', 'guys', 'everyone', 'all', 'lot', 'oh', 'ah', 'um', 'well', 'really']);

/** The phrases by their first word, each with its intent's strength (its index in `PHRASES`). */
const BY_FIRST_WORD = new Map<string, Array<{ rank: number; words: string[] }>>();
PHRASES.forEach(([, list], rank) => {
  for (const p of list) {
    const words = p.split(' ');
    const at = BY_FIRST_WORD.get(words[0]);
    if (at) at.push({ rank, words });
    else BY_FIRST_WORD.set(words[0], [{ rank, words }]);
  }
});

/** What `smallTalk` found in a message. */
export interface SmallTalk {
  /** The small-talk intents found, strongest first (empty when none). */
  intents: SmallTalkIntent[];
  /** True when the message is nothing but small talk (and filler or stop words). */
  only: boolean;
}

/** The small talk in a message. */
export function smallTalk(message: string): SmallTalk {
  const ws = words(message).map((w) => w.replace(/'/g, ''));
  const covered = new Array<boolean>(ws.length).fill(false);
  // Only the phrases that start with a word of the message are tried there.
  const found = new Array<boolean>(PHRASES.length).fill(false);
  for (let i = 0; i < ws.length; i++) {
    for (const { rank, words: phrase } of BY_FIRST_WORD.get(ws[i]) ?? []) {
      if (i + phrase.length > ws.length) continue;
      let match = true;
      for (let j = 1; j < phrase.length && match; j++) match = ws[i + j] === phrase[j];
      if (!match) continue;
      found[rank] = true;
      for (let j = 0; j < phrase.length; j++) covered[i + j] = true;
    }
  }
  const intents = PHRASES.filter((_, rank) => found[rank]).map(([intent]) => intent);
  const only = intents.length > 0 && ws.every((w, i) => covered[i] || STOP_WORDS.has(w) || FILLER.has(w));
  return { intents, only };
}

/** Whether a channel label (`VOICE-SIP`, `CHAT`, `WEBCHAT`, ...) is a phone call. */
export function isVoiceChannel(channel: string | undefined): boolean {
  return !!channel && /^(?:voice|phone|call|sip|pstn)/i.test(channel);
}

/** The reply to small talk, by its strongest intent. */
export function smallTalkReply(intent: SmallTalkIntent, channel: string | undefined): string {
  switch (intent) {
    case 'smalltalk:identity':
      return isVoiceChannel(channel)
        ? "I'm the virtual assistant on this line. How can I help you today?"
        : "I'm a virtual assistant. How can I help you today?";
    case 'smalltalk:how_are_you':
      return "I'm doing well, thank you for asking! How can I help you today?";
    case 'thanks':
      return "You're welcome! Is there anything else I can help with?";
    case 'greeting':
      return 'Hi! How can I help you today?';
    case 'acknowledge':
      return 'Great. Is there anything else I can help with?';
  }
}
