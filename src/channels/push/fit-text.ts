// Shortening a push's text to fit its provider's payload limit (web push, APNs).

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
