import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyPluginAsync } from 'fastify';

/** The page's files: `gateway/edge/inspector/web/`, copied next to this module by `npm run build`. */
export const INSPECTOR_WEB_DIR = join(dirname(fileURLToPath(import.meta.url)), 'web');

const FILES: Record<string, [string, string]> = {
  '/inspector': ['inspector.html', 'text/html; charset=utf-8'],
  '/inspector/inspector.js': ['inspector.js', 'text/javascript; charset=utf-8'],
  '/inspector/inspector.css': ['inspector.css', 'text/css; charset=utf-8'],
};

/**
 * The inspector page at `/inspector` on the edge port, with its script and styles: public files (the page
 * asks for the operator token and sends it with every API call; nothing here is secret). Read once, at start.
 */
export const inspectorPagePlugin: FastifyPluginAsync = async (app) => {
  for (const [path, [file, type]] of Object.entries(FILES)) {
    const body = readFileSync(join(INSPECTOR_WEB_DIR, file), 'utf8');
    app.get(path, { schema: { hide: true } }, async (_req, reply) =>
      reply
        .type(type)
        .header('cache-control', 'no-cache')
        .header('x-content-type-options', 'nosniff')
        .header('referrer-policy', 'no-referrer')
        // Everything the page loads is its own: no CDN, no inline script.
        .header('content-security-policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
        .send(body),
    );
  }
  // The page's address as people type it too; redirected, so that the page's own links resolve the same way.
  app.get('/inspector/', { schema: { hide: true } }, async (_req, reply) => reply.redirect('/inspector', 301));
};
