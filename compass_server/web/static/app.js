// The page: sign-in, the sidebar (inbox, channels, DMs, agents) and the open
// view, kept live from the event stream. Views are picked by the URL hash.

import { ChannelView } from "./channel.js";
import { h } from "./dom.js";
import { renderSignedIn, whoAmI } from "./identity.js";
import { InboxView, listOpenInboxItems } from "./inbox.js";
import { LiveEvents } from "./live.js";
import { Model } from "./model.js";
import { Notifier } from "./notify.js";
import { renderAgents } from "./presence.js";
import { Comms, describe, endSession, signInProviders } from "./rpc.js";
import { StandingView } from "./standing.js";
import { loadPreferences, registerWorker, SettingsView } from "./settings.js";

const TOKEN_KEY = "compass.token";
const MAX_ALERTS = 3;
// GetAccounts takes at most this many ids a call.
const MAX_ACCOUNT_IDS = 200;

// "#/channel/<id>" → a ChannelView. Another view adds its route here.
const ROUTES = {
  channel: (app, id) => (app.model.channels.has(id) ? new ChannelView(app, id) : null),
  // "#/inbox" → the list; "#/inbox/<item id>" → the list and that item's thread.
  inbox: (app, itemId) => new InboxView(app, itemId),
  // "#/ask/<ask id>" → the ask's channel, scrolled to the ask (the links webhooks carry).
  ask: (app, askId) => (askId ? new AskLink(app, askId) : null),
  // "#/standing" → the signed-in person's standing answers.
  standing: (app) => new StandingView(app),
  // "#/settings" → the signed-in person's notification settings.
  settings: (app) => new SettingsView(app),
};

/** Finds an ask's channel and goes there, the ask to be brought into view. */
class AskLink {
  constructor(app, askId) {
    this.app = app;
    this.askId = askId;
    this.root = h("p", { class: "empty" }, "Opening the ask…");
  }

  async open() {
    try {
      const { message } = await this.app.comms.call("GetAskMessage", { askId: this.askId });
      this.app.focus = { askId: this.askId, message };
      location.replace(`#/channel/${encodeURIComponent(message.channelId)}`);
    } catch (err) {
      this.root.textContent =
        err.code === "not_found" ? "That ask isn't here, or you can't see it." : describe(err, "Couldn't open the ask");
    }
  }

  close() {}

  reload() {}
}

const $ = (id) => document.getElementById(id);

function parseRoute() {
  const [, name, ...rest] = location.hash.replace(/^#/, "").split("/");
  return { name: name || "", arg: decodeURIComponent(rest.join("/")) };
}

async function listAllChannels(comms) {
  const channels = [];
  let pageToken = "";
  do {
    const page = await comms.call("ListChannels", { pageSize: 200, pageToken });
    channels.push(...(page.channels ?? []));
    pageToken = page.nextPageToken ?? "";
  } while (pageToken);
  return channels;
}

class App {
  constructor(comms, me) {
    this.comms = comms;
    this.me = me;
    this.model = new Model();
    this.view = null;
    this.route = null;
    this.loaded = false;
    this.inboxFilter = "open";
    // An ask a link asked to see, for the channel view to bring into view.
    this.focus = null;
    this.notifier = new Notifier(this);
    this.named = new Set(); // account ids whose handle was asked for
    this.alert = (text) => showAlert(text);
    this.reportQuiet = (text) => console.info(text);
    this.onHash = () => this.navigate();
    this.unsubscribe = this.model.subscribe((change) => this.onChange(change));
  }

  start(channels) {
    this.model.setChannels(channels);
    this.renderInboxLink();
    window.addEventListener("hashchange", this.onHash);
    this.navigate();
    this.live = new LiveEvents(this.comms, {
      ready: ({ fresh }) => (fresh ? this.loadSnapshots() : undefined),
      event: (event) => {
        this.model.apply(event);
        this.notifier.hear(event);
      },
      state: (state) => this.onLiveState(state),
      fatal: (err) => signOut(describe(err, "You were signed out")),
    });
    this.live.start();
    this.notifier.renderPrompt($("notify-prompt"));
    // The person's surfaces: the page's own notification is one of them.
    this.preferences = null;
    loadPreferences(this.comms).then((got) => {
      if (got && !this.preferences) this.preferences = got.preferences ?? {};
    });
    // Installable, and ready to show pushes once the person turns them on.
    registerWorker();
  }

  /** Goes to a place of the page by its hash (a notification's ask or item). */
  open(hash) {
    location.hash = hash;
  }

  stop() {
    this.live?.stop();
    this.notifier.stop();
    $("notify-prompt").hidden = true;
    this.view?.close();
    this.unsubscribe();
    window.removeEventListener("hashchange", this.onHash);
  }

  /** Everything shown, read again: at start and after a stream could not resume. */
  async loadSnapshots() {
    this.loaded = true;
    const results = await Promise.allSettled([
      listAllChannels(this.comms).then((channels) => this.model.setChannels(channels)),
      // The agents this person works with: the ones whose presence the stream brings.
      this.comms.call("GetPresence", { heard: true }).then((r) => this.model.setPresence(r.presences ?? [])),
      listOpenInboxItems(this.comms, this.model).then((ids) => this.model.setInboxOpen(ids)),
      this.view?.reload(),
    ]);
    const failed = results.find((r) => r.status === "rejected");
    if (failed) this.alert(describe(failed.reason, "Couldn't load the workspace"));
    if (!this.view) this.navigate();
  }

  onLiveState(state) {
    const status = $("live-status");
    status.dataset.state = state;
    status.textContent = { connecting: "Connecting…", live: "Live", reconnecting: "Reconnecting…" }[state];
    // Without a stream, still show what can be read.
    if (state === "reconnecting" && !this.loaded) this.loadSnapshots();
  }

  onChange(change) {
    // Authors of messages are read too, and a read account names the agent above it, read in turn.
    if (["channels", "presence", "handles", "message", "page"].includes(change.kind)) this.resolveHandles();
    if (change.kind === "channels" || change.kind === "handles") this.renderChannels();
    // The first channel, or the one the URL names, may arrive live.
    if (change.kind === "channels" && !this.view) this.navigate();
    if (change.kind === "presence" || change.kind === "handles") renderAgents(this.model, $("agent-list"));
    if (change.kind === "inbox") this.renderInboxLink();
  }

  /** Reads the handles of accounts shown without one (and of `more`), once each. */
  resolveHandles(more = []) {
    const ids = [...new Set([...this.model.unnamed(), ...more])].filter(
      (id) => id && !this.named.has(id) && !this.model.parents.has(id),
    );
    for (let i = 0; i < ids.length; i += MAX_ACCOUNT_IDS) {
      const batch = ids.slice(i, i + MAX_ACCOUNT_IDS);
      for (const id of batch) this.named.add(id);
      this.comms.call("GetAccounts", { accountIds: batch }).then(
        (r) => this.model.setAccounts(r.accounts ?? []),
        (err) => {
          // Asked again the next time the page looks for names.
          for (const id of batch) this.named.delete(id);
          this.reportQuiet(`reading account names: ${err.message}`);
        },
      );
    }
  }

  navigate() {
    let { name, arg } = parseRoute();
    if (!ROUTES[name]) {
      const first = this.model.sortedChannels()[0];
      if (!first) {
        this.show(null, h("p", { class: "empty" }, "You are not in any channel yet."));
        return;
      }
      [name, arg] = ["channel", first.channelId];
    }
    const key = `${name}/${arg}`;
    if (key === this.route && this.view) return;
    const view = ROUTES[name](this, arg);
    if (!view) {
      this.show(null, h("p", { class: "empty" }, "That page isn't here, or you can't see it."));
      return;
    }
    this.route = key;
    this.show(view, view.root);
    view.open();
    this.renderChannels();
    this.renderInboxLink();
  }

  show(view, element) {
    setMenu(false);
    this.view?.close();
    this.view = view;
    if (!view) this.route = null;
    $("view").replaceChildren(element);
  }

  /** The sidebar's inbox link: current when an inbox view is open, with the count of open items. */
  renderInboxLink() {
    const link = $("inbox-link");
    if (this.route?.startsWith("inbox/")) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
    const standing = $("standing-link");
    if (this.route === "standing/") standing.setAttribute("aria-current", "page");
    else standing.removeAttribute("aria-current");
    const open = this.model.inboxOpen.size;
    const count = $("inbox-count");
    count.hidden = open === 0;
    // The number is seen; " open" is read with it, so the link reads "Inbox 3 open".
    count.replaceChildren(String(open), h("span", { class: "visually-hidden" }, " open"));
  }

  renderChannels() {
    const current = this.route;
    const item = (c) =>
      h(
        "li",
        {},
        h(
          "a",
          {
            href: `#/channel/${encodeURIComponent(c.channelId)}`,
            "aria-current": current === `channel/${c.channelId}` ? "page" : null,
            "data-channel-id": c.channelId,
          },
          c.kind === "CHANNEL_KIND_DM" ? this.model.channelTitle(c) : `# ${c.name}`,
        ),
      );
    const all = this.model.sortedChannels();
    const channels = all.filter((c) => c.kind !== "CHANNEL_KIND_DM");
    const dms = all.filter((c) => c.kind === "CHANNEL_KIND_DM");
    $("channel-list").replaceChildren(...channels.map(item));
    $("dm-list").replaceChildren(...(dms.length ? dms.map(item) : [h("li", { class: "empty" }, "None yet")]));
  }
}

// --- the menu (phone widths): the sidebar opens over the dimmed view ------------

const PHONE = matchMedia("(max-width: 700px)");

function setMenu(open) {
  $("app-view").classList.toggle("menu-open", open);
  $("menu-toggle").setAttribute("aria-expanded", String(open));
  // What the drawer covers takes no clicks or focus while it is open.
  $("view").inert = open;
}

$("menu-toggle").addEventListener("click", () => setMenu(!$("app-view").classList.contains("menu-open")));
$("scrim").addEventListener("click", () => setMenu(false));
// Grown wide enough for the sidebar beside the view: no drawer is left open.
PHONE.addEventListener("change", (e) => e.matches || setMenu(false));
// Picking a place in the sidebar closes it, even the place already open.
$("sidebar").addEventListener("click", (e) => {
  if (e.target.closest("a")) setMenu(false);
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && $("app-view").classList.contains("menu-open")) {
    setMenu(false);
    $("menu-toggle").focus();
  }
});

// --- alerts ------------------------------------------------------------------

function showAlert(text) {
  const area = $("alerts");
  const alert = h(
    "div",
    { class: "alert", role: "alert" },
    h("span", {}, text),
    h("button", { type: "button", class: "dismiss", "aria-label": "Dismiss", onclick: () => alert.remove() }, "×"),
  );
  area.append(alert);
  while (area.children.length > MAX_ALERTS) area.firstElementChild.remove();
}

// --- signing in and out ----------------------------------------------------------

let app = null;

// null: signed in by the browser session's cookie (through a sign-in provider).
async function signIn(token) {
  const comms = new Comms(token);
  const [channels, me] = await Promise.all([listAllChannels(comms), whoAmI(comms)]);
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  $("sign-in-view").hidden = true;
  $("app-view").hidden = false;
  $("account").hidden = false;
  $("menu-toggle").hidden = false;
  renderSignedIn($("signed-in"), me);
  app = new App(comms, me);
  app.start(channels);
}

function signOut(reason) {
  if (app && !app.comms.token) endSession();
  app?.stop();
  app = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("app-view").hidden = true;
  $("account").hidden = true;
  $("menu-toggle").hidden = true;
  setMenu(false);
  renderSignedIn($("signed-in"), null);
  $("sign-in-view").hidden = false;
  $("view").replaceChildren();
  $("alerts").replaceChildren();
  const status = $("live-status");
  status.textContent = "";
  delete status.dataset.state;
  setSignInError(reason ?? "");
  showProviders();
}

/** "Sign in with <provider>" first; the token form opens when there is none. */
async function showProviders() {
  const providers = await signInProviders();
  const back = encodeURIComponent(`/${location.hash}`);
  $("providers").replaceChildren(
    ...providers.map((p) =>
      h("a", { class: "primary", href: `${p.login}?return_to=${back}` }, `Sign in with ${p.label}`),
    ),
  );
  $("providers").hidden = providers.length === 0;
  $("token-sign-in").open = providers.length === 0;
  $("token-submit").classList.toggle("primary", providers.length === 0);
  if (providers.length === 0) $("token").focus();
}

function setSignInError(text) {
  const error = $("sign-in-error");
  error.textContent = text;
  error.hidden = !text;
}

$("sign-in").addEventListener("submit", async (event) => {
  event.preventDefault();
  const token = $("token").value.trim();
  if (!token) {
    setSignInError("Enter your account token.");
    return;
  }
  const button = $("token-submit");
  button.disabled = true;
  setSignInError("");
  try {
    await signIn(token);
    $("token").value = "";
  } catch (err) {
    setSignInError(describe(err, "Sign-in failed"));
  } finally {
    button.disabled = false;
  }
});

$("sign-out").addEventListener("click", () => signOut());

const saved = sessionStorage.getItem(TOKEN_KEY);
if (saved) {
  signIn(saved).catch((err) => signOut(describe(err, "Sign-in failed")));
} else {
  // A browser session from a provider's sign-in, if this browser has one.
  signIn(null).catch((err) => signOut(err.code === "unauthenticated" ? "" : describe(err, "Sign-in failed")));
}
