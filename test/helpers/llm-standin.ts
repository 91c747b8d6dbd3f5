/**
 * A local stand-in for an OpenAI-compatible Chat Completions server, on a free loopback port. It answers
 * `POST /v1/chat/completions` with a scripted reply, streamed (SSE chunks, several deltas; tool calls split
 * across chunks) when the request asks `stream: true`, else as one JSON body. A thin protocol stand-in: no
 * model, no validation beyond parsing the JSON body.
 */
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StandinToolCall {
  id?: string;
  name: string;
  /** An object (JSON-encoded by the stand-in) or the raw arguments string. */
  arguments?: unknown;
}

/** One answer: text and/or tool calls, or an HTTP error. */
export interface StandinRound {
  text?: string;
  toolCalls?: StandinToolCall[];
  /** Answer with this HTTP status and `body` instead (e.g. 500). */
  status?: number;
  body?: string;
  /** Wait this long before answering. */
  delayMs?: number;
  /** Cut the connection after this many text deltas (a streamed answer; a JSON one is cut halfway): a stream interrupted mid-reply. */
  breakAfter?: number;
  /** Answer 200 with this content type and body as they are (data that is not what the protocol says). */
  raw?: { type: string; body: string };
}

/**
 * The script: a list (request n gets round n; the last one repeats) or a function of the request body and
 * its index. Without a script every request gets `You said: <last user message>` (or `Hello from the
 * stand-in!` when there is none).
 */
export type StandinScript = StandinRound[] | ((body: any, index: number) => StandinRound | Promise<StandinRound>);

export interface LlmStandin {
  /** The API base URL, `http://127.0.0.1:<port>/v1`. */
  url: string;
  /** The parsed JSON bodies of the chat-completions requests, in arrival order. */
  requests: any[];
  /** The headers of those requests, same order. */
  headers: IncomingHttpHeaders[];
  close(): Promise<void>;
}

function defaultRound(body: any): StandinRound {
  const messages: any[] = Array.isArray(body?.messages) ? body.messages : [];
  const last = [...messages].reverse().find((m) => m?.role === 'user');
  return { text: last ? `You said: ${last.content}` : 'Hello from the stand-in!' };
}

/** Splits text into several deltas (word by word, keeping the spaces). */
function pieces(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : []);
}

function splitThree(s: string): string[] {
  const a = Math.floor(s.length / 3);
  const b = Math.floor((2 * s.length) / 3);
  return [s.slice(0, a), s.slice(a, b), s.slice(b)].filter((p) => p !== '');
}

function toolCallsOf(round: StandinRound) {
  return (round.toolCalls ?? []).map((c, i) => ({
    id: c.id ?? `call_${i + 1}`,
    name: c.name,
    arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments ?? {}),
  }));
}

export async function startLlmStandin(script?: StandinScript): Promise<LlmStandin> {
  const requests: any[] = [];
  const headers: IncomingHttpHeaders[] = [];

  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (req.method !== 'POST' || req.url?.split('?')[0] !== '/v1/chat/completions') {
      res.writeHead(404, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }));
      return;
    }
    let body: any;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'body is not JSON' } }));
      return;
    }
    const index = requests.length;
    requests.push(body);
    headers.push(req.headers);
    const round: StandinRound =
      typeof script === 'function'
        ? await script(body, index)
        : script && script.length > 0
          ? script[Math.min(index, script.length - 1)]
          : defaultRound(body);
    if (round.delayMs) await new Promise((r) => setTimeout(r, round.delayMs));
    if (res.destroyed) return;
    if (round.status && round.status >= 400) {
      res.writeHead(round.status, { 'content-type': 'application/json' });
      res.end(round.body ?? JSON.stringify({ error: { message: 'scripted failure', type: 'server_error' } }));
      return;
    }

    if (round.raw) {
      res.writeHead(200, { 'content-type': round.raw.type });
      res.end(round.raw.body);
      return;
    }

    const id = `chatcmpl-standin-${index}`;
    const model = body?.model ?? 'standin';
    const calls = toolCallsOf(round);
    const finish = calls.length > 0 ? 'tool_calls' : 'stop';

    if (!body?.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      const answer = JSON.stringify({
        id,
        object: 'chat.completion',
        model,
        choices: [
          {
            index: 0,
            message: {
              role: 'assistant',
              content: round.text ?? null,
              ...(calls.length > 0
                ? { tool_calls: calls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } })) }
                : {}),
            },
            finish_reason: finish,
          },
        ],
      });
      if (round.breakAfter !== undefined) {
        res.write(answer.slice(0, answer.length >> 1), () => res.socket?.destroy());
        return;
      }
      res.end(answer);
      return;
    }

    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (delta: unknown, finishReason: string | null = null) =>
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', model, choices: [{ index: 0, delta, finish_reason: finishReason }] })}\n\n`,
      );
    send({ role: 'assistant', content: '' });
    const deltas = pieces(round.text ?? '');
    if (round.breakAfter !== undefined) {
      for (const piece of deltas.slice(0, round.breakAfter)) send({ content: piece });
      // Destroyed, not ended, once what was written is out: the chunked body never finishes, as when a model
      // server dies mid-reply (destroyed at once, the socket would drop the response it has not sent yet).
      res.write(':\n', () => res.socket?.destroy());
      return;
    }
    for (const piece of deltas) send({ content: piece });
    calls.forEach((c, i) => {
      // The first delta names the call, the arguments follow in pieces (as OpenAI streams them).
      send({ tool_calls: [{ index: i, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] });
      for (const part of splitThree(c.arguments)) send({ tool_calls: [{ index: i, function: { arguments: part } }] });
    });
    send({}, finish);
    res.write('data: [DONE]\n\n');
    res.end();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    requests,
    headers,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
