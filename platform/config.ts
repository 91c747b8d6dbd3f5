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
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
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
  };
}
