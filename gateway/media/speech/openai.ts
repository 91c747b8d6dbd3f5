import { SYNTHESIS_MAX_WAV_BYTES } from './pieces.js';
import { readWav, resample } from './resample.js';
import type { SpeechHints, SpeechToText, TextToSpeech, VoiceSettings } from './types.js';

export interface OpenAiSpeechOptions {
  baseUrl: string;
  apiKey?: string;
  model: string;
  /** TTS: the voice when the branch names none. */
  defaultVoice?: string;
  /** STT: the language to expect, a BCP 47 tag (`STT_LANGUAGE`); unset, the service detects each utterance's. */
  language?: string;
  timeoutMs?: number;
}

const headers = (apiKey?: string): Record<string, string> => (apiKey ? { authorization: `Bearer ${apiKey}` } : {});

/**
 * Text to speech through an OpenAI-compatible `POST {base}/audio/speech` (`response_format: wav`). A call hands
 * it pieces of at most `SPEECH_PIECE_CHARS` (`speech/pieces.ts`); the WAV answered is read up to
 * `SYNTHESIS_MAX_WAV_BYTES` (a longer one is cut there), so a service answering more than it was asked for
 * buffers and converts no more than espeak-ng's would. It keeps no cache: each piece is asked of the service.
 */
export function openAiTts(o: OpenAiSpeechOptions): TextToSpeech {
  return {
    name: 'openai',
    async synthesize(text: string, voice: VoiceSettings): Promise<Int16Array> {
      const res = await fetch(`${o.baseUrl.replace(/\/$/, '')}/audio/speech`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers(o.apiKey) },
        body: JSON.stringify({ model: o.model, input: text, voice: voice.voice || o.defaultVoice || 'alloy', response_format: 'wav', speed: Math.min(4, Math.max(0.25, voice.rate / 175)) }),
        signal: AbortSignal.timeout(o.timeoutMs ?? 15_000),
      });
      if (!res.ok) throw new Error(`speech service answered ${res.status}`);
      const { rate, samples } = readWav(await bodyUpTo(res, SYNTHESIS_MAX_WAV_BYTES));
      return resample(samples, rate, 8000);
    },
  };
}

/** A response's body, up to `max` bytes (the rest is not read: the stream is cancelled). */
async function bodyUpTo(res: Response, max: number): Promise<Buffer> {
  const reader = res.body?.getReader();
  if (!reader) return Buffer.alloc(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (size + value.length >= max) {
      chunks.push(value.subarray(0, max - size));
      await reader.cancel().catch(() => {});
      break;
    }
    chunks.push(value);
    size += value.length;
  }
  return Buffer.concat(chunks);
}

/** A WAV file of 8 kHz 16-bit mono samples. */
export function wavOf(pcm: Int16Array, rate = 8000): Buffer {
  const data = Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'ascii');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'ascii');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(rate, 24);
  h.writeUInt32LE(rate * 2, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'ascii');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

/** Speech to text through an OpenAI-compatible `POST {base}/audio/transcriptions` (the agent's words as the prompt). */
export function openAiStt(o: OpenAiSpeechOptions): SpeechToText {
  return {
    name: 'openai',
    // Without one the service detects each utterance's, and the calls carry no asr_lang_code.
    language: o.language ?? '',
    async transcribe(pcm: Int16Array, hints: SpeechHints): Promise<string> {
      const form = new FormData();
      form.set('model', o.model);
      form.set('file', new Blob([new Uint8Array(wavOf(pcm))], { type: 'audio/wav' }), 'utterance.wav');
      form.set('response_format', 'json');
      // The transcription API takes the language alone (ISO 639-1 `fr`), not its region (`fr-FR`).
      if (o.language) form.set('language', o.language.split('-')[0]!.toLowerCase());
      // A prompt of the agent's vocabulary biases the recogniser the way the offline grammar does.
      const prompt = [...hints.phrases, ...hints.words].join(', ').slice(0, 800);
      if (prompt) form.set('prompt', prompt);
      const res = await fetch(`${o.baseUrl.replace(/\/$/, '')}/audio/transcriptions`, { method: 'POST', headers: headers(o.apiKey), body: form, signal: AbortSignal.timeout(o.timeoutMs ?? 15_000) });
      if (!res.ok) throw new Error(`transcription service answered ${res.status}`);
      const body = (await res.json()) as { text?: string };
      return (body.text ?? '').trim();
    },
  };
}
