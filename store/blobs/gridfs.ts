import { GridFSBucket, MongoClient, type Db } from 'mongodb';
import { checkName, type BlobStore } from './blob-store.js';

/**
 * The MongoDB backend's blobs: each chunk is one GridFS file (bucket `blobs`) named `<name>/<index>`
 * with `{name, index}` in its metadata; rewriting a chunk uploads the new file before deleting the old.
 * A thin adapter: there is no MongoDB deployment in the test environment, so it is exercised by
 * type-checking only (docs/recordings.md says so).
 */
export class GridFsBlobStore implements BlobStore {
  readonly backend = 'gridfs' as const;
  private readonly bucket: GridFSBucket;
  constructor(private readonly db: Db, private readonly client?: MongoClient) {
    this.bucket = new GridFSBucket(db, { bucketName: 'blobs' });
  }

  static async connect(url: string): Promise<GridFsBlobStore> {
    const client = await new MongoClient(url).connect();
    return new GridFsBlobStore(client.db(new URL(url).pathname.slice(1) || 'switchboard'), client);
  }

  async putChunk(name: string, index: number, data: Buffer): Promise<void> {
    checkName(name);
    const old = await this.bucket.find({ 'metadata.name': name, 'metadata.index': index }).toArray();
    await new Promise<void>((resolve, reject) => {
      const up = this.bucket.openUploadStream(`${name}/${index}`, { metadata: { name, index } });
      up.once('finish', () => resolve());
      up.once('error', reject);
      up.end(data);
    });
    for (const f of old) await this.bucket.delete(f._id);
  }

  async read(name: string): Promise<Buffer | null> {
    checkName(name);
    const files = await this.bucket.find({ 'metadata.name': name }).sort({ 'metadata.index': 1, uploadDate: -1 }).toArray();
    if (files.length === 0) return null;
    const seen = new Set<number>();
    const parts: Buffer[] = [];
    for (const f of files) {
      const index = (f.metadata as { index: number }).index;
      if (seen.has(index)) continue;
      seen.add(index);
      const bufs: Buffer[] = [];
      for await (const b of this.bucket.openDownloadStream(f._id)) bufs.push(b as Buffer);
      parts.push(Buffer.concat(bufs));
    }
    return Buffer.concat(parts);
  }

  async put(name: string, data: Buffer): Promise<void> {
    await this.putChunk(name, 0, data);
  }

  async list(prefix: string): Promise<string[]> {
    checkName(prefix);
    const names = await this.db.collection('blobs.files').distinct('metadata.name', { 'metadata.name': { $regex: `^${prefix.replace(/[.]/g, '\\.')}(/|$)` } });
    return (names as string[]).sort();
  }

  async remove(prefix: string): Promise<void> {
    checkName(prefix);
    const files = await this.db.collection('blobs.files').find({ 'metadata.name': { $regex: `^${prefix.replace(/[.]/g, '\\.')}(/|$)` } }, { projection: { _id: 1 } }).toArray();
    for (const f of files) await this.bucket.delete(f._id);
  }

  async close(): Promise<void> {
    await this.client?.close();
  }
}
