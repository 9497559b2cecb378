// Specifies the Server-Sent Events parser against WHATWG HTML "Parsing an event stream" (section 9.2.6):
// line endings CRLF, LF and CR; comments; multi-line data; id tracking; and the same events whatever the
// chunking, down to a UTF-8 sequence split between two chunks (a seeded fuzz of random splits).
import { describe, expect, it } from 'vitest';
import { SseParser, type SseEvent } from '../../../../src/cli/watch/sse-parser.js';
import { seededRandom } from '../../../support/seeded-random.js';

function parseAll(chunks: readonly (string | Uint8Array)[], lastEventId = ''): { events: SseEvent[]; parser: SseParser } {
  const parser = new SseParser(lastEventId);
  const events = chunks.flatMap((chunk) => parser.push(chunk));
  return { events, parser };
}

const ev = (id: string, event: string, data: string, hasOwnId = true): SseEvent => ({ id, hasOwnId, event, data });

describe('SseParser: one stream in one chunk', () => {
  it.each([
    ['LF', 'id: 1\nevent: decision\ndata: {"a":1}\n\n'],
    ['CRLF', 'id: 1\r\nevent: decision\r\ndata: {"a":1}\r\n\r\n'],
    ['CR', 'id: 1\revent: decision\rdata: {"a":1}\r\r'],
    ['mixed', 'id: 1\r\nevent: decision\rdata: {"a":1}\n\r\n'],
  ])('dispatches an event at the blank line (%s line endings)', (_name, text) => {
    expect(parseAll([text]).events).toEqual([ev('1', 'decision', '{"a":1}')]);
  });

  it('joins multiple data lines with \\n, and keeps no trailing newline', () => {
    expect(parseAll(['data: one\ndata: two\ndata:\ndata: four\n\n']).events).toEqual([ev('', 'message', 'one\ntwo\n\nfour', false)]);
  });

  it('ignores comment lines (": keep-alive") and unknown fields, and retry', () => {
    const text = ': keep-alive\n\n:\nid: 7\nfoo: bar\nretry: 10\n: between\nevent: grant\ndata: x\n\n: keep-alive\n\n';
    expect(parseAll([text]).events).toEqual([ev('7', 'grant', 'x')]);
  });

  it('strips exactly one space after the colon; a field without a colon has an empty value', () => {
    expect(parseAll(['data:  two spaces\n\ndata\n\ndata:nospace\n\n']).events.map((e) => e.data)).toEqual([' two spaces', '', 'nospace']);
  });

  it('calls an event without event: a message, and dispatches nothing for a block without data', () => {
    const { events, parser } = parseAll(['id: 3\nevent: gap\n\ndata: d\n\n']);
    expect(events).toEqual([ev('3', 'message', 'd', false)]);
    // The id of a block without data still becomes the last event ID (it is what a reconnect sends).
    expect(parser.lastEventId).toBe('3');
  });

  it('keeps the last event ID across events until another id: line, and an empty id: clears it', () => {
    const { events } = parseAll(['id: 5\ndata: a\n\ndata: b\n\nid\ndata: c\n\n']);
    expect(events).toEqual([ev('5', 'message', 'a'), ev('5', 'message', 'b', false), ev('', 'message', 'c')]);
  });

  it('ignores an id that contains NULL', () => {
    expect(parseAll(['id: 4\ndata: a\n\nid: 9\0x\ndata: b\n\n']).events.map((e) => e.id)).toEqual(['4', '4']);
  });

  it('starts from the last event ID it is given (a reconnect carries it over)', () => {
    const { events, parser } = parseAll(['data: a\n\n'], '41');
    expect(events).toEqual([ev('41', 'message', 'a', false)]);
    expect(parser.lastEventId).toBe('41');
  });

  it('drops a byte order mark at the start of the stream, as bytes or as text', () => {
    expect(parseAll([Buffer.from('\ufeffdata: a\n\n', 'utf8')]).events).toEqual([ev('', 'message', 'a', false)]);
    expect(parseAll(['\ufeffdata: a\n\n']).events).toEqual([ev('', 'message', 'a', false)]);
  });

  it('discards an event the stream ends in the middle of', () => {
    expect(parseAll(['data: a\n\ndata: b\n']).events).toEqual([ev('', 'message', 'a', false)]);
  });

  it('throws when one event grows beyond its bound (a broken stream cannot take all memory)', () => {
    const parser = new SseParser('', 64);
    expect(() => parser.push(`data: ${'x'.repeat(100)}`)).toThrow(/larger than 64/);
    const lines = new SseParser('', 64);
    expect(() => {
      for (let i = 0; i < 20; i++) lines.push('data: 0123456789\n');
    }).toThrow(/larger than 64/);
  });
});

describe('SseParser: chunks split anywhere', () => {
  const stream =
    ': keep-alive\r\n\r\n' +
    'id: 1\r\nevent: decision\r\ndata: {"destination":"https://bücher.example:443","reason":"granted"}\r\n\r\n' +
    'id: 2\nevent: ask\ndata: {"ask":"a-1",\ndata: "grant":"g-1"}\n\n' +
    'event: gap\rdata: {"from":3,"to":4}\r\r' +
    'id: 5\r\nevent: grant\r\ndata: ✓ 日本 🎉\r\n\r\n';
  const expected = [
    ev('1', 'decision', '{"destination":"https://bücher.example:443","reason":"granted"}'),
    ev('2', 'ask', '{"ask":"a-1",\n"grant":"g-1"}'),
    ev('2', 'gap', '{"from":3,"to":4}', false),
    ev('5', 'grant', '✓ 日本 🎉'),
  ];
  const bytes = Buffer.from(stream, 'utf8');

  it('gives the same events one byte at a time (CR and LF of a CRLF in different chunks; UTF-8 split)', () => {
    expect(parseAll([...bytes].map((b) => Uint8Array.of(b))).events).toEqual(expected);
  });

  it('gives the same events for every split into two chunks', () => {
    for (let at = 0; at <= bytes.length; at++) {
      expect(parseAll([bytes.subarray(0, at), bytes.subarray(at)]).events, `split at byte ${at}`).toEqual(expected);
    }
  });

  it('gives the same events for 500 seeded random splits, bytes and text, with empty chunks', () => {
    const seed = 0x5ee;
    const random = seededRandom(seed);
    for (let run = 0; run < 500; run++) {
      const asText = run % 2 === 1;
      const source: string | Buffer = asText ? stream : bytes;
      const chunks: (string | Uint8Array)[] = [];
      let at = 0;
      while (at < source.length) {
        const size = Math.floor(random() * 12);
        chunks.push(typeof source === 'string' ? source.slice(at, at + size) : source.subarray(at, at + size));
        at += size;
      }
      expect(parseAll(chunks).events, `seed ${seed} run ${run}: ${chunks.length} chunks`).toEqual(expected);
    }
  });
});
