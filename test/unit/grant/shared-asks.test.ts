// The in-process StandingAnswers (an AskRegistry without a ledger): answers are kept per grant and per
// destination, never leak from one grant to another, and go when the grant ends.
import { describe, expect, it } from 'vitest';
import { memoryStandingAnswers } from '../../../src/grant/index.js';

describe('memoryStandingAnswers', () => {
  it('keeps an answer per grant and destination; a later answer replaces it; forget drops only that grant', async () => {
    const answers = memoryStandingAnswers();
    expect(answers.get('g1', 'https://a.test:443')).toBeUndefined();
    expect(await answers.keep('g1', 'https://a.test:443', 'allow')).toBe(true);
    await answers.keep('g2', 'https://a.test:443', 'deny');
    expect(answers.get('g1', 'https://a.test:443')).toBe('allow');
    expect(answers.get('g1', 'https://a.test:8443')).toBeUndefined();
    expect(answers.get('g2', 'https://a.test:443')).toBe('deny');
    await answers.keep('g1', 'https://a.test:443', 'deny');
    expect(answers.get('g1', 'https://a.test:443')).toBe('deny');
    answers.forget?.('g1');
    expect(answers.get('g1', 'https://a.test:443')).toBeUndefined();
    expect(answers.get('g2', 'https://a.test:443')).toBe('deny');
  });
});
