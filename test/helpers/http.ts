/** A JSON response: status, parsed body (or raw text), headers. */
export interface Res<T = any> {
  status: number;
  body: T;
  text: string;
  headers: Headers;
}

/** One HTTP request with a JSON body (or the raw text or bytes of `raw`) over loopback. */
export async function http<T = any>(
  base: string,
  method: string,
  path: string,
  opts: { body?: unknown; raw?: string | Uint8Array<ArrayBuffer>; headers?: Record<string, string> } = {},
): Promise<Res<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  let body: string | Blob | undefined;
  if (opts.raw !== undefined) body = typeof opts.raw === 'string' ? opts.raw : new Blob([opts.raw]);
  else if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(new URL(path, base), { method, headers, body });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON: keep the text */
  }
  return { status: res.status, body: parsed as T, text, headers: res.headers };
}

/** Calls bound to one base URL and one set of headers. */
export function client(base: string, headers: Record<string, string>) {
  return <T = any>(method: string, path: string, body?: unknown) => http<T>(base, method, path, { body, headers });
}
