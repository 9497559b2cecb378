// The pipeline diagrams of README.md ("The pipeline of one hop") and docs/pipeline.md must carry the
// whole reason table of src/core/reason.ts (the README's once showed 37 of its 54 codes, and nothing
// noticed). A code may stand at more than one stage (request_malformed at accept and at parse target),
// so each must appear at least once; every time it appears it is followed by the status the table gives,
// and a snake_case word in the diagram is either a reason code or a close reason (which has no status).
import { describe, expect, it } from 'vitest';
import { CloseReasons, Reasons, type ReasonCode } from '../../src/core/index.js';
import { readDoc, readFencedBlocks } from './markdown.js';

const DIAGRAMS = [
  { doc: 'README.md', heading: 'The pipeline of one hop' },
  { doc: 'docs/pipeline.md', heading: 'The pipeline of one hop' },
] as const;

/** Codes that are one plain word (`granted`, `completed`, …): no underscore marks them. */
const PLAIN_WORD_CODES = [...Object.keys(Reasons), ...Object.keys(CloseReasons)].filter((code) => !code.includes('_'));
/** A snake_case word or a one-word code, and the three-digit status right after it, if any. */
const CODE_WORD = new RegExp(`\\b([a-z][a-z0-9]*(?:_[a-z0-9]+)+|${PLAIN_WORD_CODES.join('|')})\\b(?: (\\d{3})\\b)?`, 'g');

interface Mention {
  readonly code: string;
  readonly status: string | undefined;
  readonly line: string;
}

function diagramOf(doc: string, heading: string): string {
  const block = readFencedBlocks(readDoc(doc)).find((b) => b.heading === heading && b.info === '');
  if (block === undefined) throw new Error(`${doc} has no diagram (a plain fenced block) under "${heading}"`);
  return block.text;
}

function mentionsIn(diagram: string): Mention[] {
  const out: Mention[] = [];
  for (const line of diagram.split('\n')) {
    for (const match of line.matchAll(CODE_WORD)) out.push({ code: match[1] ?? '', status: match[2], line: line.trim() });
  }
  return out;
}

describe.each(DIAGRAMS)('$doc: the pipeline diagram', ({ doc, heading }) => {
  const mentions = mentionsIn(diagramOf(doc, heading));
  const isReason = (code: string): code is ReasonCode => Object.hasOwn(Reasons, code);

  it('finds the diagram and codes in it (parser sanity check)', () => {
    expect(mentions.filter((m) => m.code === 'destination_not_granted')).not.toEqual([]);
  });

  it('shows every code of Reasons, at least once', () => {
    const shown = new Set(mentions.map((m) => m.code));
    expect(Object.keys(Reasons).filter((code) => !shown.has(code)), `codes missing from ${doc}'s diagram`).toEqual([]);
  });

  it('names no code that Reasons or CloseReasons does not have', () => {
    const unknown = mentions.filter((m) => !isReason(m.code) && !Object.hasOwn(CloseReasons, m.code));
    expect(unknown.map((m) => `${m.code} in "${m.line}"`)).toEqual([]);
  });

  it('gives each reason code, wherever it stands, the status of the table', () => {
    const wrong = mentions.filter((m) => isReason(m.code) && m.status !== String(Reasons[m.code].status));
    expect(wrong.map((m) => `${m.code} ${m.status ?? '(no status)'}, the table says ${isReason(m.code) ? Reasons[m.code].status : '?'}: "${m.line}"`)).toEqual([]);
  });

  it('gives close reasons no status: they are recorded, never answered', () => {
    const withStatus = mentions.filter((m) => Object.hasOwn(CloseReasons, m.code) && m.status !== undefined);
    expect(withStatus.map((m) => `${m.code} ${m.status}`)).toEqual([]);
  });
});
