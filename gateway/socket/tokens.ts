import { randomBytes, randomUUID } from 'node:crypto';
import { jwtVerify, SignJWT } from 'jose';
import { StoreDuplicateError, type Store } from '../../store/mod.js';

/** What a Messaging access token names (the claims of its JWT). */
export interface AccessClaims {
  account_id: string;
  project_id: string;
  connector_id: string;
  environment: string;
  variant_id: string | null;
}

const ISSUER = 'switchboard-messaging';
const ALG = 'HS256';

/**
 * Signs and verifies Messaging access tokens: HS256 JWTs (jose) with the connector as subject, its
 * account, project, environment and variant as claims, and an expiry. The key is the same in every
 * socket process of a deployment: `MESSAGING_SECRET` when set, else a random secret created once in the
 * store (insert-if-absent, so concurrent first starts agree on one).
 */
export class AccessTokens {
  private constructor(
    private readonly key: Uint8Array,
    private readonly ttlS: number,
  ) {}

  static async open(store: Store, opts: { secret?: string; ttlS: number }): Promise<AccessTokens> {
    if (opts.secret) return new AccessTokens(new TextEncoder().encode(opts.secret), opts.ttlS);
    const secrets = store.collection<{ id: string; secret: string }>({ name: 'messaging_secrets' });
    let stored = await secrets.get('jwt');
    if (!stored) {
      try {
        stored = await secrets.insert({ id: 'jwt', secret: randomBytes(32).toString('base64url') });
      } catch (err) {
        if (!(err instanceof StoreDuplicateError)) throw err;
        stored = await secrets.get('jwt');
      }
    }
    return new AccessTokens(Buffer.from(stored!.secret, 'base64url'), opts.ttlS);
  }

  get ttlSeconds(): number {
    return this.ttlS;
  }

  async sign(claims: AccessClaims): Promise<string> {
    return new SignJWT({ ...claims })
      .setProtectedHeader({ alg: ALG, typ: 'JWT' })
      .setSubject(claims.connector_id)
      .setIssuer(ISSUER)
      .setIssuedAt()
      .setJti(randomUUID())
      .setExpirationTime(Math.floor(Date.now() / 1000) + this.ttlS)
      .sign(this.key);
  }

  /**
   * The claims of a valid, unexpired token signed here; null for anything else. A token without `exp` is
   * refused even when its signature is good: the contract's access tokens are short-lived, and a token that
   * never expires (minted by a leaked key or an older tool) would stay valid after every rotation of policy.
   */
  async verify(token: string): Promise<AccessClaims | null> {
    if (!token || token.length > 4096) return null;
    try {
      const { payload } = await jwtVerify(token, this.key, { algorithms: [ALG], issuer: ISSUER, requiredClaims: ['exp'] });
      const { account_id, project_id, connector_id, environment, variant_id } = payload as Record<string, unknown>;
      if (typeof account_id !== 'string' || typeof project_id !== 'string' || typeof connector_id !== 'string' || typeof environment !== 'string') return null;
      return { account_id, project_id, connector_id, environment, variant_id: typeof variant_id === 'string' ? variant_id : null };
    } catch {
      return null;
    }
  }
}
