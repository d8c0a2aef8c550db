// Every route module, in registration order. The OpenAPI document and the router are both built from this list.
import type { AppRoute, Services } from './types.js';
import { opsRoutes } from './ops.js';
import { keyRoutes } from './keys.js';
import { memoryRoutes } from './memories.js';
import { actionItemRoutes } from './action-items.js';
import { goalRoutes } from './goals.js';
import { conversationRoutes } from './conversations.js';
import { folderRoutes } from './folders.js';
import { mcpRoutes } from '../mcp.js';
import { listenRoutes } from './listen.js';
import { usageRoutes } from './usage.js';
import { webhookRoutes } from './webhooks.js';
import { appRoutes } from './apps.js';
import { notificationRoutes } from './notifications.js';
import { userSettingsRoutes } from './user-settings.js';
import { dailySummaryRoutes } from './daily-summaries.js';
import { speakerRoutes } from './speakers.js';

export function allRoutes(s: Services): AppRoute[] {
  return [
    ...opsRoutes(s),
    ...keyRoutes(s),
    ...conversationRoutes(s),
    ...listenRoutes(s),
    ...folderRoutes(s),
    ...usageRoutes(s),
    ...memoryRoutes(s),
    ...actionItemRoutes(s),
    ...goalRoutes(s),
    ...webhookRoutes(s),
    ...appRoutes(s),
    ...userSettingsRoutes(s),
    ...notificationRoutes(s),
    ...dailySummaryRoutes(s),
    ...speakerRoutes(s),
    ...mcpRoutes(s),
  ];
}
