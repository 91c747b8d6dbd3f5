/**
 * One behaviour suite for both transports (`actors/transport`): in-process, and NATS against a real
 * nats-server with separate connections for the two sides, so every message crosses the server.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';
import fc from 'fast-check';
import t, { type Test } from 'tap';
import { MessageChannel, type TransferListItem } from 'node:worker_threads';
import {
  connectNatsTransport,
  createInprocTransport,
  portTransport,
  servePort,
  TransportError,
  type Handler,
  type Transport,
} from '../actors/transport/mod.js';
import { isLiteralSubject, isSubscriptionSubject, subjectMatches, SubjectTree } from '../actors/transport/subject.js';
import { natsAvailable, startNats } from './helpers/nats.js';

/** A requesting side and a serving side; the same transport in process. */
type Pair = () => Promise<{ client: Transport; server: Transport }>;

const enc = (s: string) => new TextEncoder().encode(s);
const dec = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `check` holds, polling; fails the wait after `ms`. */
async function until(check: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('condition not reached in time');
    await sleep(5);
  }
}

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return 'resolved';
  } catch (err) {
    return err instanceof TransportError ? err.code : `other: ${String(err)}`;
  }
}

function behaviour(t: Test, open: Pair): void {
  const pair = async (t: Test) => {
    const p = await open();
    t.teardown(async () => {
      await p.client.close();
      await p.server.close();
    });
    return p;
  };

  t.test('request and reply', async (t) => {
    const { client, server } = await pair(t);
    const seen: Array<{ subject: string; hasRespond: boolean }> = [];
    server.subscribe('svc.echo', (data, respond, subject) => {
      seen.push({ subject, hasRespond: respond !== null });
      respond?.(enc(`echo:${dec(data)}`));
    });
    await server.flush();
    t.equal(dec(await client.request('svc.echo', enc('hi'), 5000)), 'echo:hi');
    client.publish('svc.echo', enc('one-way'));
    await client.flush();
    await until(() => seen.length === 2);
    t.same(seen, [
      { subject: 'svc.echo', hasRespond: true },
      { subject: 'svc.echo', hasRespond: false },
    ]);
  });

  t.test('an answer sent later, and the first answer wins', async (t) => {
    const { client, server } = await pair(t);
    server.subscribe('svc.late', (_d, respond) => setTimeout(() => respond?.(enc('late')), 50));
    server.subscribe('svc.two', (_d, respond) => respond?.(enc('a')));
    server.subscribe('svc.two', (_d, respond) => setTimeout(() => respond?.(enc('b')), 20));
    await server.flush();
    t.equal(dec(await client.request('svc.late', enc(''), 5000)), 'late');
    t.equal(dec(await client.request('svc.two', enc(''), 5000)), 'a');
  });

  t.test('no responders', async (t) => {
    const { client } = await pair(t);
    // The timeout is far beyond the test's own: only an immediate NO_RESPONDERS lets it pass.
    const error = await client.request('nobody.home', enc('?'), 600_000).catch((e: unknown) => e);
    t.type(error, TransportError);
    t.equal((error as TransportError).code, 'NO_RESPONDERS');
  });

  t.test('timeout', async (t) => {
    const { client, server } = await pair(t);
    server.subscribe('svc.silent', () => {});
    await server.flush();
    t.equal(await code(client.request('svc.silent', enc(''), 100)), 'TIMEOUT');
  });

  t.test('delivery is never inside the sender’s call', async (t) => {
    const { client, server } = await pair(t);
    let inside = false;
    let calledInside = 0;
    let calls = 0;
    server.subscribe('svc.reentry', (_d, respond) => {
      calls++;
      if (inside) calledInside++;
      respond?.(enc('ok'));
    });
    await server.flush();
    inside = true;
    client.publish('svc.reentry', enc(''));
    const answer = client.request('svc.reentry', enc(''), 5000);
    inside = false;
    await answer;
    await until(() => calls === 2);
    t.equal(calledInside, 0);
  });

  t.test('publish reaches every subscriber, in order', async (t) => {
    const { client, server } = await pair(t);
    const got: string[][] = [[], [], []];
    for (const list of got) server.subscribe('feed.news', (d) => list.push(dec(d)));
    await server.flush();
    const sent = Array.from({ length: 50 }, (_, i) => `m${i}`);
    for (const m of sent) client.publish('feed.news', enc(m));
    await client.flush();
    await until(() => got.every((l) => l.length === sent.length));
    for (const list of got) t.same(list, sent);
  });

  t.test('queue groups: each message once per group', async (t) => {
    const { client, server } = await pair(t);
    const counts = new Map<string, string[]>();
    const member = (name: string): Handler => {
      counts.set(name, []);
      return (d, respond) => {
        counts.get(name)!.push(dec(d));
        respond?.(enc(name));
      };
    };
    for (const n of ['g1', 'g2', 'g3']) server.subscribe('work.items', member(n), { queue: 'g' });
    for (const n of ['h1', 'h2']) server.subscribe('work.items', member(n), { queue: 'h' });
    server.subscribe('work.items', member('plain'));
    await server.flush();
    const sent = Array.from({ length: 60 }, (_, i) => `w${i}`);
    for (const m of sent) client.publish('work.items', enc(m));
    await client.flush();
    const group = (prefix: string) => [...counts].filter(([n]) => n.startsWith(prefix)).flatMap(([, l]) => l);
    await until(() => group('g').length === 60 && group('h').length === 60 && counts.get('plain')!.length === 60);
    await sleep(50);
    t.same(group('g').sort(), [...sent].sort(), 'group g got every message exactly once');
    t.same(group('h').sort(), [...sent].sort(), 'group h got every message exactly once');
    t.same(counts.get('plain'), sent, 'a plain subscriber gets all');
    t.ok(['g1', 'g2', 'g3'].filter((n) => counts.get(n)!.length > 0).length > 1, 'the group spreads the work');

    for (const l of counts.values()) l.length = 0;
    const queueOnly = new Map<string, number>();
    for (const n of ['q1', 'q2']) {
      server.subscribe('work.one', () => queueOnly.set(n, (queueOnly.get(n) ?? 0) + 1), { queue: 'q' });
    }
    server.subscribe('work.one', (_d, respond) => respond?.(enc('answered')));
    await server.flush();
    t.equal(dec(await client.request('work.one', enc(''), 5000)), 'answered');
    await sleep(50);
    t.equal([...queueOnly.values()].reduce((a, b) => a + b, 0), 1, 'a request reaches one member of a group');
  });

  t.test('wildcards', async (t) => {
    const { client, server } = await pair(t);
    const patterns = ['a.*.c', 'a.>', '*.b.*', 'a.b', '>', 'a.*'];
    const got = new Map<string, string[]>(patterns.map((p) => [p, []]));
    for (const p of patterns) server.subscribe(p, (_d, _r, subject) => got.get(p)!.push(subject));
    await server.flush();
    const subjects = ['a.b.c', 'a.b', 'a.x.c', 'x.b.y', 'a', 'a.b.c.d', 'b.b.b'];
    for (const s of subjects) client.publish(s, enc(s));
    await client.flush();
    const expected = new Map(patterns.map((p) => [p, subjects.filter((s) => subjectMatches(p, s))]));
    const total = [...expected.values()].reduce((n, l) => n + l.length, 0);
    await until(() => [...got.values()].reduce((n, l) => n + l.length, 0) === total);
    t.same(Object.fromEntries(got), {
      'a.*.c': ['a.b.c', 'a.x.c'],
      'a.>': ['a.b.c', 'a.b', 'a.x.c', 'a.b.c.d'],
      '*.b.*': ['a.b.c', 'x.b.y', 'b.b.b'],
      'a.b': ['a.b'],
      '>': subjects,
      'a.*': ['a.b'],
    });
  });

  t.test('unsubscribe', async (t) => {
    const { client, server } = await pair(t);
    const got: string[] = [];
    const sub = server.subscribe('svc.gone', (d, respond) => {
      got.push(dec(d));
      respond?.(enc('here'));
    });
    await server.flush();
    t.equal(dec(await client.request('svc.gone', enc('before'), 5000)), 'here');
    sub.unsubscribe();
    sub.unsubscribe();
    await server.flush();
    client.publish('svc.gone', enc('after'));
    await client.flush();
    t.equal(await code(client.request('svc.gone', enc('after'), 600_000)), 'NO_RESPONDERS');
    await sleep(50);
    t.same(got, ['before']);
  });

  t.test('a subject used before a subscription changes reaches the subscribers of the moment', async (t) => {
    const { client, server } = await pair(t);
    const got: string[] = [];
    server.subscribe('svc.often', (d) => got.push(`exact ${dec(d)}`));
    await server.flush();
    client.publish('svc.often', enc('1'));
    await client.flush();
    await until(() => got.length === 1);
    const wide = server.subscribe('svc.*', (d) => got.push(`wide ${dec(d)}`));
    await server.flush();
    client.publish('svc.often', enc('2'));
    await client.flush();
    await until(() => got.length === 3);
    wide.unsubscribe();
    await server.flush();
    client.publish('svc.often', enc('3'));
    await client.flush();
    await until(() => got.length === 4);
    await sleep(50);
    t.same(got.sort(), ['exact 1', 'exact 2', 'exact 3', 'wide 2']);
  });

  t.test('close', async (t) => {
    const { client, server } = await pair(t);
    const got: string[] = [];
    server.subscribe('svc.close', (d) => got.push(dec(d)));
    server.subscribe('svc.hang', () => {});
    await server.flush();
    const pending = code(client.request('svc.hang', enc(''), 600_000));
    for (let i = 0; i < 20; i++) client.publish('svc.close', enc(`c${i}`));
    await client.close();
    await client.close();
    t.equal(await pending, 'CLOSED', 'a pending request fails with CLOSED');
    await until(() => got.length === 20);
    t.same(got, Array.from({ length: 20 }, (_, i) => `c${i}`), 'what was sent before close arrives');
    t.equal(await code(client.request('svc.close', enc(''), 1000)), 'CLOSED');
    t.equal(await code(client.flush()), 'CLOSED');
    t.throws(() => client.publish('svc.close', enc('')), { code: 'CLOSED' });
    t.throws(() => client.subscribe('svc.close', () => {}), { code: 'CLOSED' });
  });

  t.test('large payloads', async (t) => {
    const { client, server } = await pair(t);
    server.subscribe('svc.big', (d, respond) => respond?.(d));
    await server.flush();
    const big = randomBytes(256 * 1024);
    const answer = await client.request('svc.big', big, 10_000);
    t.equal(answer.length, big.length);
    t.ok(Buffer.from(answer).equals(big), 'the bytes come back unchanged');
  });

  t.test('many concurrent requests', async (t) => {
    const { client, server } = await pair(t);
    const handler: Handler = (d, respond) => {
      const n = Number(dec(d));
      // Answer out of order: odd numbers a little later.
      if (n % 2) setTimeout(() => respond?.(enc(String(n * 2))), 1);
      else respond?.(enc(String(n * 2)));
    };
    server.subscribe('svc.double', handler, { queue: 'doublers' });
    server.subscribe('svc.double', handler, { queue: 'doublers' });
    await server.flush();
    const n = 2000;
    const answers = await Promise.all(
      Array.from({ length: n }, (_, i) => client.request('svc.double', enc(String(i)), 30_000)),
    );
    t.same(
      answers.map((a) => Number(dec(a))),
      Array.from({ length: n }, (_, i) => i * 2),
    );
  });
}

t.test('subject syntax and matching', async (t) => {
  t.ok(isLiteralSubject('a.b.c'));
  for (const bad of ['', 'a..b', '.a', 'a.', 'a.*', 'a.>', 'a b', '*', '>.a', 'a.\t', 'a.\u00a0']) t.notOk(isLiteralSubject(bad), bad);
  for (const good of ['a*', 'a.b>', '*a.>b', 'ä.b']) t.ok(isLiteralSubject(good), good);
  // Any string: valid exactly when its dot-separated tokens are non-empty, free of whitespace, and not a wildcard.
  const byTokens = (s: string) => s.split('.').every((tok) => tok.length > 0 && tok !== '*' && tok !== '>' && !/\s/.test(tok));
  fc.assert(
    fc.property(fc.array(fc.constantFrom('a', 'b', '.', '*', '>', ' ', '\t', '\n', '\u2028'), { maxLength: 8 }).map((cs) => cs.join('')), (s) => isLiteralSubject(s) === byTokens(s)),
    { numRuns: 2000 },
  );
  t.ok(isSubscriptionSubject('a.*.>'));
  for (const bad of ['', 'a.>.b', 'a..b', 'a b']) t.notOk(isSubscriptionSubject(bad), bad);

  // The tree must agree with the plain matcher for any set of patterns and subjects.
  const token = fc.constantFrom('a', 'b', 'c');
  const literal = fc.array(token, { minLength: 1, maxLength: 4 }).map((l) => l.join('.'));
  const pattern = fc
    .tuple(fc.array(fc.constantFrom('a', 'b', '*'), { minLength: 0, maxLength: 3 }), fc.constantFrom('', 'a', '*', '>'))
    .map(([head, last]) => [...head, last].filter(Boolean).join('.'))
    .filter((p) => p.length > 0);
  fc.assert(
    fc.property(fc.array(pattern, { maxLength: 8 }), fc.array(literal, { maxLength: 8 }), fc.nat(8), (ps, ss, drop) => {
      const tree = new SubjectTree<number>();
      ps.forEach((p, i) => tree.add(p, i));
      const removed = new Set(ps.map((_, i) => i).filter((i) => i % (drop + 2) === 0));
      for (const i of removed) tree.remove(ps[i], i);
      for (const s of ss) {
        const want = ps.map((p, i) => (!removed.has(i) && subjectMatches(p, s) ? i : -1)).filter((i) => i >= 0);
        if (JSON.stringify(tree.match(s).sort((x, y) => x - y)) !== JSON.stringify(want)) return false;
      }
      return true;
    }),
  );
});

t.test('in-process', async (t) => {
  t.equal(createInprocTransport().kind, 'inproc');
  behaviour(t, async () => {
    const transport = createInprocTransport();
    return { client: transport, server: transport };
  });
});

t.test('over a message port (the edge thread)', async (t) => {
  /** A port transport whose other end an in-process transport serves: what the edge thread and the main thread hold. */
  const threadSide = (inner: Transport) => {
    const { port1, port2 } = new MessageChannel();
    servePort(inner, port1);
    return portTransport(port2);
  };
  t.equal(threadSide(createInprocTransport()).kind, 'thread');
  t.test('the thread asks, the main thread serves', async (t) => {
    behaviour(t, async () => {
      const server = createInprocTransport();
      return { client: threadSide(server), server };
    });
  });
  t.test('the main thread asks, the thread serves', async (t) => {
    behaviour(t, async () => {
      const client = createInprocTransport();
      return { client, server: threadSide(client) };
    });
  });
  t.test('two ports of one main thread', async (t) => {
    behaviour(t, async () => {
      const inner = createInprocTransport();
      const server = threadSide(inner);
      // The main thread's own transport closes last (a request still pending there keeps its timer until then).
      const close = server.close.bind(server);
      server.close = async () => {
        await close();
        await inner.close();
      };
      return { client: threadSide(inner), server };
    });
  });
  t.test('what one turn of the event loop sends goes in one message, its payloads in one buffer', async (t) => {
    const inner = createInprocTransport();
    inner.subscribe('svc.echo', (d, respond) => respond?.(d));
    const { port1, port2 } = new MessageChannel();
    const posted: Array<[frames: number, transferred: number]> = [];
    const post = port2.postMessage.bind(port2);
    port2.postMessage = (message: [unknown[], ...unknown[]], transfer?: readonly TransferListItem[]) => {
      posted.push([message[0].length, transfer?.length ?? 0]);
      post(message, transfer);
    };
    servePort(inner, port1);
    const client = portTransport(port2);
    t.teardown(() => client.close());
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => client.request('svc.echo', enc(String(i)), 5000)));
    t.same(answers.map(dec), Array.from({ length: 50 }, (_, i) => String(i)));
    t.same(posted, [[50, 1]], 'fifty asks made in one turn: one message, their payloads in one buffer');
  });
  t.test('arrived: each side runs it before it handles the frames of a post from the other side', async (t) => {
    const log: string[] = [];
    const inner = createInprocTransport();
    inner.subscribe('svc.echo', (d, respond) => {
      log.push('main handles');
      respond?.(d);
    });
    const { port1, port2 } = new MessageChannel();
    servePort(inner, port1, undefined, () => log.push('main: arrived'));
    const client = portTransport(port2, () => log.push('thread: arrived'));
    t.teardown(() => client.close());
    await Promise.all([0, 1, 2].map((i) => client.request('svc.echo', enc(String(i)), 5000).then(() => log.push('thread has the answer'))));
    t.same(log, ['main: arrived', 'main handles', 'main handles', 'main handles', 'thread: arrived', 'thread has the answer', 'thread has the answer', 'thread has the answer'], 'once per post, before its frames');
  });
  t.test('a payload that is a view of a larger buffer crosses as its own bytes, and the sender keeps it', async (t) => {
    const inner = createInprocTransport();
    let received: Uint8Array | null = null;
    inner.subscribe('svc.view', (d, respond) => {
      received = d;
      respond?.(d);
    });
    const client = threadSide(inner);
    t.teardown(() => client.close());
    const big = new Uint8Array(64 * 1024).fill(7);
    const view = big.subarray(100, 110);
    const answer = await client.request('svc.view', view, 5000);
    t.equal(received!.byteLength, 10);
    // The bytes arrive in the post's own buffer (16 KiB to start, larger only for larger posts), not the sender's.
    t.ok(received!.buffer.byteLength <= 16 * 1024, 'ten bytes crossed, not the 64 KiB buffer they sit in');
    t.same([...answer], Array(10).fill(7));
    t.equal(view.byteLength, 10, 'the sender’s view is not detached');
    t.equal(big.buffer.byteLength, 64 * 1024);
  });
  t.test('a throwing handler is reported and the rest of its batch still delivered', async (t) => {
    // In a child process: the throw must reach process-level 'uncaughtException'.
    const script = `
      import { MessageChannel } from 'node:worker_threads';
      import { createInprocTransport, portTransport, servePort } from ${JSON.stringify(new URL('../actors/transport/mod.js', import.meta.url).href)};
      const thrown = [];
      process.on('uncaughtException', (err) => thrown.push(err.message));
      const inner = createInprocTransport();
      const { port1, port2 } = new MessageChannel();
      servePort(inner, port1);
      const thread = portTransport(port2);
      thread.subscribe('boom', () => { throw new Error('handler bug'); });
      thread.subscribe('echo', (d, respond) => respond(d));
      await thread.flush();
      inner.publish('boom', new Uint8Array());
      const answer = await inner.request('echo', new TextEncoder().encode('still here'), 5000);
      console.log(JSON.stringify({ thrown, answer: new TextDecoder().decode(answer) }));
      await thread.close();
      await inner.close();
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    t.same(JSON.parse(stdout), { thrown: ['handler bug'], answer: 'still here' });
  });
  t.test('a subscription the thread drops mid-request leaves the asker to its timeout', async (t) => {
    const inner = createInprocTransport();
    const client = threadSide(inner);
    t.teardown(() => client.close());
    const sub = client.subscribe('svc.slow', () => {});
    await client.flush();
    const asked = code(inner.request('svc.slow', enc(''), 200));
    sub.unsubscribe();
    t.equal(await asked, 'TIMEOUT');
  });
});

t.test('nats', { skip: natsAvailable() ? false : 'nats-server is not installed' }, async (t) => {
  const nats = await startNats();
  t.teardown(() => nats.stop());

  t.test('a throwing handler is reported and the connection keeps serving', async (t) => {
    // In a child process: the throw must reach process-level 'uncaughtException'.
    const script = `
      import { connectNatsTransport } from ${JSON.stringify(new URL('../actors/transport/mod.js', import.meta.url).href)};
      const thrown = [];
      process.on('uncaughtException', (err) => thrown.push(err.message));
      const tr = await connectNatsTransport(${JSON.stringify(nats.url)});
      tr.subscribe('boom', () => { throw new Error('handler bug'); });
      tr.subscribe('echo', (d, respond) => respond(d));
      await tr.flush();
      tr.publish('boom', new Uint8Array());
      const answer = await tr.request('echo', new TextEncoder().encode('still here'), 5000);
      console.log(JSON.stringify({ thrown, answer: new TextDecoder().decode(answer) }));
      await tr.close();
    `;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script]);
    t.same(JSON.parse(stdout), { thrown: ['handler bug'], answer: 'still here' });
  });
  t.test('what one turn of the event loop sends goes out in one write', async (t) => {
    // A TCP proxy in a child process (so that it reads as the bytes arrive, on its own core) between the
    // asking transport and nats-server; it reports each chunk it read from the transport that holds an ask.
    const script = `
      import net from 'node:net';
      const server = net.createServer((client) => {
        const upstream = net.connect(${nats.port}, '127.0.0.1');
        client.on('data', (chunk) => {
          const asks = chunk.toString('latin1').split('svc.burst').length - 1;
          if (asks) console.log(asks);
          upstream.write(chunk);
        });
        upstream.pipe(client);
        client.on('close', () => upstream.destroy());
        upstream.on('close', () => client.destroy());
      });
      server.listen(0, '127.0.0.1', () => console.log('port ' + server.address().port));
    `;
    const proxy = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    t.teardown(() => void proxy.kill());
    let out = '';
    proxy.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    await until(() => /port \d+\n/.test(out));
    const port = Number(/port (\d+)/.exec(out)![1]);

    const server = await connectNatsTransport(nats.url);
    const client = await connectNatsTransport(`nats://127.0.0.1:${port}`);
    t.teardown(async () => {
      await client.close();
      await server.close();
    });
    server.subscribe('svc.burst', (d, respond) => respond?.(d));
    await server.flush();
    await client.flush();

    // Twenty asks from twenty callbacks of one turn of the loop (as an edge asks from the HTTP requests one
    // read brought in), a millisecond apart: written as each callback ended, the proxy would read them apart.
    const n = 20;
    const answers = await new Promise<Promise<Uint8Array>[]>((resolve) => {
      const asked: Promise<Uint8Array>[] = [];
      for (let i = 0; i < n; i++)
        setImmediate(() => {
          asked.push(client.request('svc.burst', enc(String(i)), 5000));
          const until = performance.now() + 1;
          while (performance.now() < until);
          if (asked.length === n) resolve(asked);
        });
    });
    t.same((await Promise.all(answers)).map(dec), Array.from({ length: n }, (_, i) => String(i)), 'every ask answered');
    await until(() => out.split('\n').slice(1).filter(Boolean).reduce((sum, l) => sum + Number(l), 0) === n);
    const chunks = out.split('\n').slice(1).filter(Boolean).map(Number);
    t.equal(chunks.length, 1, `the ${n} asks arrive in one read (chunks: ${chunks.join(', ')})`);
  });

  t.test('arrived: runs before the handlers of what one socket read brought, and before an answer resolves', async (t) => {
    const log: string[] = [];
    const server = await connectNatsTransport(nats.url, { arrived: () => log.push('server: arrived') });
    const client = await connectNatsTransport(nats.url, { arrived: () => log.push('client: arrived') });
    t.teardown(async () => {
      await client.close();
      await server.close();
    });
    server.subscribe('svc.arrived', (d, respond) => {
      log.push('server handles');
      respond?.(d);
    });
    await server.flush();
    await client.flush();
    const n = 20;
    // Asked in one turn: one write, one read at the server (as the test above shows), one reply read back.
    await Promise.all(Array.from({ length: n }, (_, i) => client.request('svc.arrived', enc(String(i)), 5000).then(() => log.push('client has the answer'))));
    t.equal(log[0], 'server: arrived', 'before the first handler');
    t.equal(log.indexOf('client: arrived') < log.indexOf('client has the answer'), true, 'before the first answer resolves');
    const serverSide = log.filter((l) => l.startsWith('server'));
    t.equal(serverSide.filter((l) => l === 'server handles').length, n);
    t.ok(serverSide.filter((l) => l === 'server: arrived').length < n, 'not once per message, once per read');
    for (const side of ['server', 'client']) {
      const first = log.findIndex((l) => l.startsWith(side));
      t.equal(log[first], `${side}: arrived`, `${side}: nothing handled before it`);
    }
  });

  t.test('a reply given while the answering side closes still reaches the asker', async (t) => {
    const server = await connectNatsTransport(nats.url);
    const client = await connectNatsTransport(nats.url);
    t.teardown(() => client.close());
    let closing: Promise<void> | undefined;
    server.subscribe('svc.closing', (d, respond) => {
      // The drain has begun: nats.js stops taking messages once the subscriptions have drained.
      closing = server.close();
      respond?.(d);
      server.publish('feed.closing', d);
    });
    const published: string[] = [];
    client.subscribe('feed.closing', (d) => published.push(dec(d)));
    await server.flush();
    await client.flush();
    t.equal(dec(await client.request('svc.closing', enc('bye'), 5000)), 'bye');
    await closing;
    await until(() => published.length === 1);
    t.same(published, ['bye'], 'a message published while closing is sent too');
  });

  t.test('a payload over the server’s max_payload fails its sender at once', async (t) => {
    const tr = await connectNatsTransport(nats.url);
    t.teardown(() => tr.close());
    tr.subscribe('svc.big', (d, respond) => respond?.(d));
    await tr.flush();
    const max = tr.connection.info!.max_payload;
    const tooBig = new Uint8Array(max + 1);
    t.throws(() => tr.publish('svc.big', tooBig), /max_payload/);
    await t.rejects(tr.request('svc.big', tooBig, 600_000), /max_payload/);
    // The connection goes on serving.
    t.equal((await tr.request('svc.big', new Uint8Array(max - 1024), 10_000)).length, max - 1024);
  });

  const probe = await connectNatsTransport(nats.url);
  t.equal(probe.kind, 'nats');
  await probe.close();
  behaviour(t, async () => ({
    client: await connectNatsTransport(nats.url, { name: 'client' }),
    server: await connectNatsTransport(nats.url, { name: 'server' }),
  }));

  t.test('onReconnect: called each time the connection is back after the server restarted, until stopped', async (t) => {
    const own = await startNats();
    const transport = await connectNatsTransport(own.url);
    let server = own;
    t.teardown(async () => {
      await transport.close();
      await server.stop();
    });
    let calls = 0;
    let all = 0;
    const stop = transport.onReconnect!(() => calls++);
    transport.onReconnect!(() => all++);
    const restart = async () => {
      await server.kill();
      server = await startNats({ port: own.port, storeDir: own.storeDir });
    };
    await restart();
    const reconnects = async (n: number) => {
      const end = Date.now() + 20_000;
      while (all < n && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    };
    await reconnects(1);
    t.equal(calls, 1, 'called once the connection is back');
    stop();
    await restart();
    await reconnects(2);
    t.equal(all, 2, 'the other listener heard the second reconnect');
    t.equal(calls, 1, 'the stopped one did not');
  });
});
