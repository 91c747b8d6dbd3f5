import { z } from 'zod';
import { MAX_STACK_KB, WALL_FACTOR, type FunctionSandboxOptions } from '../actors/functions/mod.js';
import { NatsUrlError, parseNatsUrl } from '../actors/mod.js';
import { DEFAULT_LLM_MODEL, longestReplyMs, type LlmSettings } from '../actors/responder/mod.js';
import type { TurnTakingOptions } from '../gateway/media/turn-taking.js';
import { MAX_AGENTS_PER_ACCOUNT, type BuilderOptions } from '../builder/mod.js';
import { CONVERSATION_MAX_ATTRIBUTES_BYTES, CONVERSATION_MAX_TRANSCRIPT_BYTES } from '../machines/conversation.js';

/** The regions a deployment can serve (operator.md). */
export const REGIONS = ['us-1', 'uk-1', 'euw-1'] as const;
export type Region = (typeof REGIONS)[number];

/**
 * A whole number written in decimal digits (a leading minus only where `min` is negative), from `min` to `max`.
 * Not `z.coerce.number()`: `Number()` reads whitespace as 0 (`EDGE_PORT="  "` was port 0, any free one) and takes
 * `0x1F90`, `1e3` or ` 8080 ` as numbers, none of which the operator meant as written.
 */
export function integer(min: number, max: number) {
  const digits = min < 0 ? /^-?\d+$/ : /^\d+$/;
  return z
    .string()
    .regex(digits, min < 0 ? 'must be a whole number in decimal digits, with an optional leading minus' : 'must be a whole number in decimal digits (0-9 only)')
    .transform(Number)
    .pipe(z.number().min(min).max(max));
}

/** A number written in decimal digits with an optional fraction (`0.5`), from `min` (positive) to `max`. */
export function decimal(min: number, max: number) {
  return z
    .string()
    .regex(/^\d+(?:\.\d+)?$/, 'must be a number in decimal digits, with an optional fraction (0.5)')
    .transform(Number)
    .pipe(z.number().min(min).max(max));
}

const port = integer(0, 65535);

/** The characters an `OPERATOR_TOKEN` may hold: visible ASCII (`!` to `~`), what `Bearer <token>` carries whole. */
export const OPERATOR_TOKEN_PATTERN = /^[\x21-\x7E]+$/;

/** An `OPERATOR_TOKEN` shorter than this is accepted with a warning at start: the admin API's key should not be guessable. */
export const WEAK_OPERATOR_TOKEN = 16;

const EnvSchema = z.object({
  EDGE_PORT: port.default(8080),
  SOCKET_PORT: port.default(8081),
  HOST: z.string().min(1).default('127.0.0.1'),
  SIP_PORT: port.default(5060),
  SIP_TLS_PORT: z.union([z.literal('off'), port], { error: 'must be off, or a port in decimal digits (0 to 65535)' }).default(5061),
  SIP_TLS_CERT: z.string().min(1).optional(),
  SIP_TLS_KEY: z.string().min(1).optional(),
  SIP_TLS_VERIFY: z.enum(['true', 'false']).default('true'),
  RTP_PORT_MIN: port.default(10000),
  RTP_PORT_MAX: port.default(20000),
  VOICE_SPEECH_LEVEL: integer(1, 32767).default(600),
  VOICE_END_SILENCE_MS: integer(100, 10_000).default(700),
  VOICE_NO_INPUT_MS: integer(500, 600_000).default(8000),
  VOICE_INTER_DIGIT_MS: integer(100, 60_000).default(1500),
  VOICE_MEDIA_TIMEOUT_MS: integer(1000, 3_600_000).default(60_000),
  VOICE_TRANSFER_RING_TIMEOUT_MS: integer(1000, 600_000).default(30_000),
  SIP_PENDING_INVITES_PER_ADDRESS: integer(1, 100_000).default(64),
  DATA_DIR: z.string().min(1).default('./data'),
  RECORDING_RETENTION_DAYS: integer(0, 36_500).default(30),
  RECORDING_CHUNK_MS: integer(100, 60_000).default(1000),
  // Any length: operator.md sets none, and scripts start the platform with tokens of their own. A short one is
  // warned about at start (`WEAK_OPERATOR_TOKEN`). Only what a request can present: the admin API reads the token
  // after `Bearer ` as visible ASCII characters (`platform/bearer.ts`), and a header carries no other characters
  // as they are, so a token with a space, a control or a non-ASCII character would make every admin call a 401.
  OPERATOR_TOKEN: z.string().regex(OPERATOR_TOKEN_PATTERN, 'OPERATOR_TOKEN must be visible ASCII characters (! to ~) only: no space, tab, control or non-ASCII character').optional(),
  REGION: z.enum(REGIONS).default('us-1'),
  // Refused at start when it does not name its servers cleanly (an unencoded '@' in a password made the
  // password's tail the host); the message never shows the URL.
  NATS_URL: z
    .string()
    .min(1)
    .superRefine((url, ctx) => {
      try {
        parseNatsUrl(url);
      } catch (err) {
        if (!(err instanceof NatsUrlError)) throw err;
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: err.message });
      }
    })
    .optional(),
  EDGE_THREAD: z.enum(['on', 'off']).default('on'),
  // Set, it chooses the MongoDB store (`openStore`): a value the driver cannot read as a connection string is
  // refused here, naming the variable and not showing the URL (it may hold a password), rather than by the driver's
  // own `MongoParseError`, which named neither.
  MONGODB_URL: z
    .string()
    .superRefine((url, ctx) => {
      const problem = mongoUrlProblem(url);
      if (problem) ctx.addIssue({ code: z.ZodIssueCode.custom, message: problem });
    })
    .optional(),
  SHARDS: integer(1, 4096).default(64),
  LEASE_TTL_MS: integer(300, 600_000).default(3000),
  PASSIVATE_AFTER_MS: integer(10, 86_400_000).default(60_000),
  ASK_TIMEOUT_MS: integer(100, 600_000).default(10_000),
  CONVERSATION_IDLE_MS: integer(1000, 7 * 86_400_000).default(1_800_000),
  CONVERSATION_MAX_TRANSCRIPT_BYTES: integer(1024, 256 * 1024 * 1024).default(CONVERSATION_MAX_TRANSCRIPT_BYTES),
  // At least 4 KiB: a Messaging API session's attributes (its platform, a user agent of 512 characters) always fit.
  CONVERSATION_MAX_ATTRIBUTES_BYTES: integer(4096, 16 * 1024 * 1024).default(CONVERSATION_MAX_ATTRIBUTES_BYTES),
  FUNCTION_TIMEOUT_MS: integer(10, 60_000).default(1000),
  FUNCTION_HEAP_MB: integer(1, 4096).default(64),
  FUNCTION_STACK_KB: integer(16, MAX_STACK_KB).default(256),
  FUNCTION_PROCESSES: integer(1, 256).default(4),
  FUNCTION_PROJECT_CONCURRENCY: integer(1, 256).optional(),
  FUNCTION_QUEUE_PER_PROJECT: integer(1, 100_000).default(256),
  FUNCTION_PROCESS_MAX_MB: integer(128, 65_536).default(512),
  FUNCTION_ISOLATION: z.enum(['auto', 'bwrap', 'unshare', 'uid', 'none']).default('auto'),
  SESSION_IDLE_MS: integer(1000, 7 * 86_400_000).default(600_000),
  MESSAGING_TOKEN_TTL_S: integer(10, 30 * 86_400).default(86_400),
  MESSAGING_MAX_CONNECTIONS: integer(1, 10_000).default(10),
  HANDOFF_TIMEOUT_MS: integer(1000, 86_400_000).default(300_000),
  HANDOFF_QUEUE_STATUS_MS: integer(200, 3_600_000).default(15_000),
  MESSAGING_HTTP_RATE: integer(1, 1_000_000).default(600),
  MESSAGING_WS_RATE: integer(1, 1_000_000).default(20),
  MESSAGING_CONNECTION_TTL_MS: integer(1000, 3_600_000).default(90_000),
  MESSAGING_ADDRESS_RATE: integer(1, 10_000_000).default(6000),
  SOCKET_IDLE_TIMEOUT_S: integer(8, 960).default(120),
  SOCKET_BODY_TIMEOUT_MS: integer(100, 600_000).default(10_000),
  SOCKET_MAX_CONNECTIONS: integer(1, 1_000_000).default(10_000),
  SOCKET_MAX_CONNECTIONS_PER_ACCOUNT: integer(1, 1_000_000).default(5_000),
  CHAT_RATE_PER_KEY: decimal(0.001, 1_000_000).default(2000),
  CHAT_BURST_PER_KEY: integer(1, 10_000_000).default(4000),
  CHAT_RATE_PER_PROJECT: decimal(0.001, 1_000_000).default(5000),
  CHAT_BURST_PER_PROJECT: integer(1, 10_000_000).default(10_000),
  EXTERNAL_EVENT_RATE_PER_PROJECT: decimal(0.001, 1_000_000).default(50),
  EXTERNAL_EVENT_BURST_PER_PROJECT: integer(1, 10_000_000).default(500),
  EDGE_HEADERS_TIMEOUT_MS: integer(100, 600_000).default(10_000),
  EDGE_REQUEST_TIMEOUT_MS: integer(100, 3_600_000).default(30_000),
  EDGE_CONNECTION_TIMEOUT_MS: integer(100, 3_600_000).default(120_000),
  EDGE_KEEP_ALIVE_TIMEOUT_MS: integer(100, 3_600_000).default(72_000),
  EDGE_MAX_CONNECTIONS: integer(1, 1_000_000).default(4096),
  SLOT_CACHE_MB: integer(0, 65_536).default(128),
  AGENTS_MAX_PER_ACCOUNT: integer(1, 1_000_000).default(MAX_AGENTS_PER_ACCOUNT),
  TENANCY_CACHE_TTL_MS: integer(0, 600_000).default(10_000),
  TENANCY_CACHE_ENTRIES: integer(1, 10_000_000).default(10_000),
  MESSAGING_SECRET: z.string().min(32, 'MESSAGING_SECRET must be at least 32 characters').optional(),
  EXTERNAL_EVENT_MAX_BYTES: integer(1024, 16 * 1024 * 1024).default(256 * 1024),
  EXTERNAL_EVENT_TIMEOUT_MS: integer(1000, 30 * 86_400_000).default(3_600_000),
  EXTERNAL_EVENT_MAX_TIMEOUT_MS: integer(1000, 30 * 86_400_000).default(7 * 86_400_000),
  EXTERNAL_EVENT_RETENTION_MS: integer(1000, 365 * 86_400_000).default(7 * 86_400_000),
  OUTBOUND_TRUNK_CONCURRENCY: integer(1, 100_000).default(10),
  OUTBOUND_QUEUE_TIMEOUT_MS: integer(100, 3_600_000).default(30_000),
  OUTBOUND_RING_TIMEOUT_MS: integer(100, 600_000).default(30_000),
  OUTBOUND_STATUS_RETENTION_MS: integer(100, 7 * 86_400_000).default(2 * 3_600_000),
  // The responder's (`Config.llm`: the URL, key and model trimmed, blank as unset): a value it could not use stops
  // the start rather than making every answer an apology, or the timeout its default.
  LLM_BASE_URL: baseUrl('LLM_BASE_URL', 'the base of an OpenAI-compatible API, such as https://api.openai.com/v1').optional(),
  LLM_API_KEY: z.string().optional(),
  LLM_MODEL: z.string().optional(),
  LLM_TIMEOUT_MS: integer(100, 600_000).optional(),
  // Read where they are used, trimmed, blank as unset: semantic search's embedder (`createEmbedderFromEnv`,
  // actors/conversation/embedding.ts) and the media gateway's speech engines (`speechFromEnv`,
  // gateway/media/speech/from-env.ts). Checked here alike: a URL the adapter could not call failed every
  // search, and every call's speech, with nothing said at start.
  EMBEDDINGS_BASE_URL: baseUrl('EMBEDDINGS_BASE_URL', 'the base of an OpenAI-compatible embeddings API, such as https://api.openai.com/v1').optional(),
  TTS_BASE_URL: baseUrl('TTS_BASE_URL', 'the base of an OpenAI-compatible speech API, such as https://api.openai.com/v1').optional(),
  STT_BASE_URL: baseUrl('STT_BASE_URL', 'the base of an OpenAI-compatible transcription API, such as https://api.openai.com/v1').optional(),
  // The language the OpenAI-compatible recogniser is told to expect, read by `speechFromEnv` (trimmed, blank as
  // unset); the calls' `asr_lang_code`, which the Conversations API's `language` filter matches.
  STT_LANGUAGE: z
    .string()
    .refine((v) => v.trim() === '' || (v.trim().length <= MAX_LANGUAGE_TAG && LANGUAGE_TAG.test(v.trim())), 'STT_LANGUAGE must be a BCP 47 language tag such as en-US or fr-FR')
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
  WEBHOOK_DELIVERY_RETENTION_MS: integer(1000, 365 * 86_400_000).default(30 * 86_400_000),
  WEBHOOK_RETRY_SCHEDULE_MS: z
    .string()
    .regex(/^\s*\d+(\s*,\s*\d+){0,19}\s*$/, 'WEBHOOK_RETRY_SCHEDULE_MS must be 1 to 20 comma-separated offsets in ms')
    .transform((v) => v.split(',').map((d) => Number(d.trim())))
    .refine((d) => d.every((ms) => ms <= 7 * 86_400_000), 'WEBHOOK_RETRY_SCHEDULE_MS offsets are at most 7 days')
    .refine((d) => d.every((ms, i) => i === 0 || ms >= d[i - 1]), 'WEBHOOK_RETRY_SCHEDULE_MS offsets are from the series\' start: none smaller than the one before')
    .default([0, 60_000, 300_000, 900_000, 3_600_000, 14_400_000]),
  WEBHOOK_ALLOW_PRIVATE_URLS: z.enum(['true', 'false']).default('false'),
  WEBHOOK_SECRETS_KEY: z
    .string()
    .refine((v) => Buffer.from(v, 'base64').length === 32, 'WEBHOOK_SECRETS_KEY must be the base64 of 32 bytes')
    .optional(),
  ALERTS_EVAL_INTERVAL_MS: integer(50, 86_400_000).default(60_000),
  // Read where it is used (`BUCKET_MS`, actors/metrics/buckets.ts: every thread must agree on it, the projection
  // runner's too), checked here: a value it could not take was silently a minute. At most a minute: a rule's `5m`
  // window is 5 buckets; shorter ones are for tests, whose windows must empty within them.
  METRICS_BUCKET_MS: integer(10, 60_000).default(60_000),
  API_ERRORS_FLUSH_MS: integer(50, 60_000).default(2000),
  METRICS_PORT: integer(0, 65_535).optional(),
  PROJECTION_PARTITIONS: integer(1, 4096).default(16),
  PROJECTION_BATCH: integer(1, 100_000).default(1000),
  PROJECTION_POLL_MS: integer(10, 600_000).default(1000),
  PROJECTION_INTERVAL_MS: integer(0, 10_000).default(20),
  PROJECTION_MODULES: z.string().optional(),
  PROJECTION_NICE: integer(0, 19).default(10),
  PROJECTION_YIELD_BELOW_MS: integer(1, 600_000).default(100),
}).refine((e) => e.EDGE_HEADERS_TIMEOUT_MS <= e.EDGE_REQUEST_TIMEOUT_MS, {
  // Node refuses a server whose header deadline is later than its whole-request deadline.
  message: 'EDGE_HEADERS_TIMEOUT_MS must not exceed EDGE_REQUEST_TIMEOUT_MS',
  path: ['EDGE_HEADERS_TIMEOUT_MS'],
}).refine((e) => e.RTP_PORT_MIN <= e.RTP_PORT_MAX, {
  // Swapped bounds are a mistake to report, not a range to guess (`0`, `0` is any port).
  message: 'RTP_PORT_MIN must not exceed RTP_PORT_MAX',
  path: ['RTP_PORT_MIN'],
});

/**
 * A BCP 47 tag's form (RFC 5646 2.1): a primary subtag of 2 to 8 letters, or `x` (private use) or `i` (a
 * grandfathered tag), then any number of subtags of 1 to 8 letters or digits (`en-US`, `zh-Hant-TW`,
 * `sl-Latn-IT-rozaj-nedis-1996`, `x-private`, `i-klingon`), at most `MAX_LANGUAGE_TAG` characters.
 */
const LANGUAGE_TAG = /^(?:[A-Za-z]{2,8}|[xXiI])(?:-[A-Za-z0-9]{1,8})*$/;
const MAX_LANGUAGE_TAG = 64;

/**
 * The base URL of an API the platform calls, `name`d: read trimmed, blank as unset (as its readers read it), else
 * an absolute http or https URL. The message that refuses one does not show it: it may hold a key.
 */
function baseUrl(name: string, what: string) {
  return z.string().refine((v) => v.trim() === '' || isHttpUrl(v.trim()), `${name} must be an http or https URL (${what})`);
}

/** Whether `url` is an absolute http or https URL. */
function isHttpUrl(url: string): boolean {
  try {
    const { protocol, hostname } = new URL(url);
    return (protocol === 'http:' || protocol === 'https:') && hostname !== '';
  } catch {
    return false;
  }
}

/**
 * Why `url` is not a MongoDB connection string the driver reads, or null: its scheme (`mongodb://` or
 * `mongodb+srv://`, as written), a host list (after the user name and password, up to the path or the options),
 * no unencoded `@` after the first. Read as the driver's parser reads it (mongodb-connection-string-url); the
 * message never shows the URL.
 */
export function mongoUrlProblem(url: string): string | null {
  const scheme = ['mongodb://', 'mongodb+srv://'].find((s) => url.startsWith(s));
  if (!scheme) return 'MONGODB_URL must be a mongodb:// or mongodb+srv:// connection string (such as mongodb://localhost:27017/?replicaSet=rs0)';
  const rest = url.slice(scheme.length);
  const hostsAt = rest.indexOf('@') + 1;
  let hostsEnd = hostsAt;
  while (hostsEnd < rest.length && !'/?@'.includes(rest[hostsEnd])) hostsEnd++;
  const hosts = rest.slice(hostsAt, hostsEnd);
  if (hosts === '' || hosts.startsWith(':')) {
    return 'MONGODB_URL names no host: mongodb://[user:password@]host[:port][,host[:port]...][/database][?options]';
  }
  if (rest[hostsEnd] === '@') return 'MONGODB_URL has an unencoded @ in its user name or password: percent-encode it (%40)';
  return null;
}

/** Everything the platform reads from its environment, parsed once at start. */
export interface Config {
  edgePort: number;
  socketPort: number;
  host: string;
  /** The media gateway (SIP and RTP on HOST, turn-taking): `gateway/media`. */
  media: MediaConfig;
  dataDir: string;
  /** Call recordings (gateway/media/recordings, docs/recordings.md): days kept (0: none recorded), chunk length. */
  recordings: { retentionDays: number; chunkMs: number };
  operatorToken: string | undefined;
  region: Region;
  natsUrl: string | undefined;
  /**
   * `EDGE_THREAD`: whether a process that runs the edge and the worker roles without NATS (the embedded
   * default) serves HTTP from a thread of its own (`platform/edge-thread.ts`).
   */
  edgeThread: boolean;
  mongodbUrl: string | undefined;
  logLevel: string;
  /** `auto` (pretty on a terminal, JSON otherwise), `json` or `pretty`. */
  logFormat: 'auto' | 'json' | 'pretty';
  /** Shards actor keys hash to; the same on every process of a deployment. */
  shardCount: number;
  /**
   * External events: the largest body the webhook takes (bytes), the wait of `conv.await_external_event`
   * without `timeout_ms`, the longest wait a function may ask for (longer ones are cut to it), and how long a
   * stored event is kept from its receipt (`EXTERNAL_EVENT_RETENTION_MS`).
   */
  externalEvents: { maxBytes: number; defaultTimeoutMs: number; maxTimeoutMs: number; retentionMs: number };
  /**
   * Webhook deliveries: when each attempt of a series is due, from its start (`WEBHOOK_RETRY_SCHEDULE_MS`), whether
   * loopback and private destinations are allowed (`WEBHOOK_ALLOW_PRIVATE_URLS`), the key that encrypts
   * signing secrets at rest (`WEBHOOK_SECRETS_KEY`; unset: a key file in the data dir), and how long a finished
   * delivery stays in the log (`WEBHOOK_DELIVERY_RETENTION_MS`).
   */
  webhooks: { retryScheduleMs: number[]; allowPrivateUrls: boolean; secretsKey: string | undefined; deliveryRetentionMs: number };
  /**
   * Alert rules: the time between evaluations (`ALERTS_EVAL_INTERVAL_MS`), and how often an edge appends its
   * 5xx counts (the `api_errors` metric) to the journal (`API_ERRORS_FLUSH_MS`).
   */
  alerts: { evalIntervalMs: number; apiErrorsFlushMs: number };
  /** Prometheus `GET /metrics` on this port too (processes without an edge port); unset: only on the edge. */
  metricsPort: number | undefined;
  /** Shard lease lifetime: how long a dead worker's shards wait before others take them. */
  leaseTtlMs: number;
  /** Idle time after which a live actor is dropped from memory (its state is already stored). */
  passivateAfterMs: number;
  /** How long a sender keeps retrying an ask (owner changes included). */
  askTimeoutMs: number;
  /**
   * How long the Chat API and a messaging session wait for a conversation's turn: the ask timeout, plus two of
   * the longest replies the responder may make (`longestReplyMs`: a chat created with a first message greets and
   * answers in one turn), plus three hooks, functions counted at their wall-clock bound (`WALL_FACTOR` times
   * `FUNCTION_TIMEOUT_MS`). A slow model is waited for and its own failure reported, rather than the turn called
   * overloaded while it goes on (it would then be kept without its asker knowing, and the next message dropped
   * behind it). Read from this process's environment: the `LLM_*` variables belong on the edge too. With no
   * worker owning the conversation an ask still ends at the ask timeout (`ActorClient`).
   */
  turnWaitMs: number;
  /** An idle conversation ends by itself this long after its last turn. */
  conversationIdleMs: number;
  /**
   * The most bytes of text a conversation's transcript holds (`CONVERSATION_MAX_TRANSCRIPT_BYTES`, the workers'):
   * what a function would say past it is a function error, and the turn that reaches it ends the conversation.
   */
  conversationMaxTranscriptBytes: number;
  /**
   * The most bytes of JSON a conversation's integration attributes hold, merged over its messages
   * (`CONVERSATION_MAX_ATTRIBUTES_BYTES`, the edge's): a Chat API create or respond that would take them past it is refused.
   */
  conversationMaxAttributesBytes: number;
  /**
   * The responder (`LLM_*`): the OpenAI-compatible client's base URL, key, model and request time limit, read here
   * only, for the workers' responder (`createResponder`) and every process's `turnWaitMs` (`longestReplyMs`).
   */
  llm: LlmSettings;
  /** Time limit of one project-function call. */
  functionTimeoutMs: number;
  /** The project-function sandbox: memory and stack limit per call, processes, per-project quota and queue, OS isolation. */
  functions: Required<Omit<FunctionSandboxOptions, 'timeoutMs' | 'projectConcurrency'>> & Pick<FunctionSandboxOptions, 'projectConcurrency'>;
  /**
   * The tenancy cache of each serving process (`tenancy/cache.ts`): how long a key, connector, account,
   * project or settings record read from the store is used before it is read again (0: always read), and how
   * many entries each of its caches holds.
   */
  tenancyCache: { ttlMs: number; maxEntries: number };
  /** The Agents API's bounds (`builder/`): the most agents an account holds (`AGENTS_MAX_PER_ACCOUNT`). */
  builder: BuilderOptions;
  /** Messaging API settings (the socket gateway and the session actor). */
  messaging: MessagingConfig;
  /** The Fastify edge's limits against floods and slow clients. */
  edge: EdgeConfig;
  /**
   * The projection runner: journal partitions (at most `shardCount` are used), entries per read, the
   * fallback poll interval, its thread's lower priority while it keeps up, and extra projector modules
   * (paths, comma-separated in `PROJECTION_MODULES`).
   */
  projections: { partitions: number; batch: number; pollMs: number; intervalMs: number; nice: number; yieldBelowMs: number; modules: string[] };
  /** Outbound calls (the call actor): per-trunk concurrency, queueing and ringing limits, status retention. */
  outbound: OutboundConfig;
}

export interface OutboundConfig {
  /** Calls one SIP trunk carries at once unless its telephony connector sets `max_concurrent_calls`. */
  trunkConcurrency: number;
  /** How long a call waits for a free trunk slot before it fails (`queue timeout`). */
  queueTimeoutMs: number;
  /** How long the far end may ring before the call fails as unanswered. */
  ringTimeoutMs: number;
  /** How long after a call ends its status is kept (then 404). */
  statusRetentionMs: number;
}

/** What the media gateway reads from the environment (docs/voice.md). */
export interface MediaConfig {
  /** SIP over UDP and TCP (0: any free port). */
  sipPort: number;
  /** SIP over TLS (0: any free port; null: `SIP_TLS_PORT=off`). */
  tlsPort: number | null;
  /** PEM files of the TLS certificate; unset: a self-signed one generated into `DATA_DIR/sip-tls/`. */
  tlsCertFile?: string;
  tlsKeyFile?: string;
  /** Whether a trunk's TLS certificate is verified when the gateway dials out. */
  tlsVerify: boolean;
  /** RTP ports (0 and 0: any free port). */
  rtpPortMin: number;
  rtpPortMax: number;
  /** Energy level of speech, end-of-speech silence, no-input timeout, digit collection. */
  turnTaking: TurnTakingOptions;
  /** A call whose far end sends no RTP for this long is hung up (`VOICE_MEDIA_TIMEOUT_MS`). */
  mediaTimeoutMs: number;
  /** How long a bridged transfer's destination may ring (`VOICE_TRANSFER_RING_TIMEOUT_MS`). */
  transferRingTimeoutMs: number;
  /** INVITEs from one address not yet answered or ACKed; more are 503 (`SIP_PENDING_INVITES_PER_ADDRESS`). */
  pendingInvitesPerAddress: number;
}

/** A token bucket: `rate` tokens a second, holding at most `burst`. */
export interface Bucket {
  rate: number;
  burst: number;
}

/** What the Fastify edge reads from the environment: Chat API rate limits and the HTTP server's timeouts. */
export interface EdgeConfig {
  /** Chat API requests per API key. */
  chatPerKey: Bucket;
  /** Chat API requests per project, all its keys together. */
  chatPerProject: Bucket;
  /**
   * External Events API requests per project (the webhook and bridge-ended together, every key of the
   * project): a stored event is kept for the retention, so the rate bounds how fast a project's key can fill
   * the disk.
   */
  externalEventsPerProject: Bucket;
  /** A client must have sent a request's headers within this (Node's `headersTimeout`). */
  headersTimeoutMs: number;
  /** A client must have sent a whole request, body included, within this (Node's `requestTimeout`). */
  requestTimeoutMs: number;
  /** A socket with no traffic either way this long is closed (Fastify's `connectionTimeout`). */
  connectionTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (Fastify's `keepAliveTimeout`). */
  keepAliveTimeoutMs: number;
  /** Connections the edge holds at once; later ones are closed at once (Node's `maxConnections`). */
  maxConnections: number;
  /** Memory for each kind of slot kept decoded between reads (vectors for semantic search, spans for concurrency and random sampling), MiB (0: none kept). */
  slotCacheMb: number;
}

/** What the Messaging API reads from the environment. */
export interface MessagingConfig {
  /** A messaging session ends (REASON_USER_ABANDONED) this long after its last activity. */
  sessionIdleMs: number;
  /** `expires_in` of an access token, seconds. */
  tokenTtlS: number;
  /** Simultaneous WebSocket connections per session, across every gateway. */
  maxConnections: number;
  /** A server-managed handoff nobody accepts within this long times out. */
  handoffTimeoutMs: number;
  /** How often a session waiting for a live agent looks at its place in the queue (sent when it changed). */
  queueStatusMs: number;
  /** HTTP requests per minute per connector token (access token step) or per access token (sessions). */
  httpRatePerMinute: number;
  /** Client events per second per session on one gateway (bursts up to twice that). */
  wsRatePerSecond: number;
  /** A connection stops counting this long after its gateway last refreshed it (gateways refresh every third of it). */
  connectionTtlMs: number;
  /** Requests per minute per client address over the access-token and session steps and socket upgrades. */
  addressRatePerMinute: number;
  /** uWS closes a socket that answers no ping within this many seconds (the `idleTimeout` of `/ws`). */
  idleTimeoutS: number;
  /** An HTTP body not received whole within this is answered 408 and its connection closed. */
  bodyTimeoutMs: number;
  /** WebSockets open (or being upgraded) on this gateway process at once; the next upgrade is 429. */
  maxSockets: number;
  /** The same per account (the owner of the session), so that one account cannot take them all. */
  maxSocketsPerAccount: number;
  /** JWT signing secret; unset: a random one kept in the store, shared by every process of a deployment. */
  secret: string | undefined;
}

/** Parses the environment; throws with every problem listed when a variable is invalid. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const blankAsUnset = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== ''));
  const parsed = EnvSchema.safeParse(blankAsUnset);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  const llm: LlmSettings = {
    baseUrl: e.LLM_BASE_URL?.trim() || undefined,
    apiKey: e.LLM_API_KEY?.trim() || undefined,
    model: e.LLM_MODEL?.trim() || DEFAULT_LLM_MODEL,
    timeoutMs: e.LLM_TIMEOUT_MS,
  };
  return {
    edgePort: e.EDGE_PORT,
    socketPort: e.SOCKET_PORT,
    host: e.HOST,
    media: {
      sipPort: e.SIP_PORT,
      tlsPort: e.SIP_TLS_PORT === 'off' ? null : e.SIP_TLS_PORT,
      tlsCertFile: e.SIP_TLS_CERT,
      tlsKeyFile: e.SIP_TLS_KEY,
      tlsVerify: e.SIP_TLS_VERIFY === 'true',
      rtpPortMin: e.RTP_PORT_MIN,
      rtpPortMax: e.RTP_PORT_MAX,
      turnTaking: { speechLevel: e.VOICE_SPEECH_LEVEL, speechStartMs: 60, endSilenceMs: e.VOICE_END_SILENCE_MS, noInputMs: e.VOICE_NO_INPUT_MS, interDigitMs: e.VOICE_INTER_DIGIT_MS, maxUtteranceMs: 15_000 },
      mediaTimeoutMs: e.VOICE_MEDIA_TIMEOUT_MS,
      transferRingTimeoutMs: e.VOICE_TRANSFER_RING_TIMEOUT_MS,
      pendingInvitesPerAddress: e.SIP_PENDING_INVITES_PER_ADDRESS,
    },
    dataDir: e.DATA_DIR,
    recordings: { retentionDays: e.RECORDING_RETENTION_DAYS, chunkMs: e.RECORDING_CHUNK_MS },
    operatorToken: e.OPERATOR_TOKEN,
    region: e.REGION,
    natsUrl: e.NATS_URL,
    edgeThread: e.EDGE_THREAD === 'on',
    mongodbUrl: e.MONGODB_URL,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    shardCount: e.SHARDS,
    externalEvents: { maxBytes: e.EXTERNAL_EVENT_MAX_BYTES, defaultTimeoutMs: e.EXTERNAL_EVENT_TIMEOUT_MS, maxTimeoutMs: e.EXTERNAL_EVENT_MAX_TIMEOUT_MS, retentionMs: e.EXTERNAL_EVENT_RETENTION_MS },
    webhooks: { retryScheduleMs: e.WEBHOOK_RETRY_SCHEDULE_MS, allowPrivateUrls: e.WEBHOOK_ALLOW_PRIVATE_URLS === 'true', secretsKey: e.WEBHOOK_SECRETS_KEY, deliveryRetentionMs: e.WEBHOOK_DELIVERY_RETENTION_MS },
    alerts: { evalIntervalMs: e.ALERTS_EVAL_INTERVAL_MS, apiErrorsFlushMs: e.API_ERRORS_FLUSH_MS },
    metricsPort: e.METRICS_PORT,
    leaseTtlMs: e.LEASE_TTL_MS,
    passivateAfterMs: e.PASSIVATE_AFTER_MS,
    askTimeoutMs: e.ASK_TIMEOUT_MS,
    turnWaitMs: e.ASK_TIMEOUT_MS + 2 * longestReplyMs(llm, WALL_FACTOR * e.FUNCTION_TIMEOUT_MS) + 3 * WALL_FACTOR * e.FUNCTION_TIMEOUT_MS,
    llm,
    conversationIdleMs: e.CONVERSATION_IDLE_MS,
    conversationMaxTranscriptBytes: e.CONVERSATION_MAX_TRANSCRIPT_BYTES,
    conversationMaxAttributesBytes: e.CONVERSATION_MAX_ATTRIBUTES_BYTES,
    functionTimeoutMs: e.FUNCTION_TIMEOUT_MS,
    functions: {
      memoryMb: e.FUNCTION_HEAP_MB,
      stackKb: e.FUNCTION_STACK_KB,
      processes: e.FUNCTION_PROCESSES,
      projectConcurrency: e.FUNCTION_PROJECT_CONCURRENCY,
      queuePerProject: e.FUNCTION_QUEUE_PER_PROJECT,
      processMaxMb: e.FUNCTION_PROCESS_MAX_MB,
      isolation: e.FUNCTION_ISOLATION,
    },
    tenancyCache: { ttlMs: e.TENANCY_CACHE_TTL_MS, maxEntries: e.TENANCY_CACHE_ENTRIES },
    builder: { maxAgentsPerAccount: e.AGENTS_MAX_PER_ACCOUNT },
    messaging: {
      sessionIdleMs: e.SESSION_IDLE_MS,
      tokenTtlS: e.MESSAGING_TOKEN_TTL_S,
      maxConnections: e.MESSAGING_MAX_CONNECTIONS,
      handoffTimeoutMs: e.HANDOFF_TIMEOUT_MS,
      queueStatusMs: e.HANDOFF_QUEUE_STATUS_MS,
      httpRatePerMinute: e.MESSAGING_HTTP_RATE,
      wsRatePerSecond: e.MESSAGING_WS_RATE,
      connectionTtlMs: e.MESSAGING_CONNECTION_TTL_MS,
      secret: e.MESSAGING_SECRET,
      addressRatePerMinute: e.MESSAGING_ADDRESS_RATE,
      idleTimeoutS: e.SOCKET_IDLE_TIMEOUT_S,
      bodyTimeoutMs: e.SOCKET_BODY_TIMEOUT_MS,
      maxSockets: e.SOCKET_MAX_CONNECTIONS,
      maxSocketsPerAccount: e.SOCKET_MAX_CONNECTIONS_PER_ACCOUNT,
    },
    edge: {
      chatPerKey: { rate: e.CHAT_RATE_PER_KEY, burst: e.CHAT_BURST_PER_KEY },
      chatPerProject: { rate: e.CHAT_RATE_PER_PROJECT, burst: e.CHAT_BURST_PER_PROJECT },
      externalEventsPerProject: { rate: e.EXTERNAL_EVENT_RATE_PER_PROJECT, burst: e.EXTERNAL_EVENT_BURST_PER_PROJECT },
      headersTimeoutMs: e.EDGE_HEADERS_TIMEOUT_MS,
      requestTimeoutMs: e.EDGE_REQUEST_TIMEOUT_MS,
      connectionTimeoutMs: e.EDGE_CONNECTION_TIMEOUT_MS,
      keepAliveTimeoutMs: e.EDGE_KEEP_ALIVE_TIMEOUT_MS,
      maxConnections: e.EDGE_MAX_CONNECTIONS,
      slotCacheMb: e.SLOT_CACHE_MB,
    },
    outbound: {
      trunkConcurrency: e.OUTBOUND_TRUNK_CONCURRENCY,
      queueTimeoutMs: e.OUTBOUND_QUEUE_TIMEOUT_MS,
      ringTimeoutMs: e.OUTBOUND_RING_TIMEOUT_MS,
      statusRetentionMs: e.OUTBOUND_STATUS_RETENTION_MS,
    },
    projections: {
      partitions: e.PROJECTION_PARTITIONS,
      batch: e.PROJECTION_BATCH,
      pollMs: e.PROJECTION_POLL_MS,
      intervalMs: e.PROJECTION_INTERVAL_MS,
      nice: e.PROJECTION_NICE,
      yieldBelowMs: e.PROJECTION_YIELD_BELOW_MS,
      modules: (e.PROJECTION_MODULES ?? '').split(',').map((m) => m.trim()).filter(Boolean),
    },
  };
}
