/**
 * Speech behind two interfaces, each with an offline default (Debian's espeak-ng and pocketsphinx, run as
 * child processes) and an OpenAI-compatible adapter chosen by environment (`speech/from-env.ts`). Audio in
 * and out is 8 kHz 16-bit mono, the rate of the phone line, so neither side resamples per call.
 */

/** How an agent branch wants to sound (deployed with its artifact; defaults when it names none). */
export interface VoiceSettings {
  /** The engine's voice name (espeak-ng: `en-us`, `en-gb`...; OpenAI: `alloy`...). Empty: the engine's default. */
  voice: string;
  /** Words per minute (espeak-ng's `-s`; the adapter scales its speed from 175 wpm = 1.0). */
  rate: number;
}

export const DEFAULT_VOICE: VoiceSettings = { voice: '', rate: 150 };

export interface TextToSpeech {
  readonly name: string;
  /** 8 kHz 16-bit mono samples of `text` spoken. */
  synthesize(text: string, voice: VoiceSettings): Promise<Int16Array>;
}

/** What the recogniser may expect: words and phrases the deployed agent understands. */
export interface SpeechHints {
  /** A stable key of the hints (e.g. project and artifact version): compiled grammars are cached by it. */
  key: string;
  phrases: string[];
  words: string[];
}

export interface SpeechToText {
  readonly name: string;
  /**
   * The language it recognises, as a BCP 47 code (`en-US`): a call's `asr_lang_code`, by which the Conversations
   * API's `language` filter finds it. Empty when the engine tells the language itself, utterance by utterance.
   */
  readonly language: string;
  /** The text of an utterance of 8 kHz 16-bit mono samples ('' when nothing was recognised). */
  transcribe(pcm: Int16Array, hints: SpeechHints): Promise<string>;
}
