/**
 * The steps of a stop (`platform/stop-steps.ts`), which the main thread's drain, its stop during start-up and
 * the edge thread's drain run: a step that fails is logged with its name at warn and the steps after it still
 * run; the store's step failing is what the drain's exit code reads.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import t from 'tap';
import { createStopSteps } from '../platform/stop-steps.js';

/** A real pino logger whose lines are kept. */
function logged() {
  const lines: Array<Record<string, unknown>> = [];
  const out = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  return { logger: pino({ level: 'info' }, out), lines };
}

t.test('every step runs whatever failed before it, each failure logged with its step', async (t) => {
  const { logger, lines } = logged();
  const { step, storeClosed } = createStopSteps(logger);
  const ran: string[] = [];
  await step('edge', () => ran.push('edge'));
  await step('runtime', async () => {
    ran.push('runtime');
    throw new Error('host stop failed');
  });
  await step('metrics', () => {
    ran.push('metrics');
    throw 'not an error';
  });
  await step('store', async () => ran.push('store'));
  t.same(ran, ['edge', 'runtime', 'metrics', 'store'], 'the steps after a failure ran, in order');
  t.equal(storeClosed(), true, 'the store closed');
  await new Promise((r) => setImmediate(r));
  const warned = lines.filter((l) => l.msg === 'a drain step failed; going on');
  t.same(
    warned.map((l) => [l.level, l.step, l.err]),
    [
      [40, 'runtime', 'host stop failed'],
      [40, 'metrics', 'not an error'],
    ],
  );
});

t.test('a failed store step is what storeClosed reports', async (t) => {
  const { logger } = logged();
  const steps = createStopSteps(logger);
  await steps.step('blobs', () => {
    throw new Error('blob close failed');
  });
  t.equal(steps.storeClosed(), true, 'another step failing leaves it true');
  await steps.step('store', () => Promise.reject(new Error('close failed')));
  t.equal(steps.storeClosed(), false);
  let after = false;
  await steps.step('telemetry', () => {
    after = true;
  });
  t.ok(after, 'and the steps after it still run');
});
