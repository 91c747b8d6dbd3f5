import {
  MongoServerError,
  type Collection as MongoCollectionHandle,
  type Document,
  type Filter as MongoFilter,
} from 'mongodb';
import { page, sortWithId } from '../cursor.js';
import { StoreDuplicateError } from '../errors.js';
import { namesId, versionOf } from '../update.js';
import type { Collection, Doc, Filter, FindOptions, IndexSpec, Page, PageOptions, Sort, Update } from '../types.js';

/** MongoDB's duplicate key error. */
export function isDuplicateKey(error: unknown): error is MongoServerError {
  return error instanceof MongoServerError && error.code === 11000;
}

/** A record as stored: its id doubles as `_id`. */
export type StoredRecord = Document & { _id: string };

/**
 * A collection stored as documents `{_id: id, ...record}`. `id` is kept as a field too, with its own
 * unique index, so that filters and sorts on `id` pass through unchanged.
 */
export class MongoCollection<T extends Doc = Doc> implements Collection<T> {
  /** Index creation is asynchronous but declaring a collection is not: every operation waits for it. */
  private readonly ready: Promise<unknown>;

  constructor(
    private readonly handle: MongoCollectionHandle<StoredRecord>,
    readonly name: string,
    readonly indexes: IndexSpec[],
  ) {
    this.ready = createIndexes(handle, indexes);
    // Reported by the first operation, which awaits it; it must not count as unhandled before that.
    this.ready.catch(() => undefined);
  }

  async insert(doc: T): Promise<T> {
    await this.ready;
    try {
      await this.handle.insertOne({ _id: doc.id, ...doc });
    } catch (error) {
      throw this.mapped(error);
    }
    return doc;
  }

  async get(id: string): Promise<T | null> {
    await this.ready;
    return (await this.handle.findOne({ _id: id }, { projection: { _id: 0 } })) as T | null;
  }

  async findOne(filter: Filter, options: { sort?: Sort } = {}): Promise<T | null> {
    const [first] = await this.find(filter, { sort: options.sort, limit: 1 });
    return first ?? null;
  }

  async find(filter: Filter, options: FindOptions = {}): Promise<T[]> {
    // MongoDB reads limit 0 as "no limit"; the embedded backend returns nothing, and so does this one.
    if (options.limit === 0) return [];
    await this.ready;
    const cursor = this.handle.find(filter as MongoFilter<StoredRecord>, {
      projection: { _id: 0 },
      sort: sortWithId(options.sort),
      skip: options.skip,
      limit: options.limit,
    });
    return (await cursor.toArray()) as unknown as T[];
  }

  page(filter: Filter, options: PageOptions): Promise<Page<T>> {
    return page((where, findOptions) => this.find(where, findOptions), filter, options);
  }

  async count(filter: Filter): Promise<number> {
    await this.ready;
    return this.handle.countDocuments(filter as MongoFilter<StoredRecord>);
  }

  async update(filter: Filter, update: Update, options: { upsert?: boolean; sort?: Sort } = {}): Promise<T | null> {
    if (namesId(update)) throw new TypeError('an update must not change id');
    let changes = update;
    if (options.upsert) {
      const id = idEquality(filter);
      if (id === undefined) throw new TypeError('an upsert needs a filter with an equality on id');
      changes = Object.assign({}, update, { $setOnInsert: { _id: id, ...(update.$setOnInsert as Document | undefined) } });
    }
    await this.ready;
    try {
      return (await this.handle.findOneAndUpdate(filter as MongoFilter<StoredRecord>, changes, {
        sort: sortWithId(options.sort),
        upsert: options.upsert === true,
        returnDocument: 'after',
        projection: { _id: 0 },
      })) as T | null;
    } catch (error) {
      throw this.mapped(error);
    }
  }

  async putNewer(doc: T, versionField: string): Promise<boolean> {
    const version = versionOf(doc, versionField);
    await this.ready;
    try {
      // Matches only an older version; with no match the upsert's insert collides on the id when a record
      // exists (equal, newer or unversioned), which is the refusal.
      await this.handle.replaceOne(
        { _id: doc.id, [versionField]: { $lt: version } } as MongoFilter<StoredRecord>,
        { _id: doc.id, ...doc },
        { upsert: true },
      );
      return true;
    } catch (error) {
      if (isDuplicateKey(error) && isIdClash(error)) return false;
      throw this.mapped(error);
    }
  }

  async delete(filter: Filter): Promise<number> {
    await this.ready;
    return (await this.handle.deleteMany(filter as MongoFilter<StoredRecord>)).deletedCount;
  }

  private mapped(error: unknown): unknown {
    if (!isDuplicateKey(error)) return error;
    const fields = Object.keys((error.keyPattern as Document | undefined) ?? { id: 1 });
    return new StoreDuplicateError(
      this.name,
      fields.map((field) => (field === '_id' ? 'id' : field)),
    );
  }
}

/** Whether a duplicate key error is about the record's id (`_id` or the unique `id` index), not another unique index. */
function isIdClash(error: MongoServerError): boolean {
  const fields = Object.keys((error.keyPattern as Document | undefined) ?? { _id: 1 });
  return fields.length === 1 && (fields[0] === '_id' || fields[0] === 'id');
}

/** Types a present, non-null value can have: a sparse unique index ignores the records where a field is null. */
const PRESENT = ['number', 'string', 'bool', 'object', 'array', 'binData', 'date'];

async function createIndexes(handle: MongoCollectionHandle<StoredRecord>, indexes: IndexSpec[]): Promise<void> {
  await handle.createIndex({ id: 1 }, { unique: true });
  for (const index of indexes) {
    const keys = Object.fromEntries(index.fields.map((field) => [field, 1 as const]));
    await handle.createIndex(
      keys,
      index.unique && index.sparse
        ? {
            unique: true,
            partialFilterExpression: Object.fromEntries(index.fields.map((field) => [field, { $type: PRESENT }])),
          }
        : { unique: index.unique === true },
    );
  }
}

/** The id an upsert creates: the filter's equality on `id` (top level or inside `$and`). */
function idEquality(filter: Filter): string | undefined {
  const condition = filter.id;
  if (typeof condition === 'string') return condition;
  if (typeof condition === 'object' && condition !== null && typeof (condition as Document).$eq === 'string') {
    return (condition as Document).$eq as string;
  }
  if (Array.isArray(filter.$and)) {
    for (const clause of filter.$and) {
      const id = typeof clause === 'object' && clause !== null ? idEquality(clause as Filter) : undefined;
      if (id !== undefined) return id;
    }
  }
  return undefined;
}
