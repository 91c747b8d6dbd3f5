/**
 * Ids that sort by creation time (platform/ids.ts): the format of each, that the order of the text is the
 * order of the times, and that the Chat API's conversations and the Messaging API's sessions get them.
 */
import t from 'tap';
import fc from 'fast-check';
import { timeOrderedId, uuidv7 } from '../platform/ids.js';
import { messagingProject } from './helpers/messaging.js';
import { platformFor } from './helpers/platform.js';

const UUID7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
/** The Unix milliseconds a UUID version 7 begins with. */
const uuidTime = (id: string) => parseInt(id.replace(/-/g, '').slice(0, 12), 16);
/** The Unix milliseconds of a `timeOrderedId`. */
const idTime = (id: string) => [...id.slice(id.indexOf('_') + 1, id.indexOf('_') + 9)].reduce((n, c) => n * 62 + ALPHABET.indexOf(c), 0);
/** Times from 1970 to the year 8000 (the eight base62 digits hold them until the year 8888). */
const MS = fc.integer({ min: 0, max: 192_000_000_000_000 });

t.test('a UUID version 7: its form, version and variant, and the time it begins with', async (t) => {
  const now = Date.now();
  const id = uuidv7(now);
  t.match(id, UUID7);
  t.equal(uuidTime(id), now);
  const many = new Set(Array.from({ length: 50_000 }, () => uuidv7(now)));
  t.equal(many.size, 50_000, 'ids of the same millisecond differ');
});

t.test('UUIDs version 7 sort as their times', async (t) => {
  fc.assert(
    fc.property(MS, MS, (a, b) => {
      if (a === b) return;
      const [x, y] = [uuidv7(a), uuidv7(b)];
      t.equal(x < y, a < b);
    }),
  );
});

t.test('a time-ordered id: its prefix, its time and its random part', async (t) => {
  const now = Date.now();
  const id = timeOrderedId('ses', now);
  t.match(id, /^ses_[0-9A-Za-z]{20}$/);
  t.equal(idTime(id), now);
  const many = Array.from({ length: 50_000 }, () => timeOrderedId('ses', now));
  t.equal(new Set(many).size, many.length, 'ids of the same millisecond differ');
  // Every random digit is used, about as often as any other (`randomBase62` draws each with `randomInt`, not a byte modulo 62).
  const counts = new Map<string, number>();
  for (const x of many) for (const c of x.slice(12)) counts.set(c, (counts.get(c) ?? 0) + 1);
  t.equal(counts.size, 62);
  const expected = (many.length * 12) / 62;
  t.ok([...counts.values()].every((n) => Math.abs(n - expected) < expected * 0.1), 'the digits are uniform');
});

t.test('time-ordered ids sort as their times', async (t) => {
  fc.assert(
    fc.property(MS, MS, (a, b) => {
      if (a === b) return;
      const [x, y] = [timeOrderedId('ses', a), timeOrderedId('ses', b)];
      t.equal(x < y, a < b);
      t.equal(idTime(x), a);
    }),
  );
});

t.test('Chat API conversations and Messaging API sessions get ids that sort by creation time', async (t) => {
  const p = await platformFor(t);
  const m = await messagingProject(p);
  const before = Date.now();
  const conversations: string[] = [];
  const sessions: string[] = [];
  for (let i = 0; i < 3; i++) {
    const created = await m.chat('create', {});
    t.equal(created.status, 200, created.text);
    conversations.push(created.body.conversation_id);
    sessions.push((await m.session()).sessionId);
    await new Promise((r) => setTimeout(r, 5));
  }
  const after = Date.now();
  for (const id of conversations) {
    t.match(id, UUID7, 'a conversation id is a UUID version 7');
    t.ok(uuidTime(id) >= before && uuidTime(id) <= after, 'beginning with its creation time');
  }
  for (const id of sessions) {
    t.match(id, /^ses_[0-9A-Za-z]{20}$/);
    t.ok(idTime(id) >= before && idTime(id) <= after, 'a session id begins with its creation time');
  }
  t.same([...conversations].sort(), conversations, 'conversations sort as they were created');
  t.same([...sessions].sort(), sessions, 'sessions sort as they were created');
});
