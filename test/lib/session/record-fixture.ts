import type { ProgressRecord } from '../../../nodes/lib/session/record';

/** A progress record as spec §2.2 shows it: zone-less timestamp, numeric evseId, Wh meter values. */
export const record: ProgressRecord = {
  eventType: 'Updated',
  timestamp: '2026-11-22T12:30:00',
  createdAt: '2026-11-22T12:00:00Z',
  evseId: 3,
  connectorId: null,
  tokenId: 'RFID-1',
  locationId: 'LOC-1',
  locationUid: '2a7c3bbd-3f1e-4a5a-9c55-0d1ea1c0ffee',
  transactionData: { transactionId: 'TX-1', cdrId: '9b1f5d2e-7c44-4b9a-8f2f-2d5b8f8e1a00', meterStart: 12000, meterEnd: 24345 },
};
