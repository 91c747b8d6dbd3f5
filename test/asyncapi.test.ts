/**
 * The Messaging API's AsyncAPI 3.0 document (`GET /asyncapi.json` on the edge port): valid for
 * `@asyncapi/parser` (offline: no remote `$ref`), and checked structurally: the required top-level fields,
 * every `$ref` resolving, operations that send the five client events and receive every server event the
 * session machine knows (`SERVER_EVENT_TYPES`), each message a frame whose `type` is its event type.
 */
import t from 'tap';
import { Parser } from '@asyncapi/parser';
import { SERVER_EVENT_TYPES } from '../actors/session/mod.js';
import { http } from './helpers/http.js';
import { platformFor, type Platform } from './helpers/platform.js';

const CLIENT = ['REQUEST_SERVICE_AGENT_JOIN', 'USER_MESSAGE', 'USER_TYPING', 'USER_END_SESSION', 'HEARTBEAT'].map((n) => `EVENT_TYPE_${n}`);
const SERVER = SERVER_EVENT_TYPES.map((n) => `EVENT_TYPE_${n}`);
/** The event names the contract itself uses (6.3). */
const CONTRACT = ['EVENT_TYPE_EVENT_BATCH', 'EVENT_TYPE_REQUEST_SERVICE_AGENT_JOIN', 'EVENT_TYPE_SERVICE_AGENT_JOINED', 'EVENT_TYPE_SYSTEM_MESSAGE', 'EVENT_TYPE_SESSION_END'];

type Schema = { type?: string; properties?: Record<string, Schema>; required?: string[]; const?: unknown; enum?: unknown[] };
type Doc = {
  asyncapi: string;
  info: { title: string; version: string; description?: string };
  servers: Record<string, { host: string; protocol: string; pathname?: string }>;
  channels: Record<string, { address: string; messages: Record<string, { $ref: string }> }>;
  operations: Record<string, { action: string; channel: { $ref: string }; messages: Array<{ $ref: string }> }>;
  components: { messages: Record<string, { name: string; payload: Schema }>; securitySchemes: Record<string, unknown> };
};

let p: Platform;
let doc: Doc;
t.before(async () => {
  p = await platformFor(t);
  const res = await http(p.edge, 'GET', '/asyncapi.json');
  if (res.status !== 200) throw new Error(`GET /asyncapi.json: ${res.status}`);
  doc = res.body as Doc;
});

/** The value a local `$ref` (`#/a/b`) points at, or undefined. */
const resolve = (ref: string): unknown =>
  ref.startsWith('#/') ? ref.slice(2).split('/').map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~')).reduce<unknown>((at, key) => (at as Record<string, unknown> | undefined)?.[key], doc) : undefined;

t.test('the required AsyncAPI 3 fields', async (t) => {
  t.equal(doc.asyncapi, '3.0.0');
  t.type(doc.info.title, 'string');
  t.type(doc.info.version, 'string');
  t.match(doc.servers, { socket: { protocol: 'ws', pathname: '/ws' } });
  t.match(doc.channels, { session: { address: '/ws' } });
  t.ok(Object.keys(doc.operations).length > 0);
  t.ok(Object.keys(doc.components.messages).length > 0);
});

t.test('@asyncapi/parser finds no error or warning', async (t) => {
  const { document, diagnostics } = await new Parser().parse(JSON.stringify(doc));
  // Severity 0 is an error, 1 a warning; 2 and 3 are hints (such as "3.1.0 exists").
  const problems = diagnostics.filter((d) => d.severity <= 1).map((d) => `${d.code}: ${d.message} at ${d.path.join('.')}`);
  t.same(problems, []);
  t.ok(document, 'parsed');
  t.equal(document!.allMessages().length, CLIENT.length + SERVER.length);
  t.equal(document!.allOperations().length, CLIENT.length + SERVER.length);
});

t.test('every $ref resolves', async (t) => {
  const refs: string[] = [];
  const walk = (v: unknown) => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) (k === '$ref' && typeof x === 'string' ? refs.push(x) : walk(x));
    }
  };
  walk(doc);
  t.ok(refs.length > 50, `${refs.length} refs`);
  for (const ref of refs) t.ok(resolve(ref) !== undefined, ref);
});

t.test('the event catalog: client events sent, server events received, each with its payload schema', async (t) => {
  t.same(Object.keys(doc.components.messages).sort(), [...CLIENT, ...SERVER].sort());
  for (const name of CONTRACT) t.ok(doc.components.messages[name], name);
  const byAction = { send: new Set<string>(), receive: new Set<string>() };
  for (const [id, op] of Object.entries(doc.operations)) {
    t.ok(op.action === 'send' || op.action === 'receive', `${id} action`);
    t.equal(op.channel.$ref, '#/channels/session', `${id} channel`);
    for (const m of op.messages) {
      t.match(m.$ref, /^#\/channels\/session\/messages\//, `${id} references its channel's messages`);
      byAction[op.action as 'send' | 'receive'].add(m.$ref.split('/').pop()!);
    }
  }
  t.same([...byAction.send].sort(), [...CLIENT].sort());
  t.same([...byAction.receive].sort(), [...SERVER].sort());
  for (const [name, message] of Object.entries(doc.components.messages)) {
    const frame = message.payload;
    t.equal(frame.type, 'object', `${name} frame`);
    t.equal(frame.properties?.type?.const, name, `${name} type`);
    t.equal(frame.properties?.payload?.type, 'object', `${name} payload`);
    if (SERVER.includes(name)) t.match(frame.required, ['id', 'sequence', 'timestamp', 'type', 'payload', 'metadata'], `${name} envelope`);
  }
  t.match(doc.components.messages.EVENT_TYPE_SYSTEM_MESSAGE.payload.properties!.payload.properties!.level.enum, ['SYSTEM_MESSAGE_LEVEL_INFO', 'SYSTEM_MESSAGE_LEVEL_WARNING', 'SYSTEM_MESSAGE_LEVEL_ERROR']);
  t.match(doc.components.messages.EVENT_TYPE_USER_MESSAGE.payload.properties!.payload.required, ['text']);
});
