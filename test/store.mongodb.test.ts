import { randomBytes } from 'node:crypto';
import { MongoClient } from 'mongodb';
import t from 'tap';
import { openMongoStore } from '../store/mongodb/store.js';
import type { Store } from '../store/mod.js';
import { storeContract } from './store.contract.js';

const url = process.env.MONGODB_URL;

if (!url) {
  // A skip, not a pass: the count says the MongoDB contract did not run. `.ci/run` names skipped backends
  // from this line's "store backend <name> not tested" under CI=true.
  t.test('contract', { skip: 'store backend mongodb not tested: MONGODB_URL not set' }, async () => {});
} else {
  // Each store gets a database of its own, dropped when the test ends.
  const databases = new WeakMap<Store, string>();
  const makeStore = async (dbName = `switchboard_test_${randomBytes(6).toString('hex')}`): Promise<Store> => {
    const store = await openMongoStore({ url, dbName });
    databases.set(store, dbName);
    t.teardown(async () => {
      const client = await MongoClient.connect(url);
      await client.db(dbName).dropDatabase();
      await client.close();
    });
    return store;
  };
  t.test('contract', (t) =>
    storeContract(
      t,
      () => makeStore(),
      (closed) => makeStore(databases.get(closed)),
    ),
  );
}
