/**
 * The escape classes of the sandbox review, replayed as an attacker would: functions deployed through the Agents
 * API and run by chat turns of a started platform. In every case the call fails (or does nothing) inside the
 * sandbox, the platform keeps serving, a canary secret in the platform's environment never comes back, and
 * another project's conversation, running at the same time, is answered with its own state intact.
 */
import t from 'tap';
import { createServer } from 'node:net';
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { platformFor } from './helpers/platform.js';
import { chatProject } from './helpers/chat.js';
import { http } from './helpers/http.js';
import { sandboxNodes } from './helpers/processes.js';
import { waitForProjections } from './helpers/projections.js';

const CANARY = `canary-${randomBytes(16).toString('hex')}`;
const VICTIM_SECRET = `victim-source-${randomBytes(8).toString('hex')}`;

// One `turn` function that runs the attack named by the user's message and answers with what it got.
const ATTACKER = String.raw`async function turn(conv, msg) {
  const tried = [];
  const attempt = async (what, f) => {
    try { tried.push(what + '=' + String(await f())); } catch (e) { tried.push(what + '!' + String(e && e.message)); }
  };
  switch (msg) {
    case 'prepare-return':
      Error.prepareStackTrace = (e, frames) => frames;
      return new Error('x');
    case 'prepare-nested':
      Error.prepareStackTrace = (e, frames) => frames;
      return { deep: [{ error: new Error('y'), stack: new Error('z').stack }] };
    case 'prepare-throw':
      Error.prepareStackTrace = (e, frames) => frames;
      throw { get message() { return new Error('from a getter') } };
    case 'constructor':
      return String(new Error('x').constructor.constructor('return typeof process + typeof require')());
    case 'replace-globals':
      globalThis.Error = function () { return 'pwned' };
      Object.prototype.toJSON = () => 'pwned';
      Array.prototype.push = () => 0;
      JSON.stringify = () => '"pwned"';
      String.prototype.toString = () => 'pwned';
      Function.prototype.call = () => 'pwned';
      return 'replaced';
    case 'files':
      await attempt('require', () => require('fs').readFileSync('/proc/self/environ', 'utf8'));
      await attempt('process.env', () => JSON.stringify(process.env));
      await attempt('import fs', async () => (await import('fs')).readFileSync('/etc/passwd', 'utf8'));
      await attempt('import std', async () => (await import('std')).loadFile('/proc/self/environ'));
      await attempt('std global', () => std.loadFile('/etc/passwd'));
      await attempt('data dir', async () => (await import('node:fs')).readdirSync(conv.variables.data_dir));
      return 'files: ' + tried.join(' | ');
    case 'network':
      await attempt('fetch', () => fetch('http://127.0.0.1:' + conv.integration_attributes.port + '/'));
      await attempt('XMLHttpRequest', () => new XMLHttpRequest());
      await attempt('WebSocket', () => new WebSocket('ws://127.0.0.1:' + conv.integration_attributes.port));
      await attempt('import net', async () => (await import('net')).connect(conv.integration_attributes.port, '127.0.0.1'));
      await attempt('import os', async () => (await import('os')).exec(['sh', '-c', 'echo hi']));
      return 'network: ' + tried.join(' | ');
    case 'kill':
      await attempt('process.kill', () => process.kill(process.pid, 'SIGKILL'));
      await attempt('os.kill', async () => (await import('os')).kill(1, 9));
      await attempt('child_process', async () => (await import('child_process')).execSync('kill -9 1'));
      return 'kill: ' + tried.join(' | ');
    case 'array-buffer': {
      const keep = [];
      for (;;) keep.push(new ArrayBuffer(8 * 1024 * 1024));
    }
    case 'array-buffer-huge':
      return String(new ArrayBuffer(2 ** 31).byteLength);
    case 'spin':
      for (;;) {}
    case 'spin-async':
      await null;
      for (;;) await null;
    case 'recurse': {
      const r = (n) => r(n + 1) + 1;
      return String(r(0));
    }
    case 'huge-reply':
      // 600,000 words: the read models' search analysis once spread a turn's words as arguments, and its
      // stack overflow ended the projection thread on this journal entry again after every restart.
      return 'ab '.repeat(600000);
    case 'huge-say':
      for (let i = 0; i < 40; i++) conv.say('cd '.repeat(20000));
      return 'said';
    case 'huge-state':
      conv.state.big = 'x'.repeat(1 << 20);
      return 'stored';
    case 'state-size':
      return 'state ' + (conv.state.big === undefined ? 0 : conv.state.big.length);
    case 'deep-state': {
      // Nested past what msgpackr's recursive encoding of the snapshot survives: the conversation could commit
      // no step again, every later turn a 503.
      let a = 1;
      for (let i = 0; i < 1500; i++) a = [a];
      conv.state.deep = a;
      return 'stored deep';
    }
    case 'state-depth':
      return 'deep ' + (conv.state.deep === undefined ? 'absent' : 'kept');
    case 'said-setter':
      // A setter on Array.prototype for index 0 would be handed the sandbox's own list of what was said.
      Object.defineProperty(Array.prototype, '0', { set(v) { globalThis.grabbed = this; }, configurable: true });
      conv.say('a');
      delete Array.prototype[0];
      return 'grabbed ' + typeof globalThis.grabbed;
    default:
      return 'ready';
  }
}`;

// The victim: its source holds a secret, its state a counter; it answers every turn itself.
const VICTIM = `function turn(conv, msg) {
  const secret = '${VICTIM_SECRET}';
  conv.state.n = (conv.state.n ?? 0) + 1;
  return 'victim turn ' + conv.state.n + ' ' + secret.length;
}`;

const ATTACKS = [
  'prepare-return', 'prepare-nested', 'prepare-throw', 'constructor', 'replace-globals', 'files', 'network', 'kill', 'array-buffer',
  'array-buffer-huge', 'spin', 'spin-async', 'recurse', 'huge-reply', 'huge-say', 'huge-state', 'state-size', 'said-setter',
  'deep-state', 'state-depth',
];

t.test('tenant functions cannot get out', async (t) => {
  let connections = 0;
  const listener = createServer((s) => {
    connections++;
    s.destroy();
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => listener.close(() => resolve())));
  const port = (listener.address() as { port: number }).port;

  const p = await platformFor(t, { env: { CANARY_SECRET: CANARY, FUNCTION_TIMEOUT_MS: '400', FUNCTION_HEAP_MB: '32' } });
  writeFileSync(join(p.dataDir, 'canary.txt'), CANARY);
  const attacker = await chatProject(p, { name: 'Mallory', functions: { turn: ATTACKER } });
  const victim = await chatProject(p, { name: 'Victim', functions: { turn: VICTIM } });

  const a = await attacker.chat('create', { integration_attributes: { port } });
  t.equal(a.status, 200, 'the attacker has a conversation');
  const v = await victim.chat('create', {});
  t.equal(v.status, 200, 'the victim has a conversation');
  const ready = await attacker.chat('respond', { conversation_id: a.body.conversation_id, message: 'hello' });
  t.equal(ready.body.response, 'ready', 'the attacker function runs');

  const pids = sandboxNodes(p.child.pid!);
  t.ok(pids.length > 0, 'the platform runs its sandbox processes as separate processes');
  for (const pid of pids) {
    t.notOk(readFileSync(`/proc/${pid}/environ`, 'latin1').includes(CANARY), `sandbox process ${pid} has no canary in its environment`);
    // The platform has the store open (LMDB: without close-on-exec); none of it reaches a sandbox process.
    const fds = readdirSync(`/proc/${pid}/fd`).map((n) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${n}`);
      } catch {
        return '';
      }
    });
    t.notOk(fds.some((l) => l.includes(p.dataDir)), `sandbox process ${pid} holds no descriptor into DATA_DIR: ${fds.join(', ')}`);
  }

  let victimTurns = 0;
  for (const attack of ATTACKS) {
    const [hit, answered] = await Promise.all([
      attacker.chat('respond', { conversation_id: a.body.conversation_id, message: attack, integration_attributes: { port } }),
      victim.chat('respond', { conversation_id: v.body.conversation_id, message: `during ${attack}` }),
    ]);
    victimTurns++;
    t.equal(hit.status, 200, `${attack}: the attacker's turn is answered (its function failed or did nothing)`);
    t.notOk(hit.text.includes(CANARY), `${attack}: no canary in the answer`);
    t.notOk(hit.text.includes(VICTIM_SECRET), `${attack}: no victim source in the answer`);
    t.notOk(/root:x:0:0/.test(hit.text), `${attack}: no /etc/passwd in the answer`);
    t.equal(answered.status, 200, `${attack}: the victim's concurrent turn is answered`);
    t.equal(answered.body.response, `victim turn ${victimTurns} ${VICTIM_SECRET.length}`, `${attack}: the victim's function ran with its own state and source`);
    const health = await http(p.edge, 'GET', '/healthz');
    t.equal(health.status, 200, `${attack}: the platform keeps serving`);
    if (attack === 'files' || attack === 'network' || attack === 'kill') {
      t.match(hit.body.response, new RegExp(`^${attack}: `), `${attack}: the function ran and reported`);
      t.notOk(/=/.test(hit.body.response.replace(/^[a-z]+: /, '').replace(/![^|]*/g, '')), `${attack}: every attempt failed: ${hit.body.response}`);
    }
    if (attack === 'constructor') t.equal(hit.body.response, 'undefinedundefined', 'constructor chains stay inside QuickJS');
    if (attack === 'huge-reply' || attack === 'huge-say') t.ok(hit.text.length < 64 * 1024, `${attack}: an output past the limit is a function error (${hit.text.length} bytes answered)`);
    if (attack === 'state-size') t.equal(hit.body.response, 'state 0', 'a state past the limit was not kept');
    if (attack === 'deep-state') t.not(hit.body.response, 'stored deep', 'a state nested past the JSON depth limit is a function error');
    if (attack === 'state-depth') t.equal(hit.body.response, 'deep absent', 'the conversation goes on, without the deep state');
    if (attack === 'said-setter') t.equal(hit.body.response, 'grabbed undefined', "no setter of the tenant's is handed the sandbox's own list");
  }
  // Every read model kept up with the journal through the attacks (a projection thread that died on an entry
  // would stop them all at its checkpoint).
  await waitForProjections(p);
  t.pass('the projections caught up with the journal after the attacks');
  t.equal(connections, 0, 'no connection reached the loopback listener');
  t.equal(p.child.exitCode, null, 'the platform process is alive');
  for (const pid of sandboxNodes(p.child.pid!)) {
    t.notOk(readFileSync(`/proc/${pid}/environ`, 'latin1').includes(CANARY), `sandbox process ${pid} (after the attacks) has no canary`);
  }

  // After replacing every global of its own call, the attacker's next call starts clean too.
  const after = await attacker.chat('respond', { conversation_id: a.body.conversation_id, message: 'hello' });
  t.equal(after.body.response, 'ready', 'the attacker’s next call runs in a fresh runtime');
});
