/**
 * The Messaging benchmark's load client, run as a child process (`fork`) so that the sockets of one run can
 * be spread over several processes (each process has its own open-file limit). The parent drives it over
 * IPC, one command at a time, each answered by one message:
 *
 * - `echo`: open `sockets` WebSockets to a bare echo server; a round trip is one frame out, one back.
 * - `messaging`: open `sessions` Messaging API sessions as a webchat widget does (access token, session,
 *   `/ws`, the history replay, the agent join and its greeting); a round trip is a user message out to the
 *   agent's message back.
 * - `run`: every open socket plays a closed loop of round trips for `durationMs`; answers the raw latencies.
 *   With `intervalMs`, an open loop instead: each socket starts one round trip every `intervalMs` (from a
 *   random offset), whether or not the previous one has finished, timed from when it was due. The round
 *   trips due in its first `warmupMs` run on the same schedule but are answered apart (`warmupLatenciesUs`).
 * - `count`: how many sockets are still open, and the close codes of those the server closed.
 * - `close`: closes everything and exits.
 */
import WebSocket from 'ws';

export type LoadCommand =
  | { op: 'echo'; url: string; sockets: number; payload: string; localAddress: string }
  | { op: 'messaging'; localAddress: string; base: string; connectorToken: string; host: string; sessions: number; join: boolean; text: string; concurrency: number; lane: number }
  | { op: 'run'; durationMs: number; intervalMs?: number; warmupMs?: number }
  | { op: 'count' }
  | { op: 'close' };

export interface OpenReply {
  opened: number;
  ms: number;
  errors: Record<string, number>;
  /** HTTP 429 answers retried after their Retry-After. */
  retried: number;
}

export interface RunReply {
  /** Round-trip latencies in microseconds. */
  latenciesUs: number[];
  /** The open loop's round trips due during its warm-up, in microseconds. */
  warmupLatenciesUs?: number[];
  /** The measured part's length (after the warm-up). */
  seconds: number;
  errors: Record<string, number>;
}

const TURN_TIMEOUT_MS = 30_000;

/** One open socket that can play round trips. */
interface Lane {
  roundTrip(): Promise<void>;
  /** Whether the socket is still usable. */
  open(): boolean;
  close(): void;
}

const lanes: Lane[] = [];
/** Close codes (and reasons) of sockets the server closed, for `count`. */
const closes: Record<string, number> = {};
let closing = false;
const noteClose = (ws: WebSocket) =>
  ws.on('close', (code, reason) => {
    if (!closing) tally(closes, `${code}${reason.length ? ` ${reason}` : ''}`);
  });

/**
 * Each socket binds its own loopback port on this process's own loopback address: with 20,000 sockets the
 * kernel's search for a free ephemeral port (and TIME_WAIT left by an earlier run) makes connects take
 * up to seconds each, while an explicit port on an address no other run uses binds at once.
 */
let nextPort = 10_000;
const wsOptions = (localAddress: string) => ({ perMessageDeflate: false, localAddress, localPort: nextPort++ });
const tally = (errors: Record<string, number>, key: string) => (errors[key] = (errors[key] ?? 0) + 1);

// No compression is offered: the bare server has none, and the gateway's messages are small.
function connect(url: string, localAddress: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, wsOptions(localAddress));
    ws.once('open', () => {
      noteClose(ws);
      resolve(ws);
    });
    // A failed handshake is an error ("Unexpected server response: 404"); a later error is followed by a close.
    ws.on('error', reject);
  });
}

/** A socket on the echo server: each round trip is one frame out and the next frame in. */
async function echoLane(url: string, payload: string, localAddress: string): Promise<Lane> {
  const ws = await connect(url, localAddress);
  let waiting: (() => void) | null = null;
  ws.on('message', () => {
    const w = waiting;
    waiting = null;
    w?.();
  });
  return {
    roundTrip: () =>
      new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('echo timeout')), TURN_TIMEOUT_MS);
        waiting = () => {
          clearTimeout(t);
          resolve();
        };
        ws.send(payload);
      }),
    open: () => ws.readyState === WebSocket.OPEN,
    close: () => ws.terminate(),
  };
}

/** POST with a JSON body; a 429 is retried after its Retry-After (counted in `retried`). */
async function post(url: string, headers: Record<string, string>, body: unknown, retried: { n: number }): Promise<any> {
  for (let attempt = 0; ; attempt++) {
    const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    const text = await res.text();
    if (res.status === 429 && attempt < 20) {
      retried.n++;
      await new Promise((r) => setTimeout(r, Math.max(100, Number(res.headers.get('retry-after') ?? 1) * 1000)));
      continue;
    }
    if (res.status !== 200) throw new Error(`${new URL(url).pathname} ${res.status}: ${text.slice(0, 120)}`);
    return JSON.parse(text);
  }
}

/** Server events of one socket, read one at a time by predicate. */
function inbox(ws: WebSocket) {
  let waiter: { match: (e: any) => boolean; resolve: (e: any) => void; reject: (err: Error) => void } | null = null;
  const errorOf = (e: any): string | null => {
    if (e.type === 'EVENT_TYPE_SYSTEM_MESSAGE' && e.payload?.level === 'SYSTEM_MESSAGE_LEVEL_ERROR') return `system error: ${e.payload?.message}`;
    // The per-session rate limit drops the message with a warning: that turn gets no answer.
    if (e.type === 'EVENT_TYPE_SYSTEM_MESSAGE' && e.payload?.level === 'SYSTEM_MESSAGE_LEVEL_WARNING') return `system warning: ${e.payload?.message}`;
    if (e.type === 'EVENT_TYPE_SESSION_END') return `session end: ${e.payload?.reason}`;
    return null;
  };
  ws.on('message', (data) => {
    if (!waiter) return;
    let e: any;
    try {
      e = JSON.parse(String(data));
    } catch {
      return waiter.reject(new Error('unparseable server event'));
    }
    const w = waiter;
    if (w.match(e)) {
      waiter = null;
      return w.resolve(e);
    }
    const err = errorOf(e);
    if (err) {
      waiter = null;
      w.reject(new Error(err));
    }
  });
  ws.on('close', (code) => {
    const w = waiter;
    waiter = null;
    w?.reject(new Error(`socket closed ${code}`));
  });
  return (match: (e: any) => boolean, what: string) =>
    new Promise<any>((resolve, reject) => {
      const t = setTimeout(() => {
        waiter = null;
        reject(new Error(`timeout waiting for ${what}`));
      }, TURN_TIMEOUT_MS);
      waiter = {
        match,
        resolve: (e) => {
          clearTimeout(t);
          resolve(e);
        },
        reject: (err) => {
          clearTimeout(t);
          reject(err);
        },
      };
    });
}

/**
 * One Messaging API session as a webchat widget opens it: access token, session, socket, history replay,
 * and (with `join`) the agent join up to the agent's greeting.
 */
async function messagingLane(cmd: Extract<LoadCommand, { op: 'messaging' }>, id: string, retried: { n: number }): Promise<Lane> {
  const { access_token: token } = await post(`${cmd.base}/api/v1/access-token`, { 'X-Token': cmd.connectorToken, 'X-Host': cmd.host }, {}, retried);
  const { session_id: sessionId } = await post(`${cmd.base}/api/v1/sessions`, { authorization: `Bearer ${token}` }, { platform: 'web' }, retried);
  const wsUrl = `${cmd.base.replace(/^http/, 'ws')}/ws?session_id=${encodeURIComponent(sessionId)}&access_token=${encodeURIComponent(token)}`;
  // The replay is the first event: listen before the socket opens so it cannot be missed.
  const ws = new WebSocket(wsUrl, wsOptions(cmd.localAddress));
  const next = inbox(ws);
  const replay = next((e) => e.type === 'EVENT_TYPE_EVENT_BATCH', 'EVENT_BATCH');
  replay.catch(() => undefined); // awaited below, after the handshake; a failed handshake rejects both
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.on('error', reject);
  });
  await replay;
  noteClose(ws);
  let turn = 0;
  if (cmd.join) {
    const greeting = next((e) => e.type === 'EVENT_TYPE_SERVICE_AGENT_MESSAGE', 'greeting');
    ws.send(JSON.stringify({ type: 'EVENT_TYPE_REQUEST_SERVICE_AGENT_JOIN', payload: {}, metadata: { custom: { client_event_id: `${id}-join` } } }));
    await greeting;
  }
  return {
    roundTrip: async () => {
      const clientEventId = `${id}-${++turn}`;
      // A late answer to an earlier, timed-out turn carries that turn's id: it does not end this one.
      const reply = next(
        (e) => e.type === 'EVENT_TYPE_SERVICE_AGENT_MESSAGE' && (e.metadata?.custom?.client_event_id ?? clientEventId) === clientEventId,
        'agent message',
      );
      ws.send(JSON.stringify({ type: 'EVENT_TYPE_USER_MESSAGE', payload: { text: cmd.text }, metadata: { custom: { client_event_id: clientEventId } } }));
      await reply;
    },
    open: () => ws.readyState === WebSocket.OPEN,
    close: () => ws.terminate(),
  };
}

/** Runs `make` `count` times with at most `concurrency` in flight; keeps the lanes that opened. */
async function openLanes(count: number, concurrency: number, make: (i: number) => Promise<Lane>, retried: { n: number }): Promise<OpenReply> {
  const t0 = performance.now();
  const errors: Record<string, number> = {};
  let nextIndex = 0;
  let opened = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (nextIndex < count) {
        const i = nextIndex++;
        try {
          lanes.push(await make(i));
          opened++;
        } catch (err) {
          tally(errors, (err as Error).message.replace(/[0-9a-f]{8,}/g, '…'));
        }
      }
    }),
  );
  return { opened, ms: performance.now() - t0, errors, retried: retried.n };
}

/** The open loop: round trips started on a fixed schedule per lane, timed from when each was due. */
async function runOpen(durationMs: number, intervalMs: number, warmupMs: number): Promise<RunReply> {
  const latenciesUs: number[] = [];
  const warmupLatenciesUs: number[] = [];
  const errors: Record<string, number> = {};
  const started = performance.now();
  const measured = started + warmupMs;
  const end = measured + durationMs;
  const inFlight: Promise<void>[] = [];
  await Promise.all(
    lanes.map(async (lane) => {
      let due = started + Math.random() * intervalMs;
      while (due < end && lane.open()) {
        // Node's timers round the delay down to whole milliseconds and can fire before `due`, which
        // timed the bare echo's sub-millisecond round trips as negative: the last part is waited out in turns.
        for (let wait = due - performance.now(); wait > 0; wait = due - performance.now()) {
          await new Promise((r) => (wait >= 1 ? setTimeout(r, wait) : setImmediate(r)));
        }
        const at = due;
        inFlight.push(
          lane.roundTrip().then(
            () => void (at < measured ? warmupLatenciesUs : latenciesUs).push(Math.round((performance.now() - at) * 1000)),
            (err) => void tally(errors, (err as Error).message),
          ),
        );
        due += intervalMs;
      }
    }),
  );
  await Promise.all(inFlight);
  return { latenciesUs, warmupLatenciesUs, seconds: (performance.now() - measured) / 1000, errors };
}

async function run(durationMs: number): Promise<RunReply> {
  const latenciesUs: number[] = [];
  const errors: Record<string, number> = {};
  const started = performance.now();
  const end = started + durationMs;
  await Promise.all(
    lanes.map(async (lane) => {
      while (performance.now() < end && lane.open()) {
        const t0 = performance.now();
        try {
          await lane.roundTrip();
          latenciesUs.push(Math.round((performance.now() - t0) * 1000));
        } catch (err) {
          tally(errors, (err as Error).message);
        }
      }
    }),
  );
  return { latenciesUs, seconds: (performance.now() - started) / 1000, errors };
}

process.on('message', async (cmd: LoadCommand) => {
  const retried = { n: 0 };
  switch (cmd.op) {
    case 'echo':
      return process.send!(await openLanes(cmd.sockets, 100, () => echoLane(cmd.url, cmd.payload, cmd.localAddress), retried));
    case 'messaging':
      return process.send!(await openLanes(cmd.sessions, cmd.concurrency, (i) => messagingLane(cmd, `c${cmd.lane}s${i}`, retried), retried));
    case 'run':
      return process.send!(await (cmd.intervalMs ? runOpen(cmd.durationMs, cmd.intervalMs, cmd.warmupMs ?? 0) : run(cmd.durationMs)));
    case 'count':
      return process.send!({ open: lanes.filter((l) => l.open()).length, closes });
    case 'close':
      closing = true;
      for (const l of lanes) l.close();
      process.send!({ closed: true }, () => process.exit(0));
  }
});
