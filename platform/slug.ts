/** Slugs: lowercase letters, digits and single dashes, 1 to 63 characters, starting with a letter or digit. */
export const SLUG_PATTERN = /^[a-z0-9](?:[a-z0-9-]{0,62})$/;

/** Derives a slug from a display name; falls back to `fallback` when nothing usable is left. */
export function slugify(name: string, fallback: string): string {
  const s = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    // Dashes come single after the line above; matching one (not a run) keeps these linear.
    .replace(/^-|-$/g, '')
    .slice(0, 48)
    .replace(/-$/, '');
  return s || fallback;
}
