// Authentication to the corporate proxy (docs/routes.md#proxy-authentication): which Proxy-Authorization
// to send, leg by leg, for one upstream connection. Basic is one static header; Negotiate (RFC 4559) is a
// Kerberos token per context; NTLM (MS-NLMP) is three messages, and the last two must travel on one TCP
// connection because the proxy authenticates the connection, not the request. A failure is a value with
// its reason and the mechanism, never a credential; nothing here ever drops the proxy (principle A2).
import { deny, ok, type ProxyAuthMode, type UpstreamProxy, type Verdict } from '../core/index.js';
import { gssMessage, type Gss, type NegotiateContext } from './negotiate.js';
import { ntlmAuthenticateMessage, ntlmNegotiateMessage, parseNtlmChallenge } from './ntlm.js';

export type Mechanism = 'basic' | 'negotiate' | 'ntlm';

/** One challenge of a Proxy-Authenticate field: its scheme (lower case) and its token68, if any. */
export interface Challenge {
  readonly scheme: string;
  readonly token: string | null;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const TOKEN68 = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * The challenges of Proxy-Authenticate fields (RFC 9110 §11.6.1, §11.3): a field may hold several,
 * comma-separated, and auth-params may quote commas. A new challenge starts where a list element begins
 * with a scheme token not followed by `=`; anything else continues the previous challenge's params.
 */
export function parseChallenges(fields: readonly string[]): Challenge[] {
  const challenges: Challenge[] = [];
  for (const field of fields) {
    for (const element of splitList(field)) {
      const space = element.indexOf(' ');
      const scheme = space < 0 ? element : element.slice(0, space);
      const rest = space < 0 ? '' : element.slice(space + 1).trim();
      // `realm="x"` and `realm = "x"` (BWS, RFC 9110 §11.2) are auth-params, not challenges.
      if (!TOKEN.test(scheme) || element.startsWith(`${scheme}=`) || rest.startsWith('=')) continue;
      challenges.push({ scheme: scheme.toLowerCase(), token: TOKEN68.test(rest) ? rest : null });
    }
  }
  return challenges;
}

function splitList(field: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < field.length; i++) {
    const c = field[i];
    // A quoted-pair (RFC 9110 §5.6.4) is two characters: `\"` does not end the string, `\\"` does.
    if (quoted && c === '\\') {
      current += field.slice(i, i + 2);
      i += 1;
      continue;
    }
    if (c === '"') quoted = !quoted;
    if (c === ',' && !quoted) {
      parts.push(current.trim());
      current = '';
    } else current += c;
  }
  parts.push(current.trim());
  return parts.filter((p) => p !== '');
}

/** The mode in force for a proxy: the configured one, or what its credentials imply. */
export function authModeOf(proxy: UpstreamProxy): ProxyAuthMode {
  return proxy.auth ?? (proxy.authorization === null ? 'none' : 'basic');
}

/** Whether a proxy's authentication binds the connection: such connections are never pooled across hops. */
export function isConnectionBound(mechanism: Mechanism | null): boolean {
  return mechanism === 'negotiate' || mechanism === 'ntlm';
}

/**
 * What `auto` learned of each proxy's offer, so later hops authenticate on the first leg instead of
 * paying a 407 first (as curl and browsers do). Bounded: PAC answers can name any proxy.
 */
export class LearnedMechanisms {
  private readonly byProxy = new Map<string, Mechanism>();

  constructor(private readonly max = 1000) {}

  get(label: string): Mechanism | undefined {
    return this.byProxy.get(label);
  }

  set(label: string, mechanism: Mechanism): void {
    if (!this.byProxy.has(label) && this.byProxy.size >= this.max) this.byProxy.clear();
    this.byProxy.set(label, mechanism);
  }
}

export interface ProxyAuthContext {
  readonly gss: Gss;
  readonly learned: LearnedMechanisms;
}

/** The next leg: the Proxy-Authorization to send (null: none), and whether it must follow the previous leg on its connection. */
export interface AuthLeg {
  readonly authorization: string | null;
  readonly sameConnection: boolean;
}

/** At most this many 407s per upstream connection attempt: NTLM needs two legs, multi-leg SPNEGO three. */
export const MAX_AUTH_LEGS = 4;

// As the config names them (route.proxy.auth), so a detail reads like the key an operator changes.
const NAMES: Readonly<Record<Mechanism, string>> = { basic: 'basic', negotiate: 'negotiate', ntlm: 'ntlm' };

/**
 * The Proxy-Authorization dialogue of one upstream connection attempt (a CONNECT, or one forwarded
 * request on a connection of its own). `first()` gives the header of the first leg; after each 407,
 * `answer()` gives the next leg or the denial that ends the hop.
 */
export class ProxyAuthDialogue {
  private mechanism: Mechanism | null = null;
  private negotiate: NegotiateContext | null = null;
  private ntlmLeg: 'none' | 'negotiate-sent' | 'authenticate-sent' = 'none';
  private legs = 0;
  /** The first leg used what `auto` learned earlier: the proxy may have changed its offer since. */
  private fromLearned = false;

  constructor(
    private readonly proxy: UpstreamProxy,
    private readonly context: ProxyAuthContext,
  ) {}

  /** The mechanism in use once one is chosen (for the audit detail and connection pooling). */
  get chosen(): Mechanism | null {
    return this.mechanism;
  }

  /** True while the next answer is expected to be a challenge: no mechanism yet, or NTLM's first leg sent. */
  get awaitsChallenge(): boolean {
    return this.mechanism === null || (this.mechanism === 'ntlm' && this.ntlmLeg === 'negotiate-sent');
  }

  /** The first leg's header: preemptive when the mechanism is configured or learned, else none. */
  async first(): Promise<Verdict<AuthLeg>> {
    const mode = authModeOf(this.proxy);
    const preset: Mechanism | undefined = mode === 'auto' ? this.context.learned.get(this.proxy.label) : mode === 'none' ? undefined : mode;
    if (preset === undefined) return ok({ authorization: null, sameConnection: false });
    this.fromLearned = mode === 'auto';
    const leg = await this.start(preset);
    if (!leg.ok && mode === 'auto' && preset === 'negotiate') {
      // A learned Negotiate with no ticket here now is this machine's state, not the proxy's answer: the
      // 407's offer decides, as on a first hop (answer() falls back only before any token was refused).
      this.mechanism = null;
      this.negotiate = null;
      return ok({ authorization: null, sameConnection: false });
    }
    return leg;
  }

  /** After a 407 carrying `challenges`: the next leg, or the denial (never a retry without the proxy). */
  async answer(challenges: readonly Challenge[]): Promise<Verdict<AuthLeg>> {
    this.legs += 1;
    const label = this.proxy.label;
    const offered = challenges.map((c) => c.scheme);
    const offeredText = offered.length === 0 ? 'no scheme' : [...new Set(offered)].map((s) => NAMES[s as Mechanism] ?? s).join(', ');
    if (this.legs > MAX_AUTH_LEGS) return this.failed(`${this.mechanism ?? 'auth'}: ${label} still answered 407 after ${MAX_AUTH_LEGS} legs`);
    const mode = authModeOf(this.proxy);
    if (mode === 'none') {
      const why = this.proxy.credentialsWithheld === true ? 'it is not in route.pac.credentialProxies, so Sluice sends it no credentials' : 'no proxy authentication is configured';
      return deny('upstream_auth_required', `${label} answered 407 (offers ${offeredText}); ${why}`);
    }
    if (this.fromLearned && this.legs === 1 && this.mechanism !== null && !offered.includes(this.mechanism)) {
      // The proxy no longer offers what was learned: choose again from this offer (a rejection of a
      // still-offered mechanism never leads to another one).
      this.mechanism = null;
      this.negotiate = null;
      this.ntlmLeg = 'none';
    }
    const current = this.mechanism;
    if (current === null) {
      const candidates = this.candidates(offered, mode);
      if (candidates.length === 0) return deny('upstream_auth_unsupported', `${label} offers ${offeredText}; Sluice is configured for ${this.configuredText(mode)}`);
      let started: Verdict<AuthLeg> = deny('upstream_auth_unsupported', offeredText);
      for (const candidate of candidates) {
        started = await this.start(candidate);
        if (started.ok) {
          if (mode === 'auto') this.context.learned.set(label, candidate);
          return started;
        }
        // auto: no Kerberos ticket here is this machine's state, not the proxy's answer, so the next
        // mechanism the proxy offers is tried; a proxy's rejection never leads to a weaker one.
        if (mode !== 'auto' || candidate !== 'negotiate') return started;
      }
      return started;
    }
    if (!offered.includes(current)) {
      return deny('upstream_auth_unsupported', `${label} answered 407 offering ${offeredText}, not ${NAMES[current]}; Sluice is configured for ${this.configuredText(mode)}`);
    }
    const own = challenges.find((c) => c.scheme === current);
    if (current === 'basic') {
      // A 407 to Basic credentials stays upstream_auth_required, the contract docs/reason-codes.md gives it.
      return deny('upstream_auth_required', `${label} answered 407 to the configured credentials (auth basic)`);
    }
    if (current === 'ntlm') {
      if (this.ntlmLeg !== 'negotiate-sent' || own?.token == null) return this.failed(`ntlm: ${label} rejected the NTLM authentication (407)`);
      const challenge = parseNtlmChallenge(Buffer.from(own.token, 'base64'));
      if (challenge === null) return this.failed(`ntlm: ${label} sent an NTLM challenge that does not parse (407)`);
      const credentials = this.proxy.ntlm;
      if (credentials == null) return this.failed(`ntlm: no NTLM credentials for ${label}`);
      this.ntlmLeg = 'authenticate-sent';
      return ok({ authorization: `NTLM ${ntlmAuthenticateMessage(challenge, credentials).toString('base64')}`, sameConnection: true });
    }
    // Negotiate: a token back with an incomplete context is another leg (RFC 4559 §5); anything else is a rejection.
    const context = this.negotiate;
    if (context === null || context.complete || own?.token == null) return this.failed(`negotiate: ${label} rejected the Kerberos token (407)`);
    try {
      return ok({ authorization: `Negotiate ${await context.step(own.token)}`, sameConnection: true });
    } catch (error) {
      return this.failed(`negotiate: the next leg with ${label} failed: ${gssMessage(error)}`);
    }
  }

  private async start(mechanism: Mechanism): Promise<Verdict<AuthLeg>> {
    this.mechanism = mechanism;
    const label = this.proxy.label;
    if (mechanism === 'basic') {
      if (this.proxy.authorization === null) return deny('upstream_auth_unsupported', `${label}: basic needs a credentialsFile`);
      return ok({ authorization: this.proxy.authorization, sameConnection: false });
    }
    if (mechanism === 'ntlm') {
      if (this.proxy.ntlm == null) return deny('upstream_auth_unsupported', `${label}: NTLM needs a credentialsFile`);
      this.ntlmLeg = 'negotiate-sent';
      // The negotiate message may open a connection; the authenticate message must follow on it.
      return ok({ authorization: `NTLM ${ntlmNegotiateMessage().toString('base64')}`, sameConnection: false });
    }
    const gss = this.context.gss;
    if (gss.unavailable !== null) return deny('upstream_auth_unsupported', `${label}: Negotiate is not available: ${gss.unavailable}`);
    const spn = this.proxy.spn ?? `HTTP@${this.proxy.host}`;
    try {
      this.negotiate = await gss.initiate(spn);
      return ok({ authorization: `Negotiate ${await this.negotiate.step('')}`, sameConnection: false });
    } catch (error) {
      // No ticket, an expired one, no keytab, or no such service principal: Sluice has nothing to offer.
      return this.failed(`negotiate: no Kerberos token for ${spn}: ${gssMessage(error)}`);
    }
  }

  /** Strongest first among what the proxy offers and Sluice can do (auto), or exactly the configured one. */
  private candidates(offered: readonly string[], mode: ProxyAuthMode): Mechanism[] {
    const usable = (m: Mechanism): boolean => offered.includes(m) && this.canUse(m);
    if (mode === 'basic' || mode === 'negotiate' || mode === 'ntlm') return usable(mode) ? [mode] : [];
    return (['negotiate', 'ntlm', 'basic'] as const).filter(usable);
  }

  private canUse(mechanism: Mechanism): boolean {
    if (mechanism === 'basic') return this.proxy.authorization !== null;
    if (mechanism === 'ntlm') return this.proxy.ntlm != null;
    return this.context.gss.unavailable === null;
  }

  private configuredText(mode: ProxyAuthMode): string {
    if (mode !== 'auto') return NAMES[mode as Mechanism] ?? mode;
    const can = (['negotiate', 'ntlm', 'basic'] as const).filter((m) => this.canUse(m)).map((m) => NAMES[m]);
    return can.length === 0 ? 'auto, with nothing usable' : `auto (${can.join(', ')})`;
  }

  private failed(detail: string): Verdict<never> {
    return deny('upstream_auth_failed', detail);
  }
}
