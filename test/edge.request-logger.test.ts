/**
 * The edge's per-request logger (`gateway/edge/request-logger.ts`): a pino child is made only when a request
 * writes a line at an enabled level, and that line carries the request's bindings as a pino child's would.
 */
import { Writable } from 'node:stream';
import t from 'tap';
import { pino } from 'pino';
import type { FastifyBaseLogger } from 'fastify';
import { lazyRequestLogger } from '../gateway/edge/request-logger.js';

function parent(level: string) {
  const lines: Array<Record<string, unknown>> = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l));
      done();
    },
  });
  const logger = pino({ level, base: undefined }, sink);
  let children = 0;
  const child = logger.child;
  // Children inherit this property: each one's own children are made from it (`this`), and counted too.
  logger.child = function (this: typeof logger, b: never, o: never) {
    children++;
    return child.call(this, b, o);
  } as typeof logger.child;
  return { logger, lines, children: () => children };
}

t.test('no child is made while a request writes nothing at an enabled level', async (t) => {
  const p = parent('warn');
  const log = lazyRequestLogger(p.logger as unknown as FastifyBaseLogger, { reqId: 'r-1' }, {});
  log.info({ a: 1 }, 'incoming request');
  log.debug('detail');
  log.trace('more');
  t.equal(p.children(), 0, 'lines below the level make no child');
  t.equal(log.level, 'warn', "the child's level is its parent's");
  t.equal(p.lines.length, 0);
});

t.test('a line at an enabled level goes through one child with the request bindings', async (t) => {
  const p = parent('info');
  const log = lazyRequestLogger(p.logger as unknown as FastifyBaseLogger, { reqId: 'r-2' }, {});
  log.info({ url: '/x' }, 'request completed');
  log.warn('slow');
  log.error(new Error('boom'), 'failed');
  t.equal(p.children(), 1, 'one child for every line of the request');
  t.same(p.lines.map((l) => [l.reqId, l.msg]), [['r-2', 'request completed'], ['r-2', 'slow'], ['r-2', 'failed']]);
  t.equal(p.lines[0].url, '/x');
  t.equal((p.lines[2].err as { message: string }).message, 'boom');
  const grandchild = log.child({ part: 'y' });
  grandchild.info('nested');
  t.same([p.lines[3].reqId, p.lines[3].part], ['r-2', 'y'], "a child's child keeps both bindings");
});

t.test('a child of a request logger that has not logged is lazy too, with both bindings', async (t) => {
  const p = parent('info');
  const log = lazyRequestLogger(p.logger as unknown as FastifyBaseLogger, { reqId: 'r-4' }, {});
  const about = log.child({ conversation_id: 'c-1' });
  about.debug('below the level');
  t.equal(p.children(), 0, 'binding a field makes no child');
  about.info('request completed');
  t.equal(p.children(), 1, 'one child, made by the first line');
  t.same([p.lines[0].reqId, p.lines[0].conversation_id, p.lines[0].msg], ['r-4', 'c-1', 'request completed']);
});

t.test("a level set through the child applies to it, not to its parent", async (t) => {
  const p = parent('warn');
  const log = lazyRequestLogger(p.logger as unknown as FastifyBaseLogger, { reqId: 'r-3' }, {});
  log.level = 'debug';
  log.debug('now shown');
  t.equal(p.logger.level, 'warn');
  t.same(p.lines.map((l) => l.msg), ['now shown']);
});
