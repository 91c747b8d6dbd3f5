import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { admin } from './tenants.js';
import { client } from './http.js';
import type { Platform } from './platform.js';

/** One request a receiver got. */
export interface Received {
  at: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * What a receiver answers: a status, headers, a connection dropped without an answer, or (`stall`) a status and
 * the first byte of a body that never ends.
 */
export type Answer = { status: number; headers?: Record<string, string> } | 'drop' | { delayMs: number; status: number } | { stall: true; status: number };

/**
 * A real HTTP receiver on loopback that records every request and answers from a script (then 200).
 * `waitFor(n)` resolves once n requests arrived.
 */
export interface Receiver {
  url: string;
  port: number;
  received: Received[];
  /** Answers for the next requests, in order; after them, `fallback`. */
  script: Answer[];
  fallback: Answer;
  waitFor(n: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(opts: { script?: Answer[]; fallback?: Answer; host?: string } = {}): Promise<Receiver> {
  const received: Received[] = [];
  const waiters: Array<{ n: number; resolve: () => void }> = [];
  const receiver = { script: [...(opts.script ?? [])], fallback: opts.fallback ?? { status: 200 } } as Receiver;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push({ at: Date.now(), method: req.method!, path: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      for (const w of waiters.splice(0)) (received.length >= w.n ? w.resolve : () => waiters.push(w))();
      const answer = receiver.script.shift() ?? receiver.fallback;
      if (answer === 'drop') return req.socket.destroy();
      const send = () => {
        res.writeHead(answer.status, { 'content-type': 'text/plain', ...('headers' in answer ? answer.headers : {}) });
        if ('stall' in answer) res.write('o');
        else res.end('ok');
      };
      if ('delayMs' in answer) setTimeout(send, answer.delayMs);
      else send();
    });
  });
  const host = opts.host ?? '127.0.0.1';
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const port = (server.address() as AddressInfo).port;
  return Object.assign(receiver, {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/hook`,
    port,
    received,
    waitFor(n: number, timeoutMs = 20_000) {
      if (received.length >= n) return Promise.resolve(received.slice());
      return new Promise<Received[]>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`receiver got ${received.length} of ${n} requests`)), timeoutMs);
        waiters.push({ n, resolve: () => (clearTimeout(timer), resolve(received.slice())) });
      });
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}

/** Creates an account and an `alerts` key for it; returns the account id and a client bound to the key. */
export async function alertsTenant(p: Platform, name = 'Acme'): Promise<{ accountId: string; key: string; api: ReturnType<typeof client> }> {
  const a = admin(p);
  const account = await a('POST', '/accounts', { name });
  if (account.status !== 201) throw new Error(`account: ${account.status} ${account.text}`);
  const key = await a('POST', '/keys', { account_id: account.body.id, scope: 'alerts' });
  if (key.status !== 201) throw new Error(`key: ${key.status} ${key.text}`);
  return { accountId: account.body.id, key: key.body.key, api: client(p.edge, { 'x-api-key': key.body.key }) };
}
