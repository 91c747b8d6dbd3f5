/** TEMPORARY until branch outbound's builder/telephony.ts is merged: the inbound number lookup over its collection. */
import type { Doc, Store } from '../../store/mod.js';
import type { NumberBinding, TelephonyLookup } from './server.js';

export function telephonyLookup(store: Store): TelephonyLookup {
  const numbers = store.collection<NumberBinding & Doc>({
    name: 'telephony_phone_numbers',
    indexes: [{ fields: ['number'], unique: true }, { fields: ['account_id', 'agent_id', 'created_at'] }, { fields: ['connector_id'] }],
  });
  return { numberByE164: (e164) => numbers.findOne({ number: e164 }) };
}
