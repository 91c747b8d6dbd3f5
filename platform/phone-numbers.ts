import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';

/**
 * A phone number in E.164 (`+14155550123`), or null when it does not parse as one. A number without a
 * leading `+` is read as a national number of `country` (ISO 3166-1 alpha-2) when one is given.
 *
 * A number parses when its country code is known and its length is one the country's plan has
 * (libphonenumber's `isPossible`), not only when its digits fall in ranges the plan has assigned
 * (`isValid`): the contract refuses an unparseable number (7.3), and fictional ranges (`+1 555 ...`,
 * Ofcom's drama numbers), test numbers and newly assigned ranges not yet in the metadata are numbers a
 * carrier or a test may well use.
 */
export function toE164(input: string, country?: string): string | null {
  if (typeof input !== 'string' || input.length === 0 || input.length > 64) return null;
  const trimmed = input.trim();
  if (!trimmed.startsWith('+') && !country) return null;
  try {
    const parsed = parsePhoneNumberFromString(trimmed, country ? { defaultCountry: country.toUpperCase() as CountryCode } : undefined);
    return parsed && parsed.isPossible() ? parsed.number : null;
  } catch {
    return null;
  }
}

/** Whether `country` is an ISO 3166-1 alpha-2 code libphonenumber knows. */
export { isSupportedCountry } from 'libphonenumber-js/max';
