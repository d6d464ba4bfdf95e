// Reaching the signed-in person while the tab is in the background: an ask
// for them (in a channel, or an agent's inbox item that opens) counts in the
// tab's title and, once they turned notifications on, shows a browser
// notification that opens the ask when clicked. Permission is asked for only
// when the person clicks "Turn on notifications", never on load.

import { h } from "./dom.js";

const TITLE = "Compass";

export class Notifier {
  /** app: { model, me, open(hash) } */
  constructor(app) {
    this.app = app;
    this.unread = 0;
    this.onVisibility = () => {
      if (document.visibilityState === "visible") this.setUnread(0);
    };
    document.addEventListener("visibilitychange", this.onVisibility);
  }

  stop() {
    document.removeEventListener("visibilitychange", this.onVisibility);
    this.setUnread(0);
  }

  /** The prompt that turns notifications on, or null when there is nothing to ask. */
  renderPrompt(el) {
    const supported = "Notification" in window;
    el.hidden = !supported || Notification.permission !== "default";
    el.replaceChildren();
    if (el.hidden) return;
    const button = h(
      "button",
      {
        type: "button",
        class: "quiet",
        title: "Get a notification when an ask for you arrives while this tab is in the background",
      },
      "Turn on notifications",
    );
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        await Notification.requestPermission();
      } finally {
        this.renderPrompt(el);
      }
    });
    el.append(button);
  }

  /** A live event: counts and notifies an ask for the signed-in person while the tab is hidden. */
  hear(event) {
    if (document.visibilityState !== "hidden") return;
    const found = this.askFor(event);
    if (!found) return;
    this.setUnread(this.unread + 1);
    if (!("Notification" in window) || Notification.permission !== "granted") return;
    // The person turned the page's notifications off (proto3 JSON leaves out false).
    if (this.app.preferences && !this.app.preferences.page) return;
    const note = new Notification(found.title, { body: found.body, tag: found.tag });
    note.onclick = () => {
      window.focus();
      this.app.open(found.hash);
      note.close();
    };
  }

  setUnread(n) {
    this.unread = n;
    document.title = n > 0 ? `(${n}) ${TITLE}` : TITLE;
  }

  /** { title, body, tag, hash } when the event brings an ask this person may answer. */
  askFor(event) {
    const me = this.app.me?.accountId;
    const model = this.app.model;
    const posted = event.messagePosted?.message;
    if (posted && posted.authorAccountId !== me) {
      const ask = (posted.blocks ?? []).map((b) => b.ask).find((a) => a && !a.ending && !a.answered && !a.cancelled);
      const named = ask?.answererAccountIds ?? [];
      if (!ask || (named.length > 0 && !named.includes(me))) return null;
      const channel = model.channels.get(posted.channelId);
      const where = !channel || channel.kind === "CHANNEL_KIND_DM" ? "a direct message" : `#${channel.name}`;
      const who = posted.authorHandle || model.handleOf(posted.authorAccountId);
      return {
        title: `${who} asks in ${where}`,
        body: ask.questions?.[0]?.question ?? "",
        tag: ask.askId,
        hash: `#/ask/${encodeURIComponent(ask.askId)}`,
      };
    }
    const change = event.inboxItemChanged;
    const asked = change?.message?.blocks?.find((b) => b.ask)?.ask;
    if (change?.status === "INBOX_ITEM_STATUS_OPEN" && asked && change.actorAccountId !== me) {
      const who = change.message.authorHandle || model.handleOf(change.agentAccountId);
      return {
        title: `${who} asks in its inbox`,
        body: asked.questions?.[0]?.question ?? "",
        tag: `inbox:${change.itemId}`,
        hash: `#/inbox/${encodeURIComponent(change.itemId)}`,
      };
    }
    return null;
  }
}
