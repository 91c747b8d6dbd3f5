import type { Key } from 'lmdb';
import { update as applyUpdate } from 'mingo';
import type { Modifier } from 'mingo/updater';
import { dataEqual } from './equal.js';
import { applySimpleUpdate } from './simple-update.js';
import { page, sortWithId } from '../cursor.js';
import { StoreDuplicateError } from '../errors.js';
import { namesId, versionOf } from '../update.js';
import type { Collection, Doc, Filter, FindOptions, Page, PageOptions, Sort, Update } from '../types.js';
import type { RecordsEnv } from './env.js';
import { writeEntries, type IndexDef } from './indexes.js';
import { END, SPILL, idOf, isKeyString, isWholeKeyValue, key } from './keys.js';
import { compareBy } from './order.js';
import { matcher } from './matcher.js';
import { isOperatorObject, isPlainObject, plan, type KeyCheck, type Plan } from './planner.js';

/**
 * A collection of the embedded store. Reads run synchronously against lmdb-js's read transaction, which
 * is only renewed between event-loop turns, so each query sees one consistent snapshot. Every write runs
 * its read-check-write in a child transaction of the environment's group commit: the writes of one event-loop
 * turn share one durable commit (`RecordsEnv.batch`: group commit), and a write that throws (a duplicate) rolls
 * back alone.
 */
export class LmdbCollection<T extends Doc = Doc> implements Collection<T> {
  constructor(
    readonly env: RecordsEnv,
    readonly name: string,
    readonly indexes: IndexDef[],
    /** The field kept apart from the record (`CollectionSpec.appended`), or null. */
    readonly appended: string | null = null,
  ) {}

  async insert(doc: T): Promise<T> {
    if (!isKeyString(doc.id)) throw new TypeError(`invalid id ${JSON.stringify(doc.id)} for ${this.name}`);
    await this.env.batch(() => {
      if (this.env.records.get(key(this.name, doc.id)) !== undefined) throw new StoreDuplicateError(this.name, ['id']);
      this.write(null, doc);
    });
    return doc;
  }

  async get(id: string): Promise<T | null> {
    if (!isKeyString(id)) return null;
    const k = key(this.name, id);
    const found = this.env.records.get(k);
    if (found !== undefined) return this.whole(found) as T;
    // A miss is confirmed on a fresh snapshot. lmdb-js reads through one snapshot per thread until that thread's
    // next timers phase, and another thread of the process (the edge thread, the projection thread) may have
    // committed the record since: a connector or key the edge thread just created would read as unknown here.
    this.env.records.resetReadTxn();
    const again = this.env.records.get(k);
    return again === undefined ? null : (this.whole(again) as T);
  }

  async findOne(filter: Filter, options: { sort?: Sort } = {}): Promise<T | null> {
    return this.first(filter, options.sort);
  }

  async find(filter: Filter, options: FindOptions = {}): Promise<T[]> {
    const chosen = plan(this.name, filter, this.indexes);
    const skip = options.skip ?? 0;
    const direction = options.limit === undefined ? 0 : inIndexOrder(chosen, options.sort);
    const found = direction === 0 ? this.match(filter, chosen) : this.firstInOrder(filter, chosen as IndexPlan, direction, skip + options.limit!);
    const rows = found.sort(compareBy(sortWithId(options.sort)));
    return rows.slice(skip, options.limit === undefined ? undefined : skip + options.limit);
  }

  page(filter: Filter, options: PageOptions): Promise<Page<T>> {
    return page((where, findOptions) => this.find(where, findOptions), filter, options);
  }

  async count(filter: Filter): Promise<number> {
    return this.match(filter).length;
  }

  async update(filter: Filter, update: Update, options: { upsert?: boolean; sort?: Sort } = {}): Promise<T | null> {
    // Refused up front as the MongoDB backend must (there `id` would part from `_id`); the check after
    // applying the update catches the indirect ways ($rename, a $setOnInsert contradicting the filter).
    if (namesId(update)) throw new TypeError('an update must not change id');
    // MongoDB refuses an empty update document; mingo would take it as a no-op.
    if (Object.keys(update).length === 0) throw new TypeError('an update needs at least one operator');
    const seed = options.upsert ? upsertSeed(filter) : undefined;
    return this.env.batch(() => {
      const current = this.first(filter, options.sort);
      if (current) {
        // `current` was decoded for this call alone; it is kept apart only when its index entries must be
        // compared with the updated record's.
        const id = current.id;
        const next = this.indexes.length > 0 ? structuredClone(current) : current;
        const apply = modifier<T>(update, false);
        const changed = applySimpleUpdate(next, apply as Record<string, unknown>) ?? applyUpdate(next, apply);
        if (next.id !== id) throw new TypeError('an update must not change id');
        if (changed.length > 0) this.write(current, next);
        return next;
      }
      if (!seed) return null;
      // With other conditions in the filter this is a failed compare-and-set, as in MongoDB.
      if (this.env.records.get(key(this.name, seed.id)) !== undefined) throw new StoreDuplicateError(this.name, ['id']);
      const created = {} as T;
      applyUpdate(created, { $set: seed } as Modifier<T>);
      applyUpdate(created, modifier(update, true));
      if (created.id !== seed.id) throw new TypeError('an update must not change id');
      this.write(null, created);
      return created;
    });
  }

  async putNewer(doc: T, versionField: string): Promise<boolean> {
    if (!isKeyString(doc.id)) throw new TypeError(`invalid id ${JSON.stringify(doc.id)} for ${this.name}`);
    const version = versionOf(doc, versionField);
    // One read of the stored record (its index entries must be replaced too), then the write as given:
    // no query to compile, no copy, no update to apply. The record is read without its appended field's items,
    // and only the items `doc` adds to them are written (`CollectionSpec.appended`).
    return this.env.batch(() => {
      const current = this.env.records.get(key(this.name, doc.id));
      if (current !== undefined) {
        const stored = current[versionField];
        if (!(typeof stored === 'number' && stored < version)) return false;
      }
      this.write(current ?? null, doc, true);
      return true;
    });
  }

  async delete(filter: Filter): Promise<number> {
    return this.env.batch(() => {
      const rows = this.match(filter);
      for (const row of rows) this.write(row, null);
      return rows.length;
    });
  }

  /** The first match in `sort` order (then id), without sorting every match. */
  private first(filter: Filter, sort: Sort | undefined): T | null {
    const compare = compareBy(sortWithId(sort));
    let first: T | null = null;
    for (const row of this.match(filter)) if (first === null || compare(row, first) < 0) first = row;
    return first;
  }

  private match(filter: Filter, chosen: Plan = plan(this.name, filter, this.indexes)): T[] {
    const test = matcher(filter);
    const rows: T[] = [];
    for (const doc of this.candidates(chosen)) if (test(doc)) rows.push(doc as T);
    return rows;
  }

  /**
   * The matches of `filter` among the first `need` in the order of the index field after the plan's equality
   * prefix (`inIndexOrder`), and possibly a few more: the index is read in that order (`direction` 1 or -1) and
   * the read stops after the `need`th match once the field's value changes, so a page reads what its limit
   * asks (plus the ties of its last row), not every match. The caller sorts and cuts what this returns.
   *
   * The early stop is taken between two whole string values only (ISO times, ids), where the index's order is
   * the sort's; key order puts the other types below strings (null, booleans, numbers), so a descending read
   * that stops also reads the booleans, which MongoDB's order puts above strings. Records under SPILL are read
   * first, in no order. With no stop the whole range is read, as `match` would.
   */
  private firstInOrder(filter: Filter, chosen: IndexPlan, direction: 1 | -1, need: number): T[] {
    const { records, indexes } = this.env;
    const test = matcher(filter);
    const passes = keyTest(chosen.checks);
    const seen = new Set<string>();
    const rows: T[] = [];
    let ordered = 0;
    const take = (entry: unknown[]): boolean => {
      const id = idOf(entry as Key);
      if (seen.has(id)) return false;
      seen.add(id);
      if (passes && !passes(entry)) return false;
      const doc = records.get(key(this.name, id));
      if (!doc) return false;
      const whole = this.whole(doc);
      if (!test(whole)) return false;
      rows.push(whole as T);
      return true;
    };
    const [range, spill] = chosen.ranges;
    for (const entry of indexes.getKeys(spill)) take(entry as unknown[]);
    const at = 2 + chosen.prefix;
    let boundary: unknown = undefined;
    let last: unknown[] | null = null;
    const walk = direction === 1 ? { start: range.start, end: range.end } : { start: range.end, end: range.start, reverse: true };
    for (const entry of indexes.getKeys(walk) as Iterable<unknown[]>) {
      const value = entry[at];
      if (boundary !== undefined && isWholeKeyValue(value) && typeof value === 'string' && value !== boundary) {
        last = entry;
        break;
      }
      if (take(entry) && ++ordered >= need && boundary === undefined && isWholeKeyValue(value) && typeof value === 'string') boundary = value;
    }
    if (last && direction === -1) {
      const prefix = last.slice(0, at) as Array<string | number | boolean | null>;
      for (const entry of indexes.getKeys({ start: key(...prefix, false), end: key(...prefix, true, END) })) take(entry as unknown[]);
    }
    return rows;
  }

  private *candidates(chosen: Plan): Iterable<Doc> {
    const { records, indexes } = this.env;
    switch (chosen.kind) {
      case 'records':
        for (const { value } of records.getRange({ start: chosen.start, end: chosen.end })) yield this.whole(value);
        return;
      case 'ids':
        for (const id of chosen.ids) {
          const doc = records.get(key(this.name, id));
          if (doc) yield this.whole(doc);
        }
        return;
      case 'index': {
        const seen = new Set<string>();
        const passes = keyTest(chosen.checks);
        for (const range of chosen.ranges) {
          for (const entry of indexes.getKeys(range)) {
            const id = idOf(entry);
            if (seen.has(id)) continue;
            seen.add(id);
            // A record whose indexed values already fail the filter is not read.
            if (passes && !passes(entry as unknown[])) continue;
            const doc = records.get(key(this.name, id));
            if (doc) yield this.whole(doc);
          }
        }
      }
    }
  }

  /**
   * A stored record as readers see it: the items of its appended field put back in place of their count
   * (`CollectionSpec.appended`). The record is the caller's (lmdb-js decodes afresh on every read).
   */
  private whole(stored: Doc): Doc {
    const field = this.appended;
    if (field === null || typeof stored[field] !== 'number') return stored;
    const items: unknown[] = [];
    if (stored[field] === 0) {
      stored[field] = items;
      return stored;
    }
    for (const { value } of this.env.appended.getRange({ start: key(this.name, stored.id), end: key(this.name, stored.id, END) })) {
      for (const item of value) items.push(item);
    }
    stored[field] = items;
    return stored;
  }

  /**
   * Stores `after` in place of `before` (null for an insert or a delete). Inside a write transaction only.
   * `extending`: `after`'s appended field extends the stored one's (`putNewer`), so only its new items are
   * written; `before` is then the record as stored (its appended field a count when kept apart).
   */
  private write(before: Doc | null, after: Doc | null, extending = false): void {
    writeEntries(this.env, this.name, this.indexes, before, after);
    if (after) this.env.records.putSync(key(this.name, after.id), this.appended === null ? after : this.apart(before, after, this.appended, extending));
    else if (before) {
      this.env.records.removeSync(key(this.name, before.id));
      if (this.appended !== null) this.dropItems(before.id);
    }
  }

  /** Writes the items of `after`'s appended `field` that are not stored yet; returns the record to store in its place. */
  private apart(before: Doc | null, after: Doc, field: string, extending: boolean): Doc {
    const items = after[field];
    if (items === undefined) {
      if (before) this.dropItems(before.id);
      return after;
    }
    if (!Array.isArray(items)) throw new TypeError(`${this.name}: the appended field ${field} must be an array`);
    const stored = before?.[field];
    if (extending && typeof stored === 'number' && stored <= items.length) {
      if (items.length > stored) this.env.appended.putSync(key(this.name, after.id, stored), items.slice(stored));
    } else {
      if (before) this.dropItems(before.id);
      if (items.length > 0) this.env.appended.putSync(key(this.name, after.id, 0), items);
    }
    const record = Object.assign({}, after);
    record[field] = items.length;
    return record;
  }

  private dropItems(id: string): void {
    const keys = [...this.env.appended.getKeys({ start: key(this.name, id), end: key(this.name, id, END) })];
    for (const k of keys) this.env.appended.removeSync(k);
  }
}

type IndexPlan = Extract<Plan, { kind: 'index' }>;

/**
 * The direction (1, -1) in which `chosen` reads its records in `sort` order, or 0: an index plan of one
 * equality prefix (no `$in` of several values) whose next field is the sort's only field.
 */
function inIndexOrder(chosen: Plan, sort: Sort | undefined): 0 | 1 | -1 {
  if (chosen.kind !== 'index' || chosen.ranges.length !== 2 || !sort) return 0;
  const fields = Object.keys(sort);
  if (fields.length !== 1 || fields[0] === 'id' || fields[0] !== chosen.fields[chosen.prefix]) return 0;
  return sort[fields[0]] === -1 ? -1 : 1;
}

/**
 * Whether an index entry's key may belong to a matching record, by the plan's `KeyCheck`s (null: none). Each
 * check's conditions are matched against a record holding the field's value from the key alone, when that
 * value is the field's own; a SPILL entry (no values in its key) passes.
 */
function keyTest(checks: KeyCheck[]): ((entry: unknown[]) => boolean) | null {
  if (checks.length === 0) return null;
  const tests = checks.map((check) => ({ at: check.at, field: check.field, test: matcher(check.filter) }));
  return (entry) => {
    if (entry[2] === SPILL) return true;
    for (const { at, field, test } of tests) {
      const value = entry[at];
      if (isWholeKeyValue(value) && !test({ id: '', [field]: value })) return false;
    }
    return true;
  };
}

/**
 * mingo knows no `$setOnInsert`: it becomes part of `$set` when the update creates the record and is
 * dropped otherwise.
 */
function modifier<T extends Doc>(update: Update, inserting: boolean): Modifier<T> {
  const { $setOnInsert, ...given } = update;
  const rest = distinctEach(given);
  if (!inserting || !isPlainObject($setOnInsert)) return rest as Modifier<T>;
  return Object.assign({}, rest, { $set: Object.assign({}, rest.$set as Record<string, unknown> | undefined, $setOnInsert) }) as Modifier<T>;
}

/**
 * `$addToSet` with `$each` adds each value once, as in MongoDB; mingo sets a missing array to the list as given,
 * duplicates and all. The list is made distinct first (values compared as MongoDB does, whole).
 */
function distinctEach(update: Update): Update {
  const add = update.$addToSet;
  if (!isPlainObject(add)) return update;
  let changed: Record<string, unknown> | null = null;
  for (const [field, value] of Object.entries(add)) {
    if (!isPlainObject(value) || !Array.isArray(value.$each)) continue;
    const distinct: unknown[] = [];
    for (const v of value.$each) if (!distinct.some((d) => dataEqual(d, v))) distinct.push(v);
    if (distinct.length < value.$each.length) (changed ??= { ...add })[field] = Object.assign({}, value, { $each: distinct });
  }
  return changed ? Object.assign({}, update, { $addToSet: changed }) : update;
}

/** The fields an upsert starts from: the filter's top-level equality conditions, as in MongoDB. */
function upsertSeed(filter: Filter): Record<string, unknown> & { id: string } {
  const fields = equalityFields(filter);
  if (!isKeyString(fields.id)) throw new TypeError('an upsert needs a filter with an equality on id');
  return fields as Record<string, unknown> & { id: string };
}

function equalityFields(filter: Filter, fields: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [field, condition] of Object.entries(filter)) {
    if (field === '$and' && Array.isArray(condition)) {
      for (const clause of condition) if (isPlainObject(clause)) equalityFields(clause, fields);
    } else if (field.startsWith('$') || condition instanceof RegExp) {
      continue;
    } else if (isOperatorObject(condition)) {
      if ('$eq' in condition) fields[field] = condition.$eq;
    } else {
      fields[field] = condition;
    }
  }
  return fields;
}
