import { spawn } from 'node:child_process';
import { withoutInherited } from '../../../platform/inherited-descriptors.js';
import { readWav, resample } from './resample.js';
import type { TextToSpeech, VoiceSettings } from './types.js';

/**
 * Runs a program with stdin closed (or given `input`) and none of our other descriptors (the store's files:
 * `withoutInherited`); resolves with its stdout (rejects on a non-zero exit).
 */
export function run(cmd: string, args: string[], input?: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const launch = withoutInherited(cmd, args);
    const child = spawn(launch.command, launch.args, { stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let err = '';
    child.stdout!.on('data', (d: Buffer) => out.push(d));
    child.stderr!.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-2000)));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(Buffer.concat(out)) : reject(new Error(`${cmd} exited ${code}: ${err.trim()}`))));
    if (input) child.stdin!.end(input);
  });
}

/** How many synthesized utterances are kept: agents repeat greetings, prompts and fallbacks a lot. */
const CACHE = 256;

/**
 * Offline text to speech: Debian's `espeak-ng` writes a WAV (22 050 Hz) to stdout, resampled here to 8 kHz.
 * The text goes through stdin, never the command line, so nothing in it is read as an option.
 */
export function espeakTts(binary = 'espeak-ng'): TextToSpeech {
  const cache = new Map<string, Promise<Int16Array>>();
  return {
    name: 'espeak-ng',
    synthesize(text: string, voice: VoiceSettings): Promise<Int16Array> {
      const key = `${voice.voice}\u0000${voice.rate}\u0000${text}`;
      const hit = cache.get(key);
      if (hit) {
        cache.delete(key);
        cache.set(key, hit);
        return hit;
      }
      // US English by default: the offline recogniser's model is US English, and it hears this voice best.
      const args = ['--stdout', '-s', String(Math.round(voice.rate)), '-v', voice.voice || 'en-us', '--stdin'];
      const made = run(binary, args, Buffer.from(text, 'utf8')).then((wav) => {
        const { rate, samples } = readWav(wav);
        return resample(samples, rate, 8000);
      });
      made.catch(() => cache.delete(key));
      cache.set(key, made);
      if (cache.size > CACHE) cache.delete(cache.keys().next().value!);
      return made;
    },
  };
}
