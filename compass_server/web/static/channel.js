// One channel or DM: its messages, oldest at the top, kept live, and a composer.

import { renderAsk } from "./ask.js";
import { formatTime, h, replaceChildren } from "./dom.js";
import { renderAskAnswer } from "./ended.js";
import { isClosed } from "./model.js";
import { presenceBadge } from "./presence.js";
import { describe } from "./rpc.js";

const PAGE_SIZE = 50;
// The header names this many of the channel's agents, then says how many more.
const AGENTS_SHOWN = 6;

export class ChannelView {
  /** app: { model, comms, alert(text), reportQuiet(text) } */
  constructor(app, channelId) {
    this.app = app;
    this.model = app.model;
    this.channelId = channelId;
    this.list = h("ol", { class: "messages", "aria-label": "Messages" });
    this.older = h("button", { type: "button", class: "older", hidden: true, onclick: () => this.loadOlder() }, "Show older messages");
    this.header = h("header", { class: "view-header" });
    this.composer = this.renderComposer();
    // Only the messages scroll; the header and the composer stay put.
    this.scroller = h("div", { class: "scroller" }, this.older, this.list);
    this.root = h(
      "section",
      { class: "channel-view", "data-channel-id": channelId },
      this.header,
      this.scroller,
      this.composer,
    );
    this.ctx = {
      model: this.model,
      comms: app.comms,
      refresh: (messageId) => this.refreshMessage(messageId),
      reportQuiet: app.reportQuiet,
      me: app.me,
    };
    this.unsubscribe = this.model.subscribe((change) => this.onChange(change));
  }

  async open() {
    this.renderHeader();
    if (this.model.isLoaded(this.channelId)) this.renderAll();
    await this.reload();
    this.focusAsk();
  }

  /** Brings the ask a link named into view (its message is added if the page lacks it). */
  focusAsk() {
    const focus = this.app.focus;
    if (!focus || focus.message.channelId !== this.channelId) return;
    this.app.focus = null;
    if (!this.model.findMessage(focus.message.messageId)) {
      this.model.upsertMessage(focus.message, { quiet: true });
      this.renderAll();
    }
    const el = this.elementOf(focus.message.messageId);
    if (!el) return;
    el.classList.add("focused");
    // After any scroll to the newest that the frame still makes; its top (who
    // asks, and why) in view, even when the ask is taller than the pane.
    requestAnimationFrame(() => el.scrollIntoView({ block: "start" }));
  }

  close() {
    this.unsubscribe();
  }

  /** Reads the newest page again; what is already shown is merged, not lost. */
  async reload() {
    try {
      const page = await this.app.comms.call("ListMessages", { channelId: this.channelId, pageSize: PAGE_SIZE });
      this.model.addPage(this.channelId, page.messages ?? [], page.nextPageToken);
    } catch (err) {
      this.app.alert(describe(err, "Couldn't load the messages"));
    }
  }

  async loadOlder() {
    const token = this.model.olderPage.get(this.channelId);
    if (!token) return;
    this.older.disabled = true;
    try {
      const page = await this.app.comms.call("ListMessages", {
        channelId: this.channelId,
        pageSize: PAGE_SIZE,
        pageToken: token,
      });
      this.model.addPage(this.channelId, page.messages ?? [], page.nextPageToken);
    } catch (err) {
      this.app.alert(describe(err, "Couldn't load older messages"));
    } finally {
      this.older.disabled = false;
    }
  }

  onChange(change) {
    if (change.kind === "channels") this.renderHeader();
    else if (change.kind === "page" && change.channelId === this.channelId) this.renderAll();
    else if (change.kind === "message" && change.message.channelId === this.channelId) {
      if (change.added) this.insertMessage(change.message);
      else this.refreshMessage(change.message.messageId);
      // An answer names the ask it answers: its status line names the answerer.
      for (const block of change.message.blocks ?? []) {
        if (block.askAnswer) this.refreshMessage(block.askAnswer.askMessageId);
      }
    } else if (change.kind === "presence") {
      this.renderHeader();
      // Asks drawn before their author was known as an agent gain what an agent's ask offers.
      if (!change.accountId || change.newAgent) this.refreshAsksBy(change.accountId);
    } else if (change.kind === "handles") {
      this.renderHeader();
      this.renameAuthors();
    }
  }

  /** Names read since the messages were drawn (a sub-agent's chain) go in place. */
  renameAuthors() {
    for (const el of this.list.querySelectorAll(".message")) {
      const message = this.model.findMessage(el.dataset.messageId);
      if (!message) continue;
      const name = this.model.nameOf(message.authorAccountId, message.authorHandle);
      const author = el.querySelector(".message-meta .author");
      if (author) author.textContent = name;
      // In place: a form being filled in keeps its picks and focus.
      for (const form of el.querySelectorAll("form.block-ask")) form.setAttribute("aria-label", `Ask from ${name}`);
      // An answer names whose ask it was; it holds nothing to keep, so it is drawn again.
      if ((message.blocks ?? []).some((b) => b.askAnswer)) this.refreshMessage(message.messageId);
    }
  }

  renderHeader() {
    const channel = this.model.channels.get(this.channelId);
    if (!channel) {
      this.header.replaceChildren(h("h2", {}, "Channel"));
      return;
    }
    const dm = channel.kind === "CHANNEL_KIND_DM";
    const title = dm ? `Direct message · ${this.model.channelTitle(channel)}` : `# ${channel.name}`;
    replaceChildren(
      this.header,
      h("div", { class: "channel-title" }, h("h2", {}, title), channel.topic ? h("p", { class: "topic" }, channel.topic) : null),
      this.renderAgents(channel),
    );
    const label = this.composer.querySelector("label");
    if (label) label.textContent = dm ? "Message" : `Message #${channel.name}`;
  }

  /** The agents in the channel and their presence now: whether one waits on an answer is said here, once. */
  renderAgents(channel) {
    const agents = (channel.memberAccountIds ?? [])
      .filter((id) => this.model.isAgent(id))
      .sort((a, b) => this.model.nameOf(a).localeCompare(this.model.nameOf(b)));
    if (!agents.length) return null;
    const more = agents.length - AGENTS_SHOWN;
    return h(
      "ul",
      { class: "channel-agents", "aria-label": "Agents here" },
      agents.slice(0, AGENTS_SHOWN).map((id) =>
        h("li", { "data-account-id": id }, h("span", { class: "agent-name" }, this.model.nameOf(id)), presenceBadge(this.model, id)),
      ),
      more > 0 ? h("li", { class: "more" }, `and ${more} more`) : null,
    );
  }

  /** Draws every message again: at the newest when the person was there,
   * else with the message at the top of the pane where it was. */
  renderAll() {
    const atBottom = this.isAtBottom();
    const anchor = atBottom ? null : this.topMessage();
    this.list.replaceChildren(...this.model.messagesOf(this.channelId).map((m) => this.renderMessage(m)));
    this.older.hidden = !this.model.olderPage.get(this.channelId);
    if (atBottom) this.scrollToBottom();
    else if (anchor) this.keepAt(anchor);
  }

  /** The first message showing at the top of the pane, and how far below its top it starts. */
  topMessage() {
    const top = this.scroller.getBoundingClientRect().top;
    for (const el of this.list.children) {
      const box = el.getBoundingClientRect();
      if (box.bottom > top) return { messageId: el.dataset.messageId, offset: box.top - top };
    }
    return null;
  }

  keepAt({ messageId, offset }) {
    const el = this.elementOf(messageId);
    if (!el) return;
    const top = this.scroller.getBoundingClientRect().top;
    this.scroller.scrollTop += el.getBoundingClientRect().top - top - offset;
  }

  insertMessage(message) {
    const atBottom = this.isAtBottom();
    const ordered = this.model.messagesOf(this.channelId);
    const index = ordered.findIndex((m) => m.messageId === message.messageId);
    const next = ordered[index + 1] && this.elementOf(ordered[index + 1].messageId);
    this.list.insertBefore(this.renderMessage(message), next ?? null);
    if (atBottom) this.scrollToBottom();
  }

  /** Draws again the messages with an open ask by this author (any author when none is
   * named); not one holding the focus, which drawing it again would take away. */
  refreshAsksBy(authorId) {
    for (const el of this.list.querySelectorAll(".message")) {
      const message = this.model.findMessage(el.dataset.messageId);
      if (!message || (authorId && message.authorAccountId !== authorId)) continue;
      if (el.contains(document.activeElement)) continue;
      if ((message.blocks ?? []).some((b) => b.ask && !isClosed(b.ask))) {
        this.refreshMessage(message.messageId);
      }
    }
  }

  refreshMessage(messageId) {
    const current = this.elementOf(messageId);
    const message = this.model.findMessage(messageId);
    if (!current || !message) return;
    // Drawn again (its history came, an update): the focus goes back to the same control.
    const focused = current.contains(document.activeElement) ? selectorOf(document.activeElement) : null;
    const next = this.renderMessage(message);
    current.replaceWith(next);
    if (focused) next.querySelector(focused)?.focus({ preventScroll: true });
  }

  elementOf(messageId) {
    return this.list.querySelector(`[data-message-id="${CSS.escape(messageId)}"]`);
  }

  renderMessage(message) {
    const author = this.model.nameOf(message.authorAccountId, message.authorHandle);
    const blocks = (message.blocks ?? []).map((block) => {
      if (block.text) return h("p", { class: "block-text" }, block.text.text);
      if (block.ask) return renderAsk(block.ask, message, this.ctx);
      if (block.askAnswer) return renderAskAnswer(block.askAnswer, message, this.ctx);
      return null;
    });
    return h(
      "li",
      { class: "message", "data-message-id": message.messageId },
      h(
        "div",
        { class: "message-meta" },
        h("span", { class: "author" }, author),
        h("time", { datetime: message.createdAt }, formatTime(message.createdAt)),
      ),
      blocks,
    );
  }

  renderComposer() {
    const input = h("textarea", {
      id: "composer-text",
      rows: 2,
      placeholder: "Write a message (Enter sends, Shift+Enter for a new line)",
      onkeydown: (e) => {
        if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
          e.preventDefault();
          e.target.form.requestSubmit();
        }
      },
    });
    return h(
      "form",
      { class: "composer", onsubmit: (e) => this.post(e) },
      h("label", { for: "composer-text" }, "Message"),
      h("div", { class: "composer-row" }, input, h("button", { type: "submit", class: "primary" }, "Send")),
    );
  }

  async post(event) {
    event.preventDefault();
    const form = event.target;
    const input = form.querySelector("textarea");
    const button = form.querySelector("button");
    const text = input.value;
    if (!text.trim()) return;
    button.disabled = true;
    try {
      const response = await this.app.comms.call("PostMessage", {
        channelId: this.channelId,
        blocks: [{ text: { text } }],
      });
      input.value = "";
      this.model.upsertMessage(response.message);
    } catch (err) {
      this.app.alert(describe(err, "Your message wasn't sent"));
    } finally {
      button.disabled = false;
      input.focus();
    }
  }

  isAtBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 40;
  }

  scrollToBottom() {
    const s = this.scroller;
    s.scrollTop = s.scrollHeight;
    // Again once laid out, for what the frame still changes.
    requestAnimationFrame(() => (s.scrollTop = s.scrollHeight));
  }
}

/** A selector finding the same control in a message drawn again: its id, else its kind and classes. */
function selectorOf(el) {
  if (el.id) return `#${CSS.escape(el.id)}`;
  const classes = [...el.classList].map((c) => `.${CSS.escape(c)}`).join("");
  return `${el.tagName.toLowerCase()}${classes}`;
}
