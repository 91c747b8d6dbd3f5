import { spawn } from 'node:child_process';
import { withoutInherited } from '../../../platform/inherited-descriptors.js';
import { SpeechCache } from './cache.js';
import { SYNTHESIS_MAX_WAV_BYTES } from './pieces.js';
import { readWav, resample } from './resample.js';
import type { TextToSpeech, VoiceSettings } from './types.js';

/**
 * Runs a program with stdin closed (or given `input`) and none of our other descriptors (the store's files:
 * `withoutInherited`); resolves with its stdout (rejects on a non-zero exit). An output reaching `maxBytes` is
 * cut there: the program is killed and what it wrote up to the bound is the result.
 */
export function run(cmd: string, args: string[], input?: Buffer, maxBytes = Infinity): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const launch = withoutInherited(cmd, args);
    const child = spawn(launch.command, launch.args, { stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let size = 0;
    let full = false;
    let err = '';
    child.stdout!.on('data', (d: Buffer) => {
      if (full) return;
      if (size + d.length >= maxBytes) {
        out.push(d.subarray(0, maxBytes - size));
        size = maxBytes;
        full = true;
        child.kill('SIGKILL');
        return;
      }
      out.push(d);
      size += d.length;
    });
    child.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 || full ? resolve(Buffer.concat(out)) : reject(new Error(`${cmd} exited ${code}: ${err.trim()}`))));
    if (input) {
      // Killed before it read all its input (its output full): the write's EPIPE is no failure.
      child.stdin!.on('error', () => {});
      child.stdin!.end(input);
    }
  });
}

/**
 * Offline text to speech: Debian's `espeak-ng` writes a WAV (22 050 Hz) to stdout, resampled here to 8 kHz.
 * The text goes through stdin, never the command line, so nothing in it is read as an option. A call hands it
 * pieces of at most `SPEECH_PIECE_CHARS` (`speech/pieces.ts`); whatever it is given, its WAV is read up to
 * `SYNTHESIS_MAX_WAV_BYTES` (the rest of the audio is not spoken), and what it made is cached within the
 * `SpeechCache` bounds (entries and bytes; large pieces not kept).
 */
export function espeakTts(binary = 'espeak-ng', cache = new SpeechCache()): TextToSpeech {
  return {
    name: 'espeak-ng',
    synthesize(text: string, voice: VoiceSettings): Promise<Int16Array> {
      return cache.get(`${voice.voice}\u0000${voice.rate}\u0000${text}`, async () => {
        // US English by default: the offline recogniser's model is US English, and it hears this voice best.
        const args = ['--stdout', '-s', String(Math.round(voice.rate)), '-v', voice.voice || 'en-us', '--stdin'];
        const wav = await run(binary, args, Buffer.from(text, 'utf8'), SYNTHESIS_MAX_WAV_BYTES);
        const { rate, samples } = readWav(wav);
        return resample(samples, rate, 8000);
      });
    },
  };
}
