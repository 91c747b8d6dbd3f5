/**
 * The socket gateway's caps on open WebSockets: for the whole process (`SOCKET_MAX_CONNECTIONS`) and per account
 * (`SOCKET_MAX_CONNECTIONS_PER_ACCOUNT`), the account being the owner of the session an upgrade is for. The
 * per-session limit (`MESSAGING_MAX_CONNECTIONS`, counted by the session actor) bounds one session only: an
 * account opening sessions without end could hold every file descriptor of the process, and the edge and the
 * other tenants' sockets then got nothing (an audit: 8,141 sockets from one account under an 8,192 fd limit).
 *
 * A place is taken once the handshake's checks passed, before the session is asked to register the connection,
 * so an upgrade waiting on that ask counts too; it is given back when the upgrade is refused or abandoned, or
 * when the socket closes, whatever closes it (`ws.ts`).
 */
export class ConnectionCaps {
  private total = 0;
  private readonly perAccount = new Map<string, number>();

  constructor(
    private readonly max: number,
    private readonly maxPerAccount: number,
  ) {}

  /**
   * Takes a place for one of `account`'s sockets: `null` when taken, else which cap is full (nothing is taken).
   * The account's cap is told first: an account at its own cap is told so even when the process is full too.
   */
  take(account: string): 'account' | 'gateway' | null {
    const held = this.perAccount.get(account) ?? 0;
    if (held >= this.maxPerAccount) return 'account';
    if (this.total >= this.max) return 'gateway';
    this.perAccount.set(account, held + 1);
    this.total++;
    return null;
  }

  /** Gives back a place `take` gave `account`. */
  release(account: string): void {
    const held = this.perAccount.get(account) ?? 0;
    if (held <= 0) return;
    if (held === 1) this.perAccount.delete(account);
    else this.perAccount.set(account, held - 1);
    this.total--;
  }

  /** Places taken now, in the process and by `account`. */
  held(account?: string): number {
    return account === undefined ? this.total : (this.perAccount.get(account) ?? 0);
  }
}
