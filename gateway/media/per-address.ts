/**
 * How many of something each remote address holds now (streams, INVITEs not yet settled): the bound the media
 * gateway keeps per address. An address holding nothing has no entry, so the map holds only live addresses.
 */
export class PerAddress {
  private readonly held = new Map<string, number>();

  /** How many `address` holds. */
  count(address: string): number {
    return this.held.get(address) ?? 0;
  }

  /** Counts one more for `address`; the function returned counts it off again, once however often it is called. */
  hold(address: string): () => void {
    this.held.set(address, this.count(address) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.count(address) - 1;
      if (left > 0) this.held.set(address, left);
      else this.held.delete(address);
    };
  }
}
