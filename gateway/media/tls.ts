import { execFile } from 'node:child_process';
import { mkdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

/**
 * The SIP-over-TLS certificate: the files `SIP_TLS_CERT`/`SIP_TLS_KEY` name, or else a self-signed one
 * generated once into `DATA_DIR/sip-tls/` with the system's `openssl` (and reused on later starts). A trunk
 * that verifies certificates needs a real one; a self-signed one serves softphones and tests.
 */
export async function sipTlsCredentials(o: { dataDir: string; certFile?: string; keyFile?: string; host: string }): Promise<{ cert: Buffer; key: Buffer; generated: string | null }> {
  if (o.certFile && o.keyFile) return { cert: await readFile(o.certFile), key: await readFile(o.keyFile), generated: null };
  const dir = join(o.dataDir, 'sip-tls');
  const cert = join(dir, 'cert.pem');
  const key = join(dir, 'key.pem');
  const exists = await stat(cert).then(() => stat(key)).then(() => true, () => false);
  if (!exists) {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const subject = /^[0-9.:]+$/.test(o.host) ? `IP:${o.host}` : `DNS:${o.host}`;
    await promisify(execFile)('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '825',
      '-subj', '/CN=switchboard media gateway', '-addext', `subjectAltName=${subject}`,
      '-keyout', key, '-out', cert,
    ]);
  }
  return { cert: await readFile(cert), key: await readFile(key), generated: exists ? null : cert };
}
