import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js/max';

/**
 * A phone number in E.164 (`+14155550123`), or null when it does not parse as a valid number. A number
 * without a leading `+` is read as a national number of `country` (ISO 3166-1 alpha-2) when one is given.
 * Validity is libphonenumber's full metadata check (number length and ranges of the country's plan).
 */
export function toE164(input: string, country?: string): string | null {
  if (typeof input !== 'string' || input.length === 0 || input.length > 64) return null;
  const trimmed = input.trim();
  if (!trimmed.startsWith('+') && !country) return null;
  try {
    const parsed = parsePhoneNumberFromString(trimmed, country ? { defaultCountry: country.toUpperCase() as CountryCode } : undefined);
    return parsed && parsed.isValid() ? parsed.number : null;
  } catch {
    return null;
  }
}

/** Whether `country` is an ISO 3166-1 alpha-2 code libphonenumber knows. */
export { isSupportedCountry } from 'libphonenumber-js/max';
