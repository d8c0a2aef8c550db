// Every route module, in registration order. The OpenAPI document and the router are both built from this list.
import type { AppRoute, Services } from './types.js';
import { opsRoutes } from './ops.js';
import { keyRoutes } from './keys.js';
import { memoryRoutes } from './memories.js';
import { actionItemRoutes } from './action-items.js';
import { goalRoutes } from './goals.js';

export function allRoutes(s: Services): AppRoute[] {
  return [...opsRoutes(s), ...keyRoutes(s), ...memoryRoutes(s), ...actionItemRoutes(s), ...goalRoutes(s)];
}
