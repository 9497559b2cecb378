// ProxyError: the one base class for faults (not denials), with a stable ERR_* code and a cause.

export type ErrorCode = `ERR_${Uppercase<string>}`;

export class ProxyError extends Error {
  override readonly name = 'ProxyError';
  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}
