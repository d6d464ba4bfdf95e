// The live event stream: resumes after the last event seen when it drops.

import { RpcError } from "./rpc.js";

const FIRST_BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 5000;

export class LiveEvents {
  /**
   * handlers.ready({ fresh }) runs before any later event is read: a fresh
   * start (no cursor to resume from) must reload what it shows.
   * handlers.event(event), handlers.state("connecting"|"live"|"reconnecting"),
   * handlers.fatal(err) when signing in again is the only way on.
   */
  constructor(comms, handlers) {
    this.comms = comms;
    this.handlers = handlers;
    this.cursor = null;
    this.controller = new AbortController();
  }

  start() {
    this.handlers.state("connecting");
    this.run();
  }

  stop() {
    this.controller.abort();
  }

  async run() {
    const signal = this.controller.signal;
    let backoff = FIRST_BACKOFF_MS;
    while (!signal.aborted) {
      const fresh = this.cursor === null;
      try {
        for await (const event of this.comms.subscribe(this.cursor ?? "0", signal)) {
          if (signal.aborted) return;
          // Proto3 JSON leaves out a zero event id.
          const id = event.eventId ?? "0";
          if (event.ready !== undefined) {
            this.cursor = id === "0" ? null : id;
            backoff = FIRST_BACKOFF_MS;
            await this.handlers.ready({ fresh });
            this.handlers.state("live");
            continue;
          }
          this.cursor = id;
          this.handlers.event(event);
        }
      } catch (err) {
        if (signal.aborted) return;
        const code = err instanceof RpcError ? err.code : "unknown";
        if (code === "unauthenticated" || code === "permission_denied") {
          this.handlers.fatal(err);
          return;
        }
        // The cursor is no longer one this server knows: start again at the live end.
        if (code === "invalid_argument") this.cursor = null;
        console.warn("event stream:", err.message);
      }
      if (signal.aborted) return;
      this.handlers.state("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, backoff));
      backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
    }
  }
}
