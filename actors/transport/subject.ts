/**
 * NATS subject syntax and matching, shared by the transports: dot-separated non-empty tokens without
 * whitespace; in a subscription `*` stands for one token and `>` (last token only) for one or more.
 */

const BAD_TOKEN = /[\s]/;
/** Non-empty tokens without whitespace, separated by single dots. */
const TOKENS = /^[^\s.]+(?:\.[^\s.]+)*$/;
/** A token that is a wildcard. */
const WILDCARD_TOKEN = /(?:^|\.)[*>](?:\.|$)/;

/**
 * Whether `subject` is a valid literal subject (no wildcards), as publish and request need. Checked on every
 * message, so without splitting it.
 */
export function isLiteralSubject(subject: string): boolean {
  return TOKENS.test(subject) && !WILDCARD_TOKEN.test(subject);
}

/** Whether `subject` is a valid subscription subject: wildcards are whole tokens, `>` only last. */
export function isSubscriptionSubject(subject: string): boolean {
  if (subject.length === 0) return false;
  const tokens = subject.split('.');
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    if (token.length === 0 || BAD_TOKEN.test(token)) return false;
    if (token === '>' && i !== tokens.length - 1) return false;
  }
  return true;
}

/** Whether the literal `subject` matches the subscription `pattern`. */
export function subjectMatches(pattern: string, subject: string): boolean {
  const p = pattern.split('.');
  const s = subject.split('.');
  for (let i = 0; i < p.length; i++) {
    if (p[i] === '>') return s.length > i;
    if (i >= s.length) return false;
    if (p[i] !== '*' && p[i] !== s[i]) return false;
  }
  return p.length === s.length;
}

interface Node<T> {
  children: Map<string, Node<T>>;
  /** Entries whose pattern ends at this node. */
  here: Set<T>;
  /** Entries whose pattern ends with `>` below this node. */
  rest: Set<T>;
}

function node<T>(): Node<T> {
  return { children: new Map(), here: new Set(), rest: new Set() };
}

/**
 * Subscriptions indexed by their pattern's tokens, so that matching costs the subject's depth rather than
 * the number of subscriptions (one subscription per session subject is the common case).
 */
export class SubjectTree<T> {
  readonly #root: Node<T> = node();

  /** Adds `entry` under a subscription pattern (validated by the caller). */
  add(pattern: string, entry: T): void {
    const tokens = pattern.split('.');
    let at = this.#root;
    for (let i = 0; i < tokens.length; i++) {
      if (tokens[i] === '>') {
        at.rest.add(entry);
        return;
      }
      let next = at.children.get(tokens[i]);
      if (!next) at.children.set(tokens[i], (next = node()));
      at = next;
    }
    at.here.add(entry);
  }

  /** Removes `entry` from under `pattern`, pruning branches left empty. */
  remove(pattern: string, entry: T): void {
    const tokens = pattern.split('.');
    const path: Node<T>[] = [this.#root];
    let at = this.#root;
    let set: Set<T> | undefined;
    for (let i = 0; i < tokens.length; i++) {
      if (tokens[i] === '>') {
        set = at.rest;
        break;
      }
      const next = at.children.get(tokens[i]);
      if (!next) return;
      at = next;
      path.push(at);
    }
    set ??= at.here;
    if (!set.delete(entry)) return;
    for (let i = path.length - 1; i > 0; i--) {
      const n = path[i];
      if (n.children.size > 0 || n.here.size > 0 || n.rest.size > 0) break;
      path[i - 1].children.delete(tokens[i - 1]);
    }
  }

  /** Every entry whose pattern matches the literal `subject`. */
  match(subject: string): T[] {
    const out: T[] = [];
    this.#collect(this.#root, subject.split('.'), 0, out);
    return out;
  }

  #collect(at: Node<T>, tokens: string[], i: number, out: T[]): void {
    if (i === tokens.length) {
      for (const e of at.here) out.push(e);
      return;
    }
    for (const e of at.rest) out.push(e);
    const exact = at.children.get(tokens[i]);
    if (exact) this.#collect(exact, tokens, i + 1, out);
    const any = at.children.get('*');
    if (any) this.#collect(any, tokens, i + 1, out);
  }
}
