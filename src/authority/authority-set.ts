// Compiles a grant's destination rules into exact-host and suffix maps once, so a match costs a few
// map lookups whatever the rule count. Pure: no I/O, no clock.
import { deny, ok, type CanonicalDestination, type RequestKind, type Verdict } from '../core/index.js';
import { parseDestinationRule, type DestinationRule } from './destination-rule.js';

/**
 * CONNECT is authorized by https, wss or tcp rules; absolute-form requests by http or ws rules
 * (docs/pipeline.md).
 */
const KIND_OF_SCHEME = { https: 'connect', wss: 'connect', tcp: 'connect', http: 'forward', ws: 'forward' } as const;

export interface AuthoritySet {
  readonly unrestricted: boolean;
  readonly rules: readonly DestinationRule[];
  readonly exact: ReadonlyMap<string, DestinationRule>;
  readonly suffix: ReadonlyMap<string, DestinationRule>;
}

export interface RuleIssue {
  readonly index: number;
  readonly message: string;
}

export type CompiledAuthority = { readonly ok: true; readonly value: AuthoritySet } | { readonly ok: false; readonly issues: readonly RuleIssue[] };

function indexKey(kind: RequestKind, host: string, port: number): string {
  return `${kind} ${host} ${port}`;
}

export function compileAuthoritySet(destinations: readonly string[], unrestricted: boolean): CompiledAuthority {
  const issues: RuleIssue[] = [];
  const rules: DestinationRule[] = [];
  const exact = new Map<string, DestinationRule>();
  const suffix = new Map<string, DestinationRule>();
  destinations.forEach((raw, index) => {
    const parsed = parseDestinationRule(raw);
    if (!parsed.ok) {
      issues.push({ index, message: `"${raw}": ${parsed.detail}` });
      return;
    }
    const rule = parsed.value;
    rules.push(rule);
    const key = indexKey(KIND_OF_SCHEME[rule.scheme], rule.host, rule.port);
    const table = rule.isWildcard ? suffix : exact;
    if (!table.has(key)) table.set(key, rule);
  });
  if (issues.length > 0) return { ok: false, issues };
  return { ok: true, value: { unrestricted, rules, exact, suffix } };
}

export interface MatchedRule {
  readonly text: string;
}

const UNRESTRICTED: MatchedRule = { text: 'unrestricted' };

/** Authorizes one hop: the canonical destination against the grant's authority set. */
export function authorize(set: AuthoritySet, kind: RequestKind, dest: CanonicalDestination): Verdict<MatchedRule> {
  if (set.unrestricted) return ok(UNRESTRICTED);
  const exactRule = set.exact.get(indexKey(kind, dest.host, dest.port));
  if (exactRule !== undefined) return ok(exactRule);
  if (dest.hostKind === 'name') {
    // Walk parent domains: a.b.example.com tries b.example.com, example.com, com; never the host itself,
    // so *.example.com cannot match example.com, and label boundaries stop xa.test matching *.a.test.
    let dot = dest.host.indexOf('.');
    while (dot >= 0) {
      const rule = set.suffix.get(indexKey(kind, dest.host.slice(dot + 1), dest.port));
      if (rule !== undefined) return ok(rule);
      dot = dest.host.indexOf('.', dot + 1);
    }
  }
  return deny('destination_not_granted');
}
