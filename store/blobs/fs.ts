import { mkdir, open, readdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { checkName, type BlobStore } from './blob-store.js';

const CHUNK = /^(\d{8})\.chunk$/;

/**
 * The embedded default: a blob is a folder under `<DATA_DIR>/blobs/` holding `00000000.chunk`,
 * `00000001.chunk`, ...; each chunk is written to a temporary file, fsynced and renamed, so a crash
 * leaves whole chunks only.
 */
export class FsBlobStore implements BlobStore {
  readonly backend = 'fs' as const;
  constructor(private readonly root: string) {}

  private dir(name: string): string {
    return join(this.root, ...checkName(name));
  }

  async putChunk(name: string, index: number, data: Buffer): Promise<void> {
    const dir = this.dir(name);
    await mkdir(dir, { recursive: true });
    const file = join(dir, `${String(index).padStart(8, '0')}.chunk`);
    const tmp = `${file}.tmp`;
    const fh = await open(tmp, 'w');
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await rename(tmp, file);
  }

  async read(name: string): Promise<Buffer | null> {
    let files: string[];
    try {
      files = await readdir(this.dir(name));
    } catch {
      return null;
    }
    const chunks = files.filter((f) => CHUNK.test(f)).sort();
    if (chunks.length === 0) return null;
    return Buffer.concat(await Promise.all(chunks.map((f) => readFile(join(this.dir(name), f)))));
  }

  async put(name: string, data: Buffer): Promise<void> {
    await this.putChunk(name, 0, data);
  }

  async list(prefix: string): Promise<string[]> {
    const out: string[] = [];
    const walk = async (rel: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(join(this.root, ...rel.split('/')), { withFileTypes: true });
      } catch {
        return;
      }
      if (entries.some((e) => e.isFile() && CHUNK.test(e.name))) out.push(rel);
      for (const e of entries) if (e.isDirectory()) await walk(`${rel}/${e.name}`);
    };
    checkName(prefix);
    await walk(prefix);
    return out.sort();
  }

  async remove(prefix: string): Promise<void> {
    await rm(this.dir(prefix), { recursive: true, force: true });
  }

  async close(): Promise<void> {}
}
