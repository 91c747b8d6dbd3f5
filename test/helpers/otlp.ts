import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One exported span, flattened with its process's resource attributes. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
  status: { code?: number; message?: string };
}

export interface OtlpReceiver {
  /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces). */
  url: string;
  spans: ReceivedSpan[];
  /** Export requests received (any path). */
  requests: number;
  close(): Promise<void>;
}

/** OTLP/JSON ids are hex; accept base64 too (protobuf-JSON's default for bytes). */
const hex = (id: unknown): string => {
  if (typeof id !== 'string' || id === '') return '';
  if (/^[0-9a-f]+$/i.test(id) && (id.length === 32 || id.length === 16)) return id.toLowerCase();
  return Buffer.from(id, 'base64').toString('hex');
};

const value = (v: any): unknown => v?.stringValue ?? v?.intValue ?? v?.boolValue ?? v?.doubleValue ?? v?.arrayValue ?? null;
const attrs = (list: any[] | undefined): Record<string, unknown> => Object.fromEntries((list ?? []).map((a) => [a.key, value(a.value)]));

/** A tiny OTLP/HTTP JSON trace receiver on loopback: collects every span it is sent. */
export async function startOtlpReceiver(port = 0): Promise<OtlpReceiver> {
  const receiver = { spans: [] as ReceivedSpan[], requests: 0 };
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      receiver.requests++;
      try {
        const doc = JSON.parse(body);
        for (const rs of doc.resourceSpans ?? []) {
          const resource = attrs(rs.resource?.attributes);
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              receiver.spans.push({
                traceId: hex(s.traceId),
                spanId: hex(s.spanId),
                parentSpanId: hex(s.parentSpanId),
                name: s.name,
                kind: s.kind,
                attributes: attrs(s.attributes),
                resource,
                status: s.status ?? {},
              });
            }
          }
        }
      } catch {
        // Not JSON: counted, not parsed.
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  return Object.assign(receiver, {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  });
}
