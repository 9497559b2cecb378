#!/usr/bin/env node
// Entry for `npx sluice`: the compiled CLI lives in dist/ (built by `npm ci` through `prepare`).
import '../dist/main.js';
