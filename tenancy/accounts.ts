import type { Collection, Doc, Store } from '../store/mod.js';
import { StoreDuplicateError } from '../store/mod.js';
import { nowIso } from '../platform/clock.js';
import { ADMIN } from '../platform/errors.js';
import { newId } from '../platform/secrets.js';
import { slugify } from '../platform/slug.js';
import type { TtlLru } from './cache.js';

/** A customer account: the workspace of the Agents API and the `account_id` of the conversation APIs. */
export interface Account extends Doc {
  slug: string;
  name: string;
  created_at: string;
}

/** Accounts, addressable by id (`acc_...`) or by slug. */
export class Accounts {
  private readonly records: Collection<Account>;

  constructor(
    store: Store,
    /** Accounts by id and by slug; null reads the store every time. */
    private readonly cache: TtlLru<Account> | null = null,
  ) {
    this.records = store.collection<Account>({
      name: 'accounts',
      indexes: [{ fields: ['slug'], unique: true }],
    });
  }

  /** Creates an account. An explicit slug that is taken is a conflict; a derived one gets a suffix. */
  async create(input: { name: string; slug?: string }): Promise<Account> {
    const id = newId('acc');
    const base = input.slug ?? slugify(input.name, id.toLowerCase().replace('_', '-'));
    for (let n = 1; ; n++) {
      const slug = n === 1 ? base : `${base.slice(0, 58)}-${n}`;
      try {
        return await this.records.insert({ id, slug, name: input.name, created_at: nowIso() });
      } catch (err) {
        if (!(err instanceof StoreDuplicateError)) throw err;
        if (input.slug !== undefined) throw ADMIN.SLUG_TAKEN();
      }
    }
  }

  list(): Promise<Account[]> {
    return this.records.find({}, { sort: { created_at: 1 } });
  }

  get(id: string): Promise<Account | null> {
    return this.records.get(id);
  }

  /**
   * Finds an account by id or slug, through the cache: an account is never deleted and its id and slug never
   * change, so a found one stays right; one not found is looked up again next time.
   */
  async resolve(idOrSlug: string): Promise<Account | null> {
    const find = async () => (await this.records.get(idOrSlug)) ?? (await this.records.findOne({ slug: idOrSlug }));
    return this.cache ? this.cache.read(idOrSlug, find) : find();
  }

  async require(idOrSlug: string, field = 'account_id'): Promise<Account> {
    const account = await this.resolve(idOrSlug);
    if (!account) throw ADMIN.ACCOUNT_NOT_FOUND(field);
    return account;
  }
}
