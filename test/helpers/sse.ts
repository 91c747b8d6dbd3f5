/** One Server-Sent Event: its `event` name, `id` and parsed JSON `data`. */
export interface SseEvent {
  event: string;
  id: string | null;
  data: any;
}

/**
 * Reads a Server-Sent Events stream with fetch (so it can send headers), as the inspector page does.
 * `next(pred)` resolves with the next event (in order) that matches, skipping the others; it rejects once
 * the stream has ended (or failed) and nothing queued matches.
 */
export function readSse(url: string, headers: Record<string, string>) {
  const abort = new AbortController();
  const queue: SseEvent[] = [];
  let wake = null as (() => void) | null;
  let failure: Error | null = null;
  void (async () => {
    const res = await fetch(url, { headers: { ...headers, accept: 'text/event-stream' }, signal: abort.signal });
    if (res.status !== 200) throw new Error(`SSE ${url}: ${res.status} ${await res.text()}`);
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let event = 'message';
        let id: string | null = null;
        const data: string[] = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) event = line.slice(6).trim();
          else if (line.startsWith('id:')) id = line.slice(3).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
        }
        if (data.length) {
          queue.push({ event, id, data: JSON.parse(data.join('\n')) });
          wake?.();
        }
      }
    }
    throw new Error(`SSE ${url}: the stream ended`);
  })().catch((err) => {
    if (!abort.signal.aborted) failure = err as Error;
    wake?.();
  });
  return {
    async next(pred: (e: SseEvent) => boolean = () => true): Promise<SseEvent> {
      for (;;) {
        while (queue.length) {
          const e = queue.shift()!;
          if (pred(e)) return e;
        }
        if (failure) throw failure;
        await new Promise<void>((r) => (wake = r));
        wake = null;
      }
    },
    close: () => abort.abort(),
  };
}
