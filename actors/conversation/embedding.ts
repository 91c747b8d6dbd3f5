/**
 * Embeddings for semantic search over conversations. One interface, two implementations: the offline
 * default (feature hashing of stemmed terms and term bigrams, nothing to install) and an adapter for any
 * OpenAI-compatible `POST {base}/embeddings` endpoint. Vectors are L2-normalised and stored quantised to
 * int8 (base64), so a dot product of two stored vectors is their cosine similarity (up to rounding).
 */
import { tokenize } from '../responder/text.js';

export interface Embedder {
  /** Names the vector space: vectors of different models are never compared. */
  readonly model: string;
  /** One unit vector per text, in order. */
  embed(texts: string[]): Promise<Float32Array[]>;
  /**
   * The vector of a text given its analysed terms (`tokenize`), when the embedder works from terms alone:
   * the conversation indexer then keeps term counts per conversation and embeds a growing transcript
   * without analysing it again at every turn.
   */
  fromTerms?(terms: string[]): Float32Array;
}

/** Dimension of the offline embedder. */
export const OFFLINE_DIMENSION = 128;

/** FNV-1a 32-bit: fast, stable across processes and releases (the stored vectors depend on it). */
function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/**
 * The offline embedder: each stemmed, stop-word-free term (weight 1) and each pair of adjacent terms
 * (weight 0.5) is hashed to a signed dimension; counts are damped with 1 + log(tf). Texts that share
 * words, or forms of them ("parking"/"park"), land close together.
 */
export function createOfflineEmbedder(dimension = OFFLINE_DIMENSION): Embedder {
  return {
    model: `offline-hash-${dimension}`,
    async embed(texts) {
      return texts.map((text) => embedTerms(tokenize(text), dimension));
    },
    fromTerms: (terms) => embedTerms(terms, dimension),
  };
}

/** The offline vector of a text's analysed terms, in order. */
export function embedTerms(terms: string[], dimension = OFFLINE_DIMENSION): Float32Array {
  const counts = new Map<string, number>();
  for (let i = 0; i < terms.length; i++) {
    counts.set(terms[i], (counts.get(terms[i]) ?? 0) + 1);
    if (i > 0) {
      const pair = `${terms[i - 1]} ${terms[i]}`;
      counts.set(pair, (counts.get(pair) ?? 0) + 1);
    }
  }
  const v = new Float32Array(dimension);
  for (const [feature, count] of counts) {
    const h = fnv1a(feature);
    const weight = (feature.includes(' ') ? 0.5 : 1) * (1 + Math.log(count));
    v[h % dimension] += h & 0x80000000 ? -weight : weight;
  }
  return normalise(v);
}

export function normalise(v: Float32Array): Float32Array {
  let sum = 0;
  for (const x of v) sum += x * x;
  const norm = Math.sqrt(sum);
  if (norm > 0) for (let i = 0; i < v.length; i++) v[i] /= norm;
  return v;
}

export interface OpenAiEmbedderOptions {
  /** The API base, e.g. `https://api.openai.com/v1` (the adapter appends `/embeddings`). */
  baseUrl: string;
  apiKey?: string;
  model: string;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** The OpenAI-compatible adapter: `POST {baseUrl}/embeddings {model, input: [...]}` → `data[i].embedding`. */
export function createOpenAiEmbedder(options: OpenAiEmbedderOptions): Embedder {
  const doFetch = options.fetch ?? fetch;
  const url = `${options.baseUrl.replace(/\/+$/, '')}/embeddings`;
  return {
    model: `openai:${options.model}`,
    async embed(texts) {
      if (texts.length === 0) return [];
      const res = await doFetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: options.model, input: texts }),
        signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
      });
      if (!res.ok) throw new Error(`embeddings endpoint answered ${res.status}`);
      const body = (await res.json()) as { data?: Array<{ index?: number; embedding?: unknown }> };
      const data = Array.isArray(body.data) ? body.data : [];
      const out: Float32Array[] = new Array(texts.length);
      data.forEach((item, i) => {
        const at = typeof item.index === 'number' ? item.index : i;
        if (!Array.isArray(item.embedding) || !item.embedding.every((x) => typeof x === 'number')) {
          throw new Error('embeddings endpoint answered a malformed embedding');
        }
        out[at] = normalise(Float32Array.from(item.embedding as number[]));
      });
      for (let i = 0; i < texts.length; i++) if (!out[i]) throw new Error('embeddings endpoint answered too few embeddings');
      return out;
    },
  };
}

/**
 * The embedder the environment asks for: the OpenAI-compatible adapter when `EMBEDDINGS_BASE_URL` is set
 * (with `EMBEDDINGS_API_KEY` and `EMBEDDINGS_MODEL`, default `text-embedding-3-small`), else the offline one.
 * A started platform has checked the URL (platform/config.ts: an http or https URL, trimmed, blank as unset).
 */
export function createEmbedderFromEnv(env: Record<string, string | undefined> = process.env): Embedder {
  const baseUrl = env.EMBEDDINGS_BASE_URL?.trim();
  if (!baseUrl) return createOfflineEmbedder();
  return createOpenAiEmbedder({
    baseUrl,
    apiKey: env.EMBEDDINGS_API_KEY?.trim() || undefined,
    model: env.EMBEDDINGS_MODEL?.trim() || 'text-embedding-3-small',
  });
}

/** A unit vector as stored: int8 per dimension (x × 127), base64. */
export function quantise(v: Float32Array): string {
  const bytes = new Int8Array(v.length);
  for (let i = 0; i < v.length; i++) bytes[i] = Math.max(-127, Math.min(127, Math.round(v[i] * 127)));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
}

/** Decodes a stored vector into its int8 components. */
export function dequantise(stored: string): Int8Array {
  const buf = Buffer.from(stored, 'base64');
  return new Int8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** Cosine similarity of a query vector with a stored one (in [-1, 1]); 0 when the dimensions differ. */
export function similarity(query: Float32Array, stored: Int8Array): number {
  if (query.length !== stored.length) return 0;
  let dot = 0;
  for (let i = 0; i < query.length; i++) dot += query[i] * stored[i];
  return dot / 127;
}
