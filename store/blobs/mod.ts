/** Blob storage (recordings): the filesystem under DATA_DIR by default, GridFS with the MongoDB store. */
import { join } from 'node:path';
import { FsBlobStore } from './fs.js';
import type { BlobStore } from './blob-store.js';

export type { BlobStore } from './blob-store.js';
export { FsBlobStore } from './fs.js';

/** GridFS when `mongodbUrl` is set (the same deployment as the record store), else `<dataDir>/blobs`. */
export async function openBlobStore(o: { dataDir: string; mongodbUrl?: string }): Promise<BlobStore> {
  if (o.mongodbUrl) {
    const { GridFsBlobStore } = await import('./gridfs.js');
    return GridFsBlobStore.connect(o.mongodbUrl);
  }
  return new FsBlobStore(join(o.dataDir, 'blobs'));
}
