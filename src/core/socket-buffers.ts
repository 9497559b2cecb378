// How much a socket buffers before write() reports backpressure (and, for accepted sockets, how much it
// reads ahead). Node's 16 KiB default is smaller than one 64 KiB read, so every relayed chunk paused the
// reading side and resumed it on 'drain': measured in bench/ (bulk, one stream down) at 0.6-0.8x the
// Node floor, against 1.1-1.5x with 128 KiB (ADR 0012). The cost is memory only under backpressure: at
// most this much plus one read per direction of a tunnel whose reader is slow.
export const SOCKET_HIGH_WATER_MARK = 128 * 1024;
