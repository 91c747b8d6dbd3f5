/** The parts of the `sip` package (pure JS, no types of its own) that `dialog.ts` uses. */
declare module 'sip' {
  export interface SipUri {
    schema: string;
    user?: string;
    password?: string;
    host: string;
    port?: number;
    params: Record<string, string | null>;
    headers?: Record<string, string>;
  }
  export interface Aor {
    name?: string;
    uri: string | SipUri;
    params: Record<string, string | null | undefined>;
  }
  export interface SipMessage {
    method?: string;
    uri?: string | SipUri;
    status?: number;
    reason?: string;
    version?: string;
    headers: Record<string, any>;
    content?: string;
  }
  export interface Remote {
    protocol: string;
    address: string;
    port: number;
    local?: { address: string; port: number };
  }
  /** A transport connection: where a message goes (`local`: the socket it leaves from). */
  export interface Flow {
    protocol: string;
    address: string;
    port: number;
    local: { address: string; port: number };
  }
  export interface Stack {
    send(m: SipMessage, callback?: (rs: SipMessage) => void): void;
    hostname(): string;
    /**
     * A URI naming `flow` (RFC 5626's flow token as its user, the stack's hostname as its host): a request whose first
     * Route has it goes over that flow, and the Route is taken off before it is sent.
     */
    encodeFlowUri(flow: Flow): SipUri;
    destroy(): void;
  }
  export interface StackOptions {
    address?: string;
    hostname?: string;
    publicAddress?: string;
    port?: number;
    udp?: boolean;
    tcp?: boolean;
    tls?: { key: string | Buffer; cert: string | Buffer; rejectUnauthorized?: boolean; handshakeTimeout?: number };
    tls_port?: number;
    rport?: boolean;
    logger?: { send?: (m: SipMessage, target: unknown) => void; recv?: (m: SipMessage, remote: Remote) => void; error?: (e: unknown) => void };
  }
  export function create(options: StackOptions, onRequest: (rq: SipMessage, remote: Remote) => void): Stack;
  export function makeResponse(rq: SipMessage, status: number, reason?: string, extension?: { headers?: Record<string, unknown>; content?: string }): SipMessage;
  export function parseUri(s: string | SipUri): SipUri;
  /** A whole message (headers, blank line, body); undefined when its start line or a header line does not parse. */
  export function parse(s: string): SipMessage | undefined;
  export function stringifyUri(u: string | SipUri): string;
  /** A message as its wire text (latin1, one character a byte). */
  export function stringify(m: SipMessage): string;
  export function generateBranch(): string;
  const sip: {
    create: typeof create;
    makeResponse: typeof makeResponse;
    parseUri: typeof parseUri;
    parse: typeof parse;
    stringifyUri: typeof stringifyUri;
    stringify: typeof stringify;
    generateBranch: typeof generateBranch;
  };
  export default sip;
}

declare module 'sip/digest.js' {
  import type { SipMessage } from 'sip';
  export function signRequest(ctx: object | null, rq: SipMessage, rs: SipMessage, creds: { user: string; password: string }): object | null;
  const digest: { signRequest: typeof signRequest };
  export default digest;
}
