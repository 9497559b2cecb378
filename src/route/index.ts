// The route module: selectRoute() for an authorized destination.
export * from './select-route.js';
