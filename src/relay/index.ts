// The relay module: opaque tunnels and HTTP/1.1 forwarding; moves bytes, decides nothing.
export * from './hop-by-hop.js';
export * from './tunnel.js';
export * from './adopt-reused-reads.js';
export * from './end-socket.js';
export * from './forward.js';
export * from './client-hello.js';
export * from './first-bytes.js';
export * from './bound-upstreams.js';
export * from './principal-pools.js';
