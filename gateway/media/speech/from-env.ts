import { espeakTts } from './espeak.js';
import { openAiStt, openAiTts } from './openai.js';
import { pocketsphinxStt } from './pocketsphinx.js';
import type { SpeechToText, TextToSpeech } from './types.js';

/**
 * The speech engines a media gateway uses, from the environment: `TTS_BASE_URL` / `STT_BASE_URL` (with
 * `TTS_API_KEY`/`STT_API_KEY`, falling back to `OPENAI_API_KEY`, `TTS_MODEL`/`STT_MODEL` and `STT_LANGUAGE`)
 * switch to an OpenAI-compatible service; otherwise espeak-ng and pocketsphinx (en-US) run on this machine.
 */
export function speechFromEnv(env: Record<string, string | undefined> = process.env): { tts: TextToSpeech; stt: SpeechToText } {
  // Trimmed, blank as unset, as platform/config.ts checks them (an http or https URL, or the start stops).
  const ttsBaseUrl = env.TTS_BASE_URL?.trim();
  const sttBaseUrl = env.STT_BASE_URL?.trim();
  const tts = ttsBaseUrl
    ? openAiTts({ baseUrl: ttsBaseUrl, apiKey: env.TTS_API_KEY ?? env.OPENAI_API_KEY, model: env.TTS_MODEL ?? 'tts-1', defaultVoice: env.TTS_VOICE })
    : espeakTts();
  const stt = sttBaseUrl
    ? openAiStt({ baseUrl: sttBaseUrl, apiKey: env.STT_API_KEY ?? env.OPENAI_API_KEY, model: env.STT_MODEL ?? 'whisper-1', language: env.STT_LANGUAGE?.trim() || undefined })
    : pocketsphinxStt();
  return { tts, stt };
}
