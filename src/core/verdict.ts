// Verdict: how every policy stage says yes (a value) or no (a reason code); stages never throw to deny.
import type { ReasonCode } from './reason.js';

export type Verdict<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly reason: ReasonCode; readonly detail: string };

export function ok<T>(value: T): Verdict<T> {
  return { ok: true, value };
}

export function deny<T = never>(reason: ReasonCode, detail = ''): Verdict<T> {
  return { ok: false, reason, detail };
}
