// Shortening a push's text to fit its provider's payload limit (web push, APNs, FCM).

/** The longest prefix of `text` (whole characters, "…" after a cut) that `fits`; '' when none does. */
export function longestFitting(text: string, fits: (text: string) => boolean): string {
  if (fits(text)) return text;
  const chars = Array.from(text);
  const cut = (n: number) => (n === chars.length ? text : `${chars.slice(0, n).join('')}…`);
  let [low, high] = [0, chars.length];
  // The longest n with fits(cut(n)); fewer characters never take more bytes.
  while (low < high) {
    const mid = Math.ceil((low + high) / 2);
    if (fits(cut(mid))) low = mid;
    else high = mid - 1;
  }
  return low === 0 ? '' : cut(low);
}

/**
 * `alert` with its body, then its title, shortened by longestFitting until it `fits` (Apple's
 * advice for long text; FCM is given the same). Returned as is when it fits, or when even empty
 * texts do not make it fit (the caller then fails the send: custom data is never cut).
 */
export function fittedTitleAndBody<T extends { title?: string; body?: string }>(alert: T, fits: (alert: T) => boolean): T {
  let fitted = alert;
  if (fits(fitted)) return fitted;
  for (const field of ['body', 'title'] as const) {
    const text = fitted[field];
    if (text === undefined) continue;
    const current = fitted;
    fitted = { ...current, [field]: longestFitting(text, (t) => fits({ ...current, [field]: t })) };
    if (fits(fitted)) break;
  }
  return fitted;
}
