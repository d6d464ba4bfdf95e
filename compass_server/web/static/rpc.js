// The Connect protocol over fetch: unary JSON calls and the Subscribe stream.

const COMMS = "compass.v1.CommsService";

// When an error body carries no code, the HTTP status says which one it was.
const CODE_BY_STATUS = {
  400: "invalid_argument",
  401: "unauthenticated",
  403: "permission_denied",
  404: "not_found",
  409: "already_exists",
  429: "resource_exhausted",
  501: "unimplemented",
  503: "unavailable",
};

export class RpcError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "RpcError";
    this.code = code;
  }
}

const UNREACHABLE = "the server can't be reached; check your connection";

/** What went wrong, in words a person can act on. */
export function describe(err, doing) {
  const reason = err instanceof RpcError ? err.message : "something went wrong on this page; reload it";
  const text = reason.replace(/\.$/, "");
  return doing ? `${doing}: ${text}.` : `${text.charAt(0).toUpperCase()}${text.slice(1)}.`;
}

async function errorFrom(response) {
  const fallback = CODE_BY_STATUS[response.status] ?? "unknown";
  try {
    const body = await response.json();
    if (body && typeof body.code === "string") {
      return new RpcError(body.code, String(body.message || body.code.replace(/_/g, " ")));
    }
  } catch {
    // A proxy's HTML error page, say: fall back to the status.
  }
  return new RpcError(fallback, `the server answered ${response.status} ${response.statusText}`.trim());
}

function envelope(json) {
  const payload = new TextEncoder().encode(JSON.stringify(json));
  const out = new Uint8Array(5 + payload.length);
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, 5);
  return out;
}

export class Comms {
  /** `token`: an account token; null signs calls in with the browser session's cookie. */
  constructor(token) {
    this.token = token;
  }

  headers(contentType) {
    // The page names itself, so an ask's history can say a change came from here.
    const headers = { "content-type": contentType, "compass-surface": "web" };
    if (this.token) {
      headers.authorization = `Bearer ${this.token}`;
    } else {
      // The cookie counts only with this header, which a cross-site form can't send.
      headers["x-compass-csrf"] = "1";
    }
    return headers;
  }

  /**
   * One unary call: resolves to the response's proto3 JSON, rejects with RpcError.
   * `service` names another service on the same server, e.g. "compass.v1.InboxService".
   */
  async call(method, request = {}, service = COMMS) {
    let response;
    try {
      response = await fetch(`/${service}/${method}`, {
        method: "POST",
        headers: this.headers("application/json"),
        body: JSON.stringify(request),
      });
    } catch {
      throw new RpcError("unavailable", UNREACHABLE);
    }
    if (!response.ok) throw await errorFrom(response);
    return response.json();
  }

  /**
   * The event stream after `afterEventId` ("0" starts at the live end). Yields
   * events; returns on a clean end and throws RpcError on an error or a drop.
   */
  async *subscribe(afterEventId, signal) {
    let response;
    try {
      response = await fetch(`/${COMMS}/Subscribe`, {
        method: "POST",
        headers: this.headers("application/connect+json"),
        body: envelope({ afterEventId: String(afterEventId) }),
        signal,
      });
    } catch (err) {
      if (signal?.aborted) return;
      throw new RpcError("unavailable", UNREACHABLE);
    }
    if (!response.ok) throw await errorFrom(response);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = new Uint8Array(0);
    try {
      for (;;) {
        while (buffer.length >= 5) {
          const length = new DataView(buffer.buffer, buffer.byteOffset).getUint32(1);
          if (buffer.length < 5 + length) break;
          const flags = buffer[0];
          const json = JSON.parse(decoder.decode(buffer.subarray(5, 5 + length)));
          buffer = buffer.slice(5 + length);
          if (flags & 0x02) {
            if (json.error) {
              throw new RpcError(json.error.code ?? "unknown", json.error.message ?? "the stream failed");
            }
            return;
          }
          yield json;
        }
        let chunk;
        try {
          chunk = await reader.read();
        } catch {
          if (signal?.aborted) return;
          throw new RpcError("unavailable", "the event stream was cut off");
        }
        if (chunk.done) {
          throw new RpcError("unavailable", "the event stream ended without its end message");
        }
        const joined = new Uint8Array(buffer.length + chunk.value.length);
        joined.set(buffer);
        joined.set(chunk.value, buffer.length);
        buffer = joined;
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }
}

/** The server's sign-in providers: [{ name, label, login }]. */
export async function signInProviders() {
  try {
    const response = await fetch("/auth/providers");
    return response.ok ? (await response.json()).providers : [];
  } catch {
    return [];
  }
}

/** Ends the browser session on every server; the cookie goes. */
export async function endSession() {
  try {
    await fetch("/auth/logout", { method: "POST", headers: { "x-compass-csrf": "1" } });
  } catch {
    // Signed out on this page all the same; the session ends when it idles.
  }
}
