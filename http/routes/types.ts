// What route modules receive: the services they may call. Handlers never build SQL or touch sockets.
import type { Principal } from '../../engine/identity/authenticator.js';
import type { Route } from '../adapter.js';

export type { Services } from '../../engine/services.js';

export type AppRoute = Route<Principal>;
