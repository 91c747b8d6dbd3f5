import t from 'tap';
import fc from 'fast-check';
import type { Store } from '../store/mod.js';
import { sessionRecords } from '../actors/session/mod.js';
import { parseCursor } from '../gateway/socket/handshake.js';
import { parseClientEvent } from '../gateway/socket/ws.js';
import { http } from './helpers/http.js';
import { messagingProject, type MessagingProject } from './helpers/messaging.js';
import { removeDir, startPlatformWithStore, type Platform } from './helpers/platform.js';

const TYPES = ['EVENT_TYPE_REQUEST_SERVICE_AGENT_JOIN', 'EVENT_TYPE_USER_MESSAGE', 'EVENT_TYPE_USER_TYPING', 'EVENT_TYPE_USER_END_SESSION', 'EVENT_TYPE_HEARTBEAT', 'EVENT_TYPE_SESSION_END', 'EVENT_TYPE_X'];

t.test('any client frame parses to an event or to a catalog error, never a throw', async (t) => {
  const frame = fc.oneof(
    fc.string(),
    fc.json(),
    fc.record({ type: fc.constantFrom(...TYPES), payload: fc.anything(), metadata: fc.oneof(fc.anything(), fc.record({ custom: fc.anything() })) }, { requiredKeys: ['type'] }).map((o) => JSON.stringify(o)),
  );
  fc.assert(
    fc.property(frame, (text) => {
      const r = parseClientEvent(text);
      if ('error' in r) return typeof r.error === 'string' && (r.error === 'Unknown event type or invalid message format' || r.error.startsWith('Event type not allowed: EVENT_TYPE_'));
      return r.event.type === 'CLIENT' && (r.event.kind !== 'MESSAGE' || typeof r.event.text === 'string');
    }),
    { numRuns: 2000 },
  );
  t.pass('2000 frames');
});

t.test('a frame with a lone surrogate anywhere is an invalid format; well-formed text is taken as sent', async (t) => {
  const wellFormed = fc.string({ unit: 'binary', maxLength: 24 });
  // Put between the halves of a pair, the lone surrogate pairs with one and leaves the other alone.
  const withLoneSurrogate = fc
    .tuple(wellFormed, fc.nat(), fc.integer({ min: 0xd800, max: 0xdfff }))
    .map(([s, at, unit]) => s.slice(0, at % (s.length + 1)) + String.fromCharCode(unit) + s.slice(at % (s.length + 1)));
  const frame = (text: string, custom: unknown) => JSON.stringify({ type: 'EVENT_TYPE_USER_MESSAGE', payload: { text }, metadata: { custom } });
  fc.assert(
    fc.property(withLoneSurrogate, fc.constantFrom('text', 'value', 'key'), (s, where) => {
      const r = parseClientEvent(where === 'text' ? frame(`hi ${s}`, null) : frame('hi', where === 'value' ? { n: [s] } : { [s]: 1 }));
      return 'error' in r && r.error === 'Unknown event type or invalid message format';
    }),
    { numRuns: 500 },
  );
  fc.assert(
    fc.property(wellFormed, (s) => {
      // The key prefixed: `__proto__`, which fast-check likes to try, is refused on its own account.
      const r = parseClientEvent(frame(`hi ${s}`, { [`k${s}`]: s }));
      return 'event' in r && r.event.text === `hi ${s}` && JSON.stringify(r.event.custom) === JSON.stringify({ [`k${s}`]: s });
    }),
    { numRuns: 500 },
  );
  t.pass('1000 frames');
});

t.test('cursors: integers and seq:<n> read as themselves, anything else as 0', async (t) => {
  fc.assert(fc.property(fc.nat(), (n) => parseCursor(String(n)).cursor === n && parseCursor(`seq:${n}`).cursor === n));
  fc.assert(fc.property(fc.string(), (s) => {
    const r = parseCursor(s);
    return r.valid ? Number.isInteger(r.cursor) && r.cursor >= 0 : r.cursor === 0;
  }));
  t.same(parseCursor('seq:x'), { cursor: 0, valid: false });
});

let p: Platform;
let m: MessagingProject;
let store: Store;
t.before(async () => {
  ({ p, store } = await startPlatformWithStore({ env: { MESSAGING_HTTP_RATE: '100000' } }));
  m = await messagingProject(p);
});
t.teardown(async () => {
  await store.close();
  await p.stop();
  removeDir(p.dataDir);
});

t.test('any headers and body on the HTTP steps get a 4xx in the error shape, and no session is made', async (t) => {
  const token = await m.accessToken();
  const sessions = sessionRecords(store);
  const before = await sessions.count({});
  const header = fc.oneof(fc.constant(undefined), fc.string({ maxLength: 80 }).filter((s) => /^[\x20-\x7e]*$/.test(s)), fc.constant(m.connectorToken), fc.constant(`Bearer ${token}x`), fc.constant('Bearer'));
  await fc.assert(
    fc.asyncProperty(header, header, fc.oneof(fc.string({ maxLength: 200 }), fc.json()), fc.constantFrom('/api/v1/access-token', '/api/v1/sessions'), async (a, b, body, path) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (a !== undefined) headers[path.endsWith('token') ? 'X-Token' : 'Authorization'] = a;
      if (b !== undefined) headers['X-Host'] = b;
      const r = await http(p.socket, 'POST', path, { raw: body, headers });
      const okToken = path.endsWith('token') && r.status === 200;
      if (okToken) return true;
      return r.status >= 400 && r.status < 500 && typeof r.body?.error === 'string' && r.body.success === false;
    }),
    { numRuns: 150 },
  );
  t.equal(await sessions.count({}), before, 'nothing stored');
});
