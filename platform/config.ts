import { z } from 'zod';

/** The regions a deployment can serve (operator.md). */
export const REGIONS = ['us-1', 'uk-1', 'euw-1'] as const;

const port = z.coerce.number().int().min(0).max(65535);

const EnvSchema = z.object({
  EDGE_PORT: port.default(8080),
  SOCKET_PORT: port.default(8081),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATA_DIR: z.string().min(1).default('./data'),
  OPERATOR_TOKEN: z.string().min(16, 'OPERATOR_TOKEN must be at least 16 characters').optional(),
  REGION: z.enum(REGIONS).default('us-1'),
  NATS_URL: z.string().min(1).optional(),
  MONGODB_URL: z.string().min(1).optional(),
  SHARDS: z.coerce.number().int().min(1).max(4096).default(64),
  LEASE_TTL_MS: z.coerce.number().int().min(300).max(600_000).default(3000),
  PASSIVATE_AFTER_MS: z.coerce.number().int().min(10).max(86_400_000).default(60_000),
  ASK_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  CONVERSATION_IDLE_MS: z.coerce.number().int().min(1000).max(7 * 86_400_000).default(1_800_000),
  FUNCTION_TIMEOUT_MS: z.coerce.number().int().min(10).max(60_000).default(1000),
  FUNCTION_HEAP_MB: z.coerce.number().int().min(8).max(4096).default(64),
  SESSION_IDLE_MS: z.coerce.number().int().min(1000).max(7 * 86_400_000).default(600_000),
  MESSAGING_TOKEN_TTL_S: z.coerce.number().int().min(10).max(30 * 86_400).default(86_400),
  MESSAGING_MAX_CONNECTIONS: z.coerce.number().int().min(1).max(10_000).default(10),
  HANDOFF_TIMEOUT_MS: z.coerce.number().int().min(1000).max(86_400_000).default(300_000),
  HANDOFF_QUEUE_STATUS_MS: z.coerce.number().int().min(200).max(3_600_000).default(15_000),
  MESSAGING_HTTP_RATE: z.coerce.number().int().min(1).max(1_000_000).default(600),
  MESSAGING_WS_RATE: z.coerce.number().int().min(1).max(1_000_000).default(20),
  MESSAGING_CONNECTION_TTL_MS: z.coerce.number().int().min(1000).max(3_600_000).default(90_000),
  MESSAGING_SECRET: z.string().min(32, 'MESSAGING_SECRET must be at least 32 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['auto', 'json', 'pretty']).default('auto'),
});

/** Everything the platform reads from its environment, parsed once at start. */
export interface Config {
  edgePort: number;
  socketPort: number;
  host: string;
  dataDir: string;
  operatorToken: string | undefined;
  region: (typeof REGIONS)[number];
  natsUrl: string | undefined;
  mongodbUrl: string | undefined;
  logLevel: string;
  /** `auto` (pretty on a terminal, JSON otherwise), `json` or `pretty`. */
  logFormat: 'auto' | 'json' | 'pretty';
  /** Shards actor keys hash to; the same on every process of a deployment. */
  shardCount: number;
  /** Shard lease lifetime: how long a dead worker's shards wait before others take them. */
  leaseTtlMs: number;
  /** Idle time after which a live actor is dropped from memory (its state is already stored). */
  passivateAfterMs: number;
  /** How long a sender keeps retrying an ask (owner changes included). */
  askTimeoutMs: number;
  /** An idle conversation ends by itself this long after its last turn. */
  conversationIdleMs: number;
  /** Time limit of one project-function call. */
  functionTimeoutMs: number;
  /** Heap limit of the project-function sandbox's isolates. */
  functionHeapMb: number;
  /** Messaging API settings (the socket gateway and the session actor). */
  messaging: MessagingConfig;
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
  return {
    edgePort: e.EDGE_PORT,
    socketPort: e.SOCKET_PORT,
    host: e.HOST,
    dataDir: e.DATA_DIR,
    operatorToken: e.OPERATOR_TOKEN,
    region: e.REGION,
    natsUrl: e.NATS_URL,
    mongodbUrl: e.MONGODB_URL,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT,
    shardCount: e.SHARDS,
    leaseTtlMs: e.LEASE_TTL_MS,
    passivateAfterMs: e.PASSIVATE_AFTER_MS,
    askTimeoutMs: e.ASK_TIMEOUT_MS,
    conversationIdleMs: e.CONVERSATION_IDLE_MS,
    functionTimeoutMs: e.FUNCTION_TIMEOUT_MS,
    functionHeapMb: e.FUNCTION_HEAP_MB,
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
    },
  };
}
