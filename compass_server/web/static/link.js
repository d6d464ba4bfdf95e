// The page a one-ask link opens (/a/<secret>): the ask drawn by the app's own
// component (ask.js), answered through the link itself, not a session. The
// server put the ask in the page as data, so nothing is read before it shows.

import { preset, renderAsk } from "./ask.js";
import { replaceChildren } from "./dom.js";
import { isClosed, Model } from "./model.js";

// How often the open page reads its ask again while it is open and in view,
// to show an ending that came another way (an answer elsewhere, an expiry).
const REREAD_MS = 15000;

const data = JSON.parse(document.getElementById("link-data").textContent);
const root = document.getElementById("ask");
const status = document.getElementById("link-status");
const model = new Model();
model.addPage(data.askMessage.channelId, [data.askMessage], "");
model.handles.set(data.answerer.accountId, data.answerer.handle);

/** The link's POST: resolves to { said } or { error }; the ask as it now stands is kept either way. */
async function post(body) {
  let response;
  try {
    response = await fetch(location.pathname, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ askId: data.askId, ...body }),
    });
  } catch {
    return { error: "The server can't be reached; check your connection and try again." };
  }
  let json = {};
  try {
    json = await response.json();
  } catch {
    // A proxy's page, say: the status speaks for it.
  }
  if (json.askMessage) model.upsertMessage(json.askMessage);
  if (!response.ok) return { error: json.message || `The server answered ${response.status}.` };
  return { said: json.message || "" };
}

async function sent(body) {
  status.textContent = "";
  const { said, error } = await post(body);
  if (said) status.textContent = said;
  return error ?? "";
}

const ctx = {
  model,
  // The link's person: a quorum ask shows their own vote as theirs.
  me: { accountId: data.answerer.accountId },
  comms: null,
  refresh: () => draw(),
  reportQuiet: (text) => console.info(text),
  send: (ask, message, answers) => sent({ action: "answer", answers }),
  decline: (ask, message, reason) => sent({ action: "decline", reason }),
};

function draw() {
  const found = model.ask(data.askId);
  if (!found) return;
  const active = document.activeElement;
  const keep = root.contains(active) && active.id ? active.id : "";
  replaceChildren(root, renderAsk(found.ask, found.message, ctx));
  // Drawn again: the focus stays on the same control when it is still there.
  if (keep && document.activeElement === document.body) document.getElementById(keep)?.focus({ preventScroll: true });
}

/** The ask as the server has it now; drawn again only when it changed. */
async function reread() {
  const before = model.ask(data.askId);
  if (!before || isClosed(before.ask)) {
    clearInterval(rereading);
    return;
  }
  if (document.visibilityState !== "visible") return;
  try {
    const response = await fetch(location.pathname, { headers: { accept: "application/json" } });
    if (!response.ok) return;
    const { askMessage } = await response.json();
    const was = JSON.stringify(before.ask);
    model.upsertMessage(askMessage);
    if (JSON.stringify(model.ask(data.askId)?.ask) !== was) draw();
  } catch {
    // Offline for now: the next read, or the person's Submit, finds out.
  }
}

const rereading = setInterval(reread, REREAD_MS);
document.addEventListener("visibilitychange", reread);

if (data.choose) {
  const found = model.ask(data.askId);
  const question = found?.ask.questions?.find((q) => (q.options ?? []).some((o) => o.id === data.choose));
  if (question) preset(data.askId, question.questionId, data.choose);
}
draw();
