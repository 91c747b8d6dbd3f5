import type { Collection, Doc } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { hashSecret, issueCredential, newId, parseCredential, secretMatches } from '../platform/secrets.js';
import type { TtlLru } from './cache.js';

/** What every credential-bearing record holds besides its own fields. */
export interface CredentialRecord extends Doc {
  account_id: string;
  hash: string;
  created_at: string;
}

/**
 * Records that each carry one bearer secret (API keys, connector tokens). The secret is shown once at issue
 * and stored as its SHA-256 only; a presented secret names its record, whose hash is compared in constant
 * time, on every use. Checks read the record through `cache` (`cache.ts`): by the record id the secret names,
 * so one store read serves a key's requests until the entry expires or an operator's write invalidates it.
 * A record that is not found is not cached.
 */
export class CredentialRecords<F extends object, T extends CredentialRecord & F> {
  constructor(
    private readonly records: Collection<T>,
    /** Prefix of the secret, e.g. `sbk`. */
    private readonly secretPrefix: string,
    /** Prefix of the record id, e.g. `key`. */
    private readonly idPrefix: string,
    /** Records by id; null reads the store every time. */
    private readonly cache: TtlLru<T> | null = null,
  ) {}

  async issue(fields: F): Promise<{ record: T; secret: string }> {
    const id = newId(this.idPrefix);
    const secret = issueCredential(this.secretPrefix, id);
    const record = await this.records.insert({ id, hash: hashSecret(secret), created_at: nowIso(), ...fields } as unknown as T);
    return { record, secret };
  }

  /** Deletes a record; false when there was none. */
  async remove(id: string): Promise<boolean> {
    return (await this.records.delete({ id })) > 0;
  }

  /** A record by its id (for holders of a credential already verified, e.g. claims of a signed token). */
  get(id: string): Promise<T | null> {
    return this.cache ? this.cache.read(id, () => this.records.get(id)) : this.records.get(id);
  }

  list(filter: { account_id?: string } = {}): Promise<T[]> {
    return this.records.find(filter.account_id ? { account_id: filter.account_id } : {}, { sort: { created_at: 1 } });
  }

  /** The record a presented secret belongs to, or null. */
  async verify(presented: string | undefined): Promise<T | null> {
    if (!presented) return null;
    const parsed = parseCredential(this.secretPrefix, presented);
    if (!parsed) return null;
    const record = await this.get(parsed.recordId);
    return record && secretMatches(presented, record.hash) ? record : null;
  }
}
