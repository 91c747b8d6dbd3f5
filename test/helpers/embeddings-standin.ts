/**
 * A local stand-in for an OpenAI-compatible embeddings server (`POST /v1/embeddings`) on a free loopback
 * port. Its "model" embeds a text as counts of a few fixed keywords, so tests know which texts are close.
 * A thin protocol stand-in: no model, no validation beyond parsing the JSON body.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export const STANDIN_KEYWORDS = ['park', 'invoice', 'refund', 'open', 'delivery', 'password'];

export interface EmbeddingsStandin {
  url: string;
  requests: any[];
  headers: IncomingHttpHeaders[];
  /** Answer with this status instead, while set. */
  failWith: number | null;
  close(): Promise<void>;
}

export function standinVector(text: string): number[] {
  const lower = text.toLowerCase();
  // One extra dimension keeps texts without keywords from being the zero vector.
  return [...STANDIN_KEYWORDS.map((k) => lower.split(k).length - 1), 0.1];
}

export async function startEmbeddingsStandin(): Promise<EmbeddingsStandin> {
  const state: EmbeddingsStandin = { url: '', requests: [], headers: [], failWith: null, close: async () => undefined };
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/embeddings') {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(raw);
      state.requests.push(body);
      state.headers.push(req.headers);
      if (state.failWith) {
        res.writeHead(state.failWith, { 'content-type': 'application/json' }).end('{"error":{"message":"failing on purpose"}}');
        return;
      }
      const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          object: 'list',
          model: body.model,
          data: inputs.map((text, index) => ({ object: 'embedding', index, embedding: standinVector(text) })).reverse(),
          usage: { prompt_tokens: 0, total_tokens: 0 },
        }),
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  return state;
}
