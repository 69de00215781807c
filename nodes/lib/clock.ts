/**
 * The clock every deadline, back-off, schedule and token lifetime runs on.
 *
 * Monotonic: `performance.now()` never jumps when the wall clock is stepped (NTP
 * after a Raspberry Pi boots without a real-time clock, a VM resumed, a user
 * changing the time). `Date.now()` is kept for what people read: timestamps,
 * session durations, the clock shown in a status badge, an HTTP date.
 */
export const monotonicNow = (): number => performance.now();
