import { REGIONS, type Region } from './config.js';

export type { Region };

/**
 * The region a request's `Host` names: one of its DNS labels is a region (`api.uk-1.example.com`), or null when
 * none is (`127.0.0.1:8080`, `localhost`, an operator's own name). The contract puts the region in the host
 * name; a self-hosted deployment is reached at whatever address its operator gives it, so only a host that
 * names a region can name the wrong one.
 */
export function regionOfHost(host: string | undefined): Region | null {
  if (!host || host.startsWith('[')) return null;
  const name = host.replace(/:\d*$/, '').toLowerCase();
  for (const label of name.split('.')) if ((REGIONS as readonly string[]).includes(label)) return label as Region;
  return null;
}

/** The region `host` names when it is not `served`: the request was meant for another deployment. */
export function otherRegion(host: string | undefined, served: Region): Region | null {
  const named = regionOfHost(host);
  return named !== null && named !== served ? named : null;
}
