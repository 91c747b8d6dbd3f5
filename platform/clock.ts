/** Wall-clock time as an ISO 8601 string, the form every record and response uses. */
export const nowIso = (): string => new Date().toISOString();
