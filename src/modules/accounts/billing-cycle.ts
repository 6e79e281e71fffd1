/**
 * The start (UTC date, YYYY-MM-DD) of the billing cycle containing `now`. A cycle resets on the
 * anniversary's day of month; in shorter months on the month's last day (Jan 31 -> Feb 28).
 */
export function currentCycleStart(anniversaryDate: string, now: Date): string {
  const day = Number(anniversaryDate.slice(8, 10));
  let year = now.getUTCFullYear();
  let month = now.getUTCMonth();
  const resetDay = (y: number, m: number) => Math.min(day, new Date(Date.UTC(y, m + 1, 0)).getUTCDate());
  if (now.getUTCDate() < resetDay(year, month)) {
    month -= 1;
    if (month < 0) {
      month = 11;
      year -= 1;
    }
  }
  const start = new Date(Date.UTC(year, month, resetDay(year, month)));
  return start.toISOString().slice(0, 10);
}
