/**
 * The Messaging API's WebSocket (contract 4.7, 6.3 and the addendum) as an AsyncAPI 3.0 document, served by
 * the edge at `GET /asyncapi.json` next to `/openapi.json` (the socket gateway serves only the Messaging API
 * itself; the document is static, so either process could serve it). The event catalog is the addendum's:
 * five client events and the server events of `SERVER_EVENT_TYPES`, each a whole frame with its payload.
 */
import { z } from 'zod';
import { MAX_MESSAGE_BYTES, SERVER_EVENT_TYPES } from '../../actors/session/mod.js';

type ServerType = (typeof SERVER_EVENT_TYPES)[number];

const Custom = z.record(z.string(), z.unknown()).describe('Echoed back on the events that answer this one, errors included; client_event_id de-duplicates retries');
const Attachment = z.object({
  title: z.string(),
  preview_image_url: z.string(),
  content_url: z.string(),
  content_type: z.enum(['ATTACHMENT_CONTENT_TYPE_URL', 'ATTACHMENT_CONTENT_TYPE_IMAGE']),
  call_to_action_text: z.string(),
});
const AgentMessage = z.object({
  message_id: z.string(),
  text: z.string(),
  attachments: z.array(Attachment),
  response_suggestions: z.array(z.object({ message_text: z.string() })),
});
const Empty = z.object({});

/** The five client events and their payloads (addendum). */
export const CLIENT_EVENTS = {
  REQUEST_SERVICE_AGENT_JOIN: { summary: 'Bring the agent into a new session (not needed on a reconnect)', payload: Empty },
  USER_MESSAGE: { summary: 'A message of the user', payload: z.object({ text: z.string(), language_code: z.string().optional().describe('BCP 47; a change sends LANGUAGE_CHANGED') }) },
  USER_TYPING: { summary: 'The user starts or stops typing (reaches the live-agent desk; not echoed)', payload: z.object({ state: z.enum(['TYPING_STATE_STARTED', 'TYPING_STATE_STOPPED']) }) },
  USER_END_SESSION: { summary: 'The user ends the session (SESSION_END with REASON_USER_END follows)', payload: Empty },
  HEARTBEAT: { summary: 'Keeps the session from idle expiry; echoed', payload: Empty },
} as const;

/** Every server event and its payload (addendum); `SERVER_EVENT_TYPES` is the list the gateway refuses from clients. */
export const SERVER_EVENTS: Record<ServerType, { summary: string; payload: z.ZodType }> = {
  SESSION_START: {
    summary: 'First journaled event of a session',
    payload: z.object({
      capabilities: z.object({
        streaming: z.boolean(),
        max_message_size_bytes: z.literal(MAX_MESSAGE_BYTES),
        max_reconnect_attempts: z.number().int(),
        heartbeat_interval_seconds: z.number().int(),
      }),
    }),
  },
  EVENT_BATCH: { summary: 'The journal replay sent right after connect, from the cursor on', payload: z.object({ events: z.array(z.record(z.string(), z.unknown())).describe('Server events, each as sent live') }) },
  SERVICE_AGENT_JOINED: { summary: 'The agent joined (in the replay on a reconnect)', payload: z.object({ agent_name: z.string(), agent_avatar_url: z.string() }) },
  SERVICE_AGENT_THINKING: { summary: 'The agent is preparing an answer (transient)', payload: Empty },
  SERVICE_AGENT_MESSAGE: { summary: "The agent's reply", payload: AgentMessage },
  SERVICE_AGENT_MESSAGE_CHUNK: {
    summary: 'A piece of a streamed reply (sessions created with streaming_enabled)',
    payload: AgentMessage.extend({ chunk_index: z.number().int().min(1), is_complete: z.boolean() }),
  },
  SERVICE_AGENT_LEFT: { summary: 'The agent left (handoff)', payload: Empty },
  SERVICE_AGENT_TRIGGERED_HANDOFF: { summary: 'The agent hands the user off to a person', payload: Empty },
  HANDOFF_ACCEPTED: { summary: 'Server-managed handoff: queued for a live agent', payload: Empty },
  HANDOFF_FAILED: { summary: 'The handoff could not be made', payload: Empty },
  HANDOFF_TIMEOUT: { summary: 'No live agent accepted in time (SESSION_END follows)', payload: Empty },
  HANDOFF_QUEUE_STATUS: {
    summary: 'Place in the live-agent queue',
    payload: z.object({ queue_name: z.string().optional(), position_in_queue: z.number().int().optional(), estimated_wait_seconds: z.number().optional() }),
  },
  CLIENT_HANDOFF_REQUIRED: {
    summary: 'Client-managed handoff: the client connects the user to a person',
    payload: z.object({ reason: z.enum(['COMPLEX_QUERY', 'AGENT_DECISION', 'POLICY']), queue_name: z.string() }),
  },
  LIVE_AGENT_JOINED: { summary: 'A live agent accepted the session', payload: z.object({ agent: z.object({ id: z.string(), name: z.string(), avatar_url: z.string() }) }) },
  LIVE_AGENT_TYPING: { summary: 'The live agent is typing (transient)', payload: z.object({ state: z.string(), agent_id: z.string() }) },
  LIVE_AGENT_MESSAGE: { summary: "The live agent's message", payload: AgentMessage.extend({ agent_id: z.string() }) },
  LIVE_AGENT_LEFT: { summary: 'The live agent left (SESSION_END follows)', payload: Empty },
  LANGUAGE_CHANGED: { summary: "The session's language changed", payload: z.object({ language_code: z.string().describe('BCP 47') }) },
  SYSTEM_MESSAGE: {
    summary: 'A message of the platform; errors (level ERROR) leave the socket open',
    payload: z.object({ level: z.enum(['SYSTEM_MESSAGE_LEVEL_INFO', 'SYSTEM_MESSAGE_LEVEL_WARNING', 'SYSTEM_MESSAGE_LEVEL_ERROR']), message: z.string() }),
  },
  SESSION_END: { summary: 'The session ended; the gateway closes its sockets', payload: z.object({ reason: z.enum(['REASON_USER_END', 'REASON_USER_ABANDONED', 'REASON_NATURAL_END']) }) },
};

const json = (schema: z.ZodType) => {
  const { $schema: _s, ...rest } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  return rest;
};

const clientFrame = (type: string, payload: z.ZodType) =>
  json(z.object({ type: z.literal(type), payload, metadata: z.object({ custom: Custom.optional() }).optional() }));

const serverFrame = (type: string, payload: z.ZodType) =>
  json(z.object({
    id: z.string().describe('UUID; the same event has the same id on every socket and replay'),
    sequence: z.number().int().nullable().describe('Position in the session journal; null for transient events'),
    timestamp: z.string().describe('ISO 8601'),
    type: z.literal(type),
    payload,
    metadata: z.object({ custom: Custom.optional() }),
  }));

/** The AsyncAPI 3.0 document of the Messaging API's socket. */
export function asyncapiDocument(): Record<string, unknown> {
  const messages: Record<string, unknown> = {};
  const channelMessages: Record<string, { $ref: string }> = {};
  const operations: Record<string, unknown> = {};
  const add = (direction: 'send' | 'receive', name: string, summary: string, payload: Record<string, unknown>) => {
    const type = `EVENT_TYPE_${name}`;
    messages[type] = { name: type, title: type, summary, contentType: 'application/json', payload };
    channelMessages[type] = { $ref: `#/components/messages/${type}` };
    operations[`${direction}${name.toLowerCase().replace(/(^|_)([a-z])/g, (_m, _u, c: string) => c.toUpperCase())}`] = {
      action: direction,
      channel: { $ref: '#/channels/session' },
      summary: direction === 'send' ? `Client sends ${type}` : `Client receives ${type}`,
      messages: [{ $ref: `#/channels/session/messages/${type}` }],
    };
  };
  for (const [name, e] of Object.entries(CLIENT_EVENTS)) add('send', name, e.summary, clientFrame(`EVENT_TYPE_${name}`, e.payload));
  for (const [name, e] of Object.entries(SERVER_EVENTS)) add('receive', name, e.summary, serverFrame(`EVENT_TYPE_${name}`, e.payload));

  return {
    asyncapi: '3.0.0',
    info: {
      title: 'Switchboard Messaging API',
      version: '0.1.0',
      description:
        'The real-time Messaging API on the socket port (SOCKET_PORT). Obtain an access token (`POST /api/v1/access-token` with `X-Token` and `X-Host`), ' +
        'create a session (`POST /api/v1/sessions`, `Authorization: Bearer <access_token>`), then open `/ws?session_id=&access_token=[&cursor=]`. ' +
        'The first frame is EVENT_TYPE_EVENT_BATCH; on a new session send EVENT_TYPE_REQUEST_SERVICE_AGENT_JOIN. Any other client type, or a server type, ' +
        'is answered with an error EVENT_TYPE_SYSTEM_MESSAGE and the socket stays open. Frames are JSON text, at most 128 KiB.',
    },
    defaultContentType: 'application/json',
    servers: {
      socket: {
        host: '{host}',
        protocol: 'ws',
        pathname: '/ws',
        description: 'The socket gateway (uWebSockets.js); use wss behind TLS',
        variables: { host: { default: '127.0.0.1:8081', description: 'HOST:SOCKET_PORT of the socket gateway' } },
        security: [{ $ref: '#/components/securitySchemes/accessToken' }],
      },
    },
    channels: {
      session: {
        address: '/ws',
        title: 'One messaging session',
        description: 'One WebSocket of a session; up to MESSAGING_MAX_CONNECTIONS (10) sockets per session. Reconnect with the same session_id and a cursor to resume.',
        servers: [{ $ref: '#/servers/socket' }],
        messages: channelMessages,
        bindings: {
          ws: {
            method: 'GET',
            query: {
              type: 'object',
              properties: {
                session_id: { type: 'string', description: 'From POST /api/v1/sessions' },
                access_token: { type: 'string', description: 'From POST /api/v1/access-token' },
                cursor: { type: 'string', description: 'A journal sequence (n or seq:n): replay what came after it; invalid is read as 0' },
              },
              required: ['session_id', 'access_token'],
            },
          },
        },
      },
    },
    operations,
    components: {
      messages,
      securitySchemes: {
        accessToken: { type: 'httpApiKey', name: 'access_token', in: 'query', description: 'The short-lived JWT of the access-token step' },
      },
    },
  };
}
