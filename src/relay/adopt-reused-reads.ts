// Moves an accepted socket onto reused read buffers in place, once its tunnel moves bulk (issue 26 item 1,
// ADR 0022 "The accepted side"). Node gives `onread` only to sockets it connects; a socket a net.Server
// accepted always reads into a fresh ArrayBuffer per read, and in the upload direction that allocation
// is what drives the external-memory scavenges and full-GC storms ADR 0022 removed for the dialed side.
// net.Socket implements `onread` as three per-socket slots (kBuffer, kBufferCb, kBufferGen), which its
// constructor sets on every socket, and a handle method (useUserBuffer) that makes the handle read into
// a given buffer. Setting the same state on an accepted socket is what `onread` itself does at creation.
// These are Node internals, so the switch is made only where it is tested (NODE_MAJORS, and both the
// slots and the method found as expected); anywhere else the socket keeps Node's own reads, which is
// correct, only slower. test/unit/relay/adopt-reused-reads.test.ts fails on a supported Node that no
// longer matches, so an upgrade cannot make it silently slow or wrong.
import type net from 'node:net';
import { onReusedRead, ReusedReads } from '../core/index.js';

/** Node major versions on which the in-place switch is tested: CI runs 20 and 24; 22.23.5 was run by hand. */
const NODE_MAJORS = new Set([20, 22, 24]);
const HANDLES = new Set(['TCP', 'Pipe']);

interface ReadSlots {
  readonly buffer: symbol;
  readonly callback: symbol;
  readonly generator: symbol;
}

interface UserBufferHandle {
  useUserBuffer(buffer: Uint8Array): void;
}

type Slotted = Record<symbol, unknown>;

let slots: ReadSlots | null | undefined;

function nodeMajor(): number {
  return Number(process.versions.node.split('.')[0]);
}

/** The three onread slots of a net.Socket, found once by their descriptions; null when Node differs. */
function readSlotsOf(socket: net.Socket): ReadSlots | null {
  if (slots !== undefined) return slots;
  const own = Object.getOwnPropertySymbols(socket);
  const find = (description: string): symbol | undefined => {
    const found = own.filter((s) => s.description === description);
    return found.length === 1 ? found[0] : undefined;
  };
  const buffer = find('kBuffer');
  const callback = find('kBufferCb');
  const generator = find('kBufferGen');
  slots = NODE_MAJORS.has(nodeMajor()) && buffer !== undefined && callback !== undefined && generator !== undefined ? { buffer, callback, generator } : null;
  return slots;
}

function userBufferHandle(socket: net.Socket): UserBufferHandle | null {
  const handle = (socket as unknown as { _handle?: unknown })._handle;
  if (handle === null || typeof handle !== 'object') return null;
  if (!HANDLES.has(handle.constructor.name)) return null;
  return typeof (handle as Partial<UserBufferHandle>).useUserBuffer === 'function' ? (handle as UserBufferHandle) : null;
}

/**
 * Switches `socket` (a plain TCP or unix socket a server accepted) to reads into reused buffers and
 * returns their state, bound to the socket, or null when it keeps Node's own reads: a TLS socket (its
 * handle is the TLS layer), one already reading through `onread`, one with bytes waiting in its
 * readable buffer (they would come after later reads), or a Node on which the switch is not tested.
 * Call it while nothing reads the socket's data but the caller.
 */
export function adoptReusedReads(socket: net.Socket): ReusedReads | null {
  if (socket.readableLength > 0 || socket.readableEnded || socket.destroyed) return null;
  const handle = userBufferHandle(socket);
  if (handle === null) return null;
  const found = readSlotsOf(socket);
  if (found === null) return null;
  const slotted = socket as unknown as Slotted;
  if (slotted[found.buffer] !== null || slotted[found.callback] !== null || slotted[found.generator] !== null) return null;
  const reads = new ReusedReads().bind(socket);
  const first = reads.buffer();
  // The handle and the JS side switch in one synchronous step: no read can come between them.
  handle.useUserBuffer(first);
  slotted[found.buffer] = first;
  slotted[found.callback] = onReusedRead;
  slotted[found.generator] = reads.buffer;
  return reads;
}

/** Whether this Node is one on which accepted sockets can be switched (the test that an upgrade did not break it). */
export function canAdoptReusedReads(socket: net.Socket): boolean {
  return userBufferHandle(socket) !== null && readSlotsOf(socket) !== null;
}
