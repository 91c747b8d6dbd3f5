/**
 * A full disk under the embedded store (docs/storage.md, "A full disk"): a write that cannot be made is refused
 * (5xx), and the process stays up: `/healthz` answers, reads are served, and once there is room again writes
 * succeed again; SIGTERM drains it and it exits 0. It must never be alive without answering (lmdb-js 3.5.6
 * rejects promises of its own that no caller holds when a commit fails; unhandled, they ended the thread they fell
 * in, and a main thread ending while lmdb-js's writer waited on it hung in its exit with its ports held and
 * SIGTERM ignored).
 *
 * The full disk is RLIMIT_FSIZE, lowered on the running process (`prlimit --pid`) to just above its files' sizes
 * once it serves: no mount and no privilege needed (the soft limit is lowered and raised again under an unlimited
 * hard one). With SIGXFSZ ignored a write past the limit fails (a short write, which LMDB reports as EIO, or EFBIG)
 * as one past a full disk does (ENOSPC, or EIO for a short write): LMDB's commit writes its pages, fails, and is
 * aborted.
 * LMDB's meta pages sit at the start of the file, below any limit: the environment is never made unusable here.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { chatProject } from './helpers/chat.js';
import { eventually } from './helpers/eventually.js';
import { platformFor } from './helpers/platform.js';

/** The process's soft file size limit (the hard one stays unlimited, so the test can lift it again). */
const fsize = (pid: number, soft: number | 'unlimited') => execFileSync('prlimit', ['--pid', String(pid), `--fsize=${soft}:unlimited`]);

/** GET `path` on `base`, given up on after `ms`: a status, or the error's code. */
async function get(base: string, path: string, ms = 3000): Promise<number | string> {
  try {
    const res = await fetch(new URL(path, base), { signal: AbortSignal.timeout(ms) });
    await res.arrayBuffer();
    return res.status;
  } catch (err) {
    return String((err as { cause?: { code?: string } }).cause?.code ?? (err as Error).name);
  }
}

t.test('a full disk: writes are refused, the process stays up and serves, writes succeed again once there is room, SIGTERM ends it', async (t) => {
  // A chat turn whose commit fails is retried for the ask's usual time (a short one here), then answered 503;
  // not for a turn's whole wait, which functions' wall-clock bound makes twelve minutes here (and the
  // connection timeout lets the Chat API wait that long): a turn waited for that long would outlast this file.
  // SIGXFSZ ignored (a disposition exec keeps), so that a write past the limit fails with EFBIG instead of
  // killing the process, whatever the runner's disposition; the platform's own listener (platform/start.ts) keeps
  // tap's preloaded `signal-exit` from raising it again.
  const p = await platformFor(t, { env: { ASK_TIMEOUT_MS: '2000', FUNCTION_TIMEOUT_MS: '60000', EDGE_CONNECTION_TIMEOUT_MS: '3600000' }, prefix: ['sh', '-c', 'trap "" XFSZ; exec "$0" "$@"'] });
  const pid = p.child.pid!;
  let exit: { code: number | null; signal: string | null } | null = null;
  p.child.once('exit', (code, signal) => (exit = { code, signal }));
  t.teardown(() => {
    if (!exit) p.child.kill('SIGKILL');
  });
  const chat = await chatProject(p);
  const mdb = readdirSync(p.dataDir).filter((f) => f.endsWith('.mdb'));
  const largest = Math.max(...mdb.map((f) => statSync(join(p.dataDir, f)).size));
  fsize(pid, largest + 256 * 1024);

  // Chat load (turns with long messages, so that the files must grow) until writes are refused.
  const statuses = new Map<number | string, number>();
  let refused = false;
  const deadline = Date.now() + 25_000;
  const load = async () => {
    while (!refused && !exit && Date.now() < deadline) {
      const created = await chat.chat('create', {}).catch(() => null);
      if (!created) continue;
      statuses.set(created.status, (statuses.get(created.status) ?? 0) + 1);
      if (created.status >= 500) refused = true;
      const id = created.body?.conversation_id;
      for (let i = 0; id && i < 4 && !refused && !exit; i++) {
        const r = await chat.chat('respond', { conversation_id: id, message: `What are your opening hours? ${'x'.repeat(2000)}` }).catch(() => null);
        if (!r) continue;
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        if (r.status >= 500) refused = true;
      }
    }
  };
  await Promise.all(Array.from({ length: 12 }, load));
  t.ok(refused, `a write was refused with a 5xx (statuses: ${JSON.stringify([...statuses])})`);

  // Past the failures: never alive without answering. The process stays up and serves (the choice of
  // docs/storage.md); an exit by itself, or a /healthz that does not answer, is the defect.
  for (let i = 0; i < 3; i++) {
    await new Promise((r) => setTimeout(r, 1000));
    t.equal(exit, null, `the process is still running ${i + 1} s after the failures`);
    if (exit) {
      t.comment(p.stderr().slice(-3000));
      return;
    }
    t.equal(await get(p.edge, '/healthz'), 200, '/healthz answers');
  }
  const agents = await chat.api('GET', '/v1/agents');
  t.equal(agents.status, 200, 'a read is served while writes fail');
  t.match(p.stderr() + p.stdout(), /Input\/output error|File too large|No space left/, 'the write failed as on a full disk');

  // Room again: writes succeed again, without a restart.
  fsize(pid, 'unlimited');
  const created = await eventually(async () => {
    const r = await chat.chat('create', {});
    return r.status === 200 ? r : null;
  }, 15_000, 'a chat created once the limit is lifted');
  const turn = await chat.chat('respond', { conversation_id: created.body.conversation_id, message: 'What are your opening hours?' });
  t.equal(turn.status, 200, 'a turn answers once the limit is lifted');
  t.equal(exit, null, 'still the same process');

  // SIGTERM drains and exits 0, promptly.
  const t0 = Date.now();
  p.child.kill('SIGTERM');
  const code = await eventually(async () => exit, 15_000, 'the exit after SIGTERM').catch(() => null);
  t.same(code, { code: 0, signal: null }, `SIGTERM ended the process with 0 (after ${Date.now() - t0} ms)`);
});
