import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from './espeak.js';
import { resample } from './resample.js';
import type { SpeechHints, SpeechToText } from './types.js';

export const POCKETSPHINX_MODEL = '/usr/share/pocketsphinx/model/en-us';

/**
 * Offline speech to text: Debian's `pocketsphinx_continuous` with its US English model, constrained by a
 * JSGF grammar of what the deployed agent understands (its phrases whole, else any sequence of its words
 * found in the model's dictionary). The free model on open vocabulary is poor on telephone audio; a
 * grammar of the agent's own words is what makes it usable. The 8 kHz line audio is upsampled to the
 * model's 16 kHz (the upper band stays empty), and noise removal is off: it eats the quiet band-limited
 * onsets of words.
 */
export function pocketsphinxStt(opts: { binary?: string; model?: string } = {}): SpeechToText {
  const binary = opts.binary ?? 'pocketsphinx_continuous';
  const model = opts.model ?? POCKETSPHINX_MODEL;
  const dictPath = join(model, 'cmudict-en-us.dict');
  let dictionary: Promise<Set<string>> | null = null;
  const grammars = new Map<string, Promise<string | null>>();
  let dir: Promise<string> | null = null;
  const workDir = () => (dir ??= mkdtemp(join(tmpdir(), 'switchboard-stt-')));

  const words = () =>
    (dictionary ??= readFile(dictPath, 'utf8').then((text) => {
      const set = new Set<string>();
      for (const line of text.split('\n')) {
        const w = line.slice(0, line.indexOf(' '));
        if (w && !w.includes('(')) set.add(w);
      }
      return set;
    }));

  /** The grammar file of a hint set (null when none of its words is in the dictionary: open vocabulary). */
  const grammarOf = (hints: SpeechHints) => {
    let g = grammars.get(hints.key);
    if (!g) {
      g = (async () => {
        const dict = await words();
        const known = (s: string) => s.toLowerCase().replace(/[^a-z' ]+/g, ' ').split(/\s+/).filter(Boolean);
        const phrases = [...new Set(hints.phrases.map((p) => known(p)).filter((ws) => ws.length > 0 && ws.every((w) => dict.has(w))).map((ws) => ws.join(' ')))];
        const vocabulary = [...new Set([...hints.words.flatMap(known), ...phrases.flatMap((p) => p.split(' '))].filter((w) => dict.has(w)))];
        if (!vocabulary.length) return null;
        const body = [
          '#JSGF V1.0;',
          'grammar agent;',
          `public <utterance> = ${phrases.length ? '<phrase> | ' : ''}<word>+ ;`,
          ...(phrases.length ? [`<phrase> = ${phrases.join(' | ')} ;`] : []),
          `<word> = ${vocabulary.join(' | ')} ;`,
        ].join('\n');
        const file = join(await workDir(), `g${grammars.size}.gram`);
        await writeFile(file, body);
        return file;
      })();
      g.catch(() => grammars.delete(hints.key));
      grammars.set(hints.key, g);
      // Bounded: one grammar per deployed artifact in use.
      if (grammars.size > 256) grammars.delete(grammars.keys().next().value!);
    }
    return g;
  };

  let seq = 0;
  return {
    name: 'pocketsphinx',
    // Its model (and so its dictionary and grammars) is US English.
    language: 'en-US',
    async transcribe(pcm: Int16Array, hints: SpeechHints): Promise<string> {
      const grammar = await grammarOf(hints);
      const wide = resample(pcm, 8000, 16000);
      const file = join(await workDir(), `u${process.pid}-${seq++}.raw`);
      await writeFile(file, Buffer.from(wide.buffer, wide.byteOffset, wide.byteLength));
      try {
        const args = [
          '-infile', file,
          '-hmm', join(model, 'en-us'),
          '-dict', dictPath,
          '-remove_noise', 'no',
          '-logfn', '/dev/null',
          ...(grammar ? ['-jsgf', grammar] : ['-lm', join(model, 'en-us.lm.bin')]),
        ];
        const out = await run(binary, args);
        return out.toString('utf8').split('\n').map((l) => l.trim()).filter(Boolean).join(' ');
      } finally {
        await rm(file, { force: true });
      }
    },
  };
}
