import { createServer } from 'node:net';

/** `getaddrinfo`'s answers for a name it could not resolve (none of them a fault of the listen itself). */
const UNRESOLVED = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'EAI_NODATA']);

/**
 * Stops the start, naming `HOST`, when the interface it names cannot be listened on: a name that does not
 * resolve, an address that is not this machine's. Checked by one listen on a free port of it before anything
 * opens, rather than at the first role's listen: the edge (in its thread), the socket gateway, the SIP stack
 * and the metrics server each failed with an error of their own (`getaddrinfo ENOTFOUND ...`, `listen
 * EADDRNOTAVAIL ...`) that said nothing of the setting.
 */
export async function checkHost(host: string): Promise<void> {
  const code = await new Promise<string | undefined>((resolve) => {
    const probe = createServer();
    probe.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? String(err)));
    probe.listen({ host, port: 0 }, () => probe.close(() => resolve(undefined)));
  });
  if (code === undefined) return;
  const fix = 'set HOST to an address of this machine (127.0.0.1, 0.0.0.0 for every interface, ::) or a name that resolves to one';
  if (UNRESOLVED.has(code)) throw new Error(`HOST ${host} does not resolve (${code}); ${fix}`);
  if (code === 'EADDRNOTAVAIL') throw new Error(`HOST ${host} is not an address of this machine (EADDRNOTAVAIL); ${fix}`);
  throw new Error(`HOST ${host} cannot be listened on (${code}); ${fix}`);
}
