/**
 * Dates as a chat list shows them: conversations grouped by how recent
 * their last activity is (Today, Yesterday, Previous 7 days, Previous 30
 * days, then by month), and a message's time of day. Pure functions of an
 * ISO time and "now" in the viewer's time zone, so they are tested without
 * a clock.
 */

const day = 24 * 60 * 60 * 1000;

function startOfDay(t: number): number {
  const d = new Date(t);
  d.setHours(0, 0, 0, 0);
  return d.getTime();
}

/** The group a conversation last active at `iso` belongs to, seen at `now` (ms). */
export function dateGroup(iso: string, now: number, locale?: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return 'Older';
  const today = startOfDay(now);
  if (t >= today) return 'Today';
  // Whole calendar days back, whatever the hour (and a daylight-saving day's length).
  const days = Math.round((today - startOfDay(t)) / day);
  if (days <= 1) return 'Yesterday';
  if (days <= 7) return 'Previous 7 days';
  if (days <= 30) return 'Previous 30 days';
  const d = new Date(t);
  const sameYear = d.getFullYear() === new Date(now).getFullYear();
  return d.toLocaleDateString(locale, sameYear ? { month: 'long' } : { month: 'long', year: 'numeric' });
}

export interface DateGroup<T> {
  label: string;
  items: T[];
}

/** Splits a list that is newest first into consecutive date groups. */
export function groupByDate<T extends { updated_at: string }>(list: readonly T[], now: number, locale?: string): DateGroup<T>[] {
  const out: DateGroup<T>[] = [];
  for (const item of list) {
    const label = dateGroup(item.updated_at, now, locale);
    const last = out[out.length - 1];
    if (last && last.label === label) last.items.push(item);
    else out.push({ label, items: [item] });
  }
  return out;
}

/** A message's time as shown under it: the time of day, with the date when it is not today. */
export function messageTime(iso: string, now: number, locale?: string): string {
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return '';
  const d = new Date(t);
  const time = d.toLocaleTimeString(locale, { hour: '2-digit', minute: '2-digit' });
  if (t >= startOfDay(now)) return time;
  const sameYear = d.getFullYear() === new Date(now).getFullYear();
  const date = d.toLocaleDateString(locale, sameYear ? { day: 'numeric', month: 'short' } : { day: 'numeric', month: 'short', year: 'numeric' });
  return `${date}, ${time}`;
}
