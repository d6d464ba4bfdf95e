// The inbox: items of the agents the signed-in person owns or was granted.
// Each item is a thread whose open ask is answered as one form; the list and
// the open thread are read again whenever an inboxItemChanged event names them.

import { renderAsk } from "./ask.js";
import { formatTime, h, replaceChildren } from "./dom.js";
import { renderAskAnswer } from "./ended.js";
import { undoButton } from "./identity.js";
import { presenceBadge, refreshBadges } from "./presence.js";
import { describe } from "./rpc.js";

export const INBOX = "compass.v1.InboxService";

const LIST_STEP = 100;
const MAX_PAGE = 200;
const OPEN = "INBOX_ITEM_STATUS_OPEN";

const FILTERS = [
  { id: "open", label: "Open", statuses: [OPEN], empty: "Nothing waits on you." },
  { id: "answered", label: "Answered", statuses: ["INBOX_ITEM_STATUS_ANSWERED"], empty: "Nothing answered yet." },
  { id: "closed", label: "Closed", statuses: ["INBOX_ITEM_STATUS_CLOSED"], empty: "Nothing closed." },
  { id: "all", label: "All", statuses: [], empty: "No agent has posted to your inbox yet." },
];

const STATUS = {
  INBOX_ITEM_STATUS_OPEN: "Open",
  INBOX_ITEM_STATUS_ANSWERED: "Answered",
  INBOX_ITEM_STATUS_CLOSED: "Closed",
  INBOX_ITEM_STATUS_NOTE: "Note",
};

const ASK = {
  open: "INBOX_ASK_STATUS_OPEN",
  replaced: "INBOX_ASK_STATUS_REPLACED",
  answered: "INBOX_ASK_STATUS_ANSWERED",
  withdrawn: "INBOX_ASK_STATUS_WITHDRAWN",
  declined: "INBOX_ASK_STATUS_DECLINED",
};

const OUTCOME = {
  taken: "INBOX_ANSWER_OUTCOME_TAKEN",
  repeated: "INBOX_ANSWER_OUTCOME_REPEATED",
  notOpen: "INBOX_ANSWER_OUTCOME_NOT_OPEN",
  refused: "INBOX_ANSWER_OUTCOME_REFUSED",
};

const NOT_RECORDED = "Your answers weren't recorded —";

/** Ids of every item whose ask waits, for the sidebar's count. */
export async function listOpenInboxItems(comms, model) {
  const ids = [];
  let pageToken = "";
  do {
    const page = await comms.call("ListInboxItems", { statuses: [OPEN], pageSize: MAX_PAGE, pageToken }, INBOX);
    for (const item of page.items ?? []) {
      ids.push(item.itemId);
      model.noteHandle(item.agentAccountId, item.agentHandle);
    }
    pageToken = page.nextPageToken ?? "";
  } while (pageToken);
  return ids;
}

// A key per submit attempt. getRandomValues works outside secure contexts, randomUUID does not.
function clientKey() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

function sentence(text) {
  return /[.!?…”"]$/.test(text) ? text : `${text}.`;
}

/** Runs `load` once at a time; calls made meanwhile share one more run after it. */
function coalesced(load) {
  let running = null;
  let again = false;
  const loop = async () => {
    do {
      again = false;
      await load();
    } while (again);
  };
  return () => {
    if (running) {
      again = true;
      return running;
    }
    running = loop().finally(() => (running = null));
    return running;
  };
}

// The words draw a picture of their message by its address
// (/inbox/<item>/files/<attachment>); on the page it reads as its name, and
// the picture itself shows below the words.
function pictureNames(attachments) {
  const names = new Map((attachments ?? []).filter((a) => a.address).map((a) => [a.address, a.name || "picture"]));
  if (!names.size) return (text) => text;
  return (text) => text.replace(/\/inbox\/[\w-]+\/files\/[\w-]+/g, (address) => names.get(address) ?? address);
}

// A picture's bytes come once per attachment id (its bytes never change) as a blob URL.
const pictures = new Map();
const MAX_PICTURES = 64;

function pictureUrl(comms, itemId, attachmentId) {
  let url = pictures.get(attachmentId);
  if (!url) {
    url = comms.call("GetInboxAttachment", { itemId, attachmentId }, INBOX).then((r) => {
      const bytes = Uint8Array.from(atob(r.data ?? ""), (c) => c.charCodeAt(0));
      return URL.createObjectURL(new Blob([bytes], { type: r.attachment?.contentType ?? "" }));
    });
    // A failed read is tried again the next time the picture is drawn.
    url.catch(() => pictures.delete(attachmentId));
    pictures.set(attachmentId, url);
    while (pictures.size > MAX_PICTURES) {
      const [oldest, held] = pictures.entries().next().value;
      pictures.delete(oldest);
      held.then((u) => URL.revokeObjectURL(u), () => {});
    }
  }
  return url;
}

// An answered ask shows the picks its answer made, read from the answer's snapshot.
function withPicks(ask, snapshot) {
  if (!snapshot) return ask;
  const byId = new Map((snapshot.questions ?? []).map((q) => [q.questionId, q]));
  return {
    ...ask,
    questions: (ask.questions ?? []).map((q) => {
      const answered = byId.get(q.questionId);
      return answered ? { ...q, chosenOptionIds: answered.chosenOptionIds ?? [], customText: answered.customText ?? "" } : q;
    }),
  };
}

export class InboxView {
  /** app: { model, comms, alert(text), reportQuiet(text), inboxFilter } */
  constructor(app, itemId) {
    this.app = app;
    this.model = app.model;
    this.comms = app.comms;
    this.itemId = itemId || "";
    this.filter = app.inboxFilter ?? "open";
    this.wanted = LIST_STEP;
    this.items = null; // the list as last read, for this.filter
    this.more = false;
    this.item = null;
    this.thread = []; // InboxMessages, oldest first
    this.total = 0;
    // The thread is read in pages going back: the older pages asked for so
    // far are read again with the first whenever the item is refreshed.
    this.olderPages = 0;
    this.olderToken = "";
    this.pinned = []; // the first page's first and open-ask message, from before its run
    this.run = []; // the pages read, oldest first
    this.pinnedShown = []; // what the pinned ones shown are
    this.onePageMore = false; // "Show older" was asked while the thread was read again
    this.missing = false;
    this.rendered = new Map(); // messageId → { key, el }
    this.notRecorded = new Set(); // askIds an answer from here found not open

    this.filterButtons = FILTERS.map((f) =>
      h("button", { type: "button", class: "filter", "data-filter": f.id, onclick: () => this.setFilter(f.id) }, f.label),
    );
    this.list = h("ul", { class: "inbox-list", "aria-labelledby": "inbox-heading" });
    this.moreButton = h(
      "button",
      { type: "button", class: "older", hidden: true, onclick: () => this.showMore() },
      "Show more",
    );
    const listPane = h(
      "section",
      { class: "inbox-list-pane" },
      h(
        "header",
        { class: "view-header" },
        h("h2", { id: "inbox-heading" }, "Inbox"),
        h("div", { class: "inbox-filters", role: "group", "aria-label": "Show" }, this.filterButtons),
      ),
      h("div", { class: "scroller" }, this.list, this.moreButton),
    );
    this.itemPane = h("section", { class: "inbox-item-pane" });
    // On a phone the view shows the list, or one item: has-item says which.
    this.root = h("div", { class: `inbox-view${this.itemId ? " has-item" : ""}` }, listPane, this.itemPane);
    this.buildItemPane();

    this.ctx = {
      model: {
        ask: (askId) => this.findAsk(askId),
        answerOf: (askId) => this.answerTo(askId),
        findMessage: (messageId) => this.entry(messageId)?.message,
        handleOf: (accountId) => this.handleOf(accountId) ?? "someone",
        nameOf: (accountId, handle) => {
          const own = handle || this.handleOf(accountId);
          return own ? this.model.nameOf(accountId, own) : "someone";
        },
      },
      comms: this.comms,
      refresh: (messageId) => this.refreshMessage(messageId),
      reportQuiet: app.reportQuiet,
      closedStatus: (ask, message) => this.closedStatus(ask, message),
      answersKnown: (ask) => Boolean(this.answerSnapshot(ask.askId)),
      send: (ask, message, answers) => this.send(ask, answers),
      decline: (ask, message, reason) => this.decline(reason),
    };
    this.refreshList = coalesced(() => this.loadList());
    this.refreshItem = coalesced(() => this.loadItem());
    this.unsubscribe = this.model.subscribe((change) => this.onChange(change));
  }

  async open() {
    this.renderFilters();
    this.renderList();
    this.renderItem();
    await this.reload();
  }

  close() {
    this.unsubscribe();
  }

  reload() {
    return Promise.all([this.refreshList(), this.itemId ? this.refreshItem() : null]);
  }

  onChange(change) {
    if (change.kind === "handles" && this.item) this.renderItem();
    if (change.kind === "presence") refreshBadges(this.model, this.header, change.accountId);
    if (change.kind !== "inbox" || !change.live) return;
    this.refreshList();
    if (change.itemId === this.itemId) this.refreshItem();
  }

  // --- the list ---------------------------------------------------------------

  setFilter(id) {
    if (id === this.filter) return;
    this.filter = id;
    this.app.inboxFilter = id;
    this.items = null;
    this.wanted = LIST_STEP;
    this.renderFilters();
    this.renderList();
    this.refreshList();
  }

  showMore() {
    this.wanted += LIST_STEP;
    this.refreshList();
  }

  async loadList() {
    const filter = FILTERS.find((f) => f.id === this.filter);
    const items = [];
    let pageToken = "";
    try {
      do {
        const page = await this.comms.call(
          "ListInboxItems",
          { statuses: filter.statuses, pageSize: Math.min(MAX_PAGE, this.wanted - items.length), pageToken },
          INBOX,
        );
        items.push(...(page.items ?? []));
        pageToken = page.nextPageToken ?? "";
      } while (pageToken && items.length < this.wanted);
    } catch (err) {
      this.app.alert(describe(err, "Couldn't load the inbox"));
      return;
    }
    // The filter changed while this read was out: the next run reads the new one.
    if (filter.id !== this.filter) return;
    for (const item of items) this.model.noteHandle(item.agentAccountId, item.agentHandle);
    this.items = items;
    this.more = Boolean(pageToken);
    this.renderList();
  }

  renderFilters() {
    for (const button of this.filterButtons) {
      button.setAttribute("aria-pressed", String(button.dataset.filter === this.filter));
    }
  }

  renderList() {
    const filter = FILTERS.find((f) => f.id === this.filter);
    this.moreButton.hidden = !this.more;
    if (this.items === null) {
      replaceChildren(this.list, h("li", { class: "empty" }, "Loading…"));
      return;
    }
    if (this.items.length === 0) {
      replaceChildren(this.list, h("li", { class: "empty" }, filter.empty));
      return;
    }
    replaceChildren(
      this.list,
      this.items.map((item) =>
        h(
          "li",
          {},
          h(
            "a",
            {
              class: "inbox-row",
              href: `#/inbox/${encodeURIComponent(item.itemId)}`,
              "data-item-id": item.itemId,
              "aria-current": item.itemId === this.itemId ? "page" : null,
            },
            h("span", { class: "inbox-row-title" }, item.title || item.key),
            h(
              "span",
              { class: "inbox-row-meta" },
              h("span", { class: "inbox-agent" }, item.agentHandle),
              h("span", { class: `inbox-status ${statusClass(item.status)}` }, STATUS[item.status] ?? ""),
              h("time", { datetime: item.updatedAt }, formatTime(item.updatedAt)),
            ),
          ),
        ),
      ),
    );
  }

  // --- one item -----------------------------------------------------------------

  buildItemPane() {
    this.header = h("header", { class: "view-header inbox-item-header" });
    this.cutText = h("span", {});
    this.olderButton = h(
      "button",
      { type: "button", class: "older", onclick: () => this.loadOlder() },
      "Show older messages",
    );
    this.cutNote = h("div", { class: "inbox-cut", hidden: true }, this.cutText, this.olderButton);
    this.threadList = h("ol", { class: "messages", "aria-label": "Thread" });
    this.scroller = h("div", { class: "scroller" }, this.cutNote, this.threadList);
    this.replyInput = h("textarea", {
      id: "inbox-reply-text",
      rows: 2,
      placeholder: "Write a reply (Enter sends, Shift+Enter for a new line)",
      onkeydown: (e) => {
        if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
          e.preventDefault();
          e.target.form.requestSubmit();
        }
      },
    });
    this.replyLabel = h("label", { for: "inbox-reply-text" }, "Reply");
    this.replyForm = h(
      "form",
      { class: "composer", onsubmit: (e) => this.reply(e) },
      this.replyLabel,
      h("div", { class: "composer-row" }, this.replyInput, h("button", { type: "submit", class: "primary" }, "Send")),
    );
    this.closeButton = h(
      "button",
      { type: "button", class: "close-item", onclick: () => this.closeItem() },
      "Close without answering",
    );
  }

  async loadItem() {
    try {
      const shown = this.run;
      const read = await this.readPage("");
      const thread = read.thread ?? [];
      const pinnedCount = read.pinnedMessages ?? 0;
      this.item = read.item;
      this.pinned = thread.slice(0, pinnedCount);
      this.run = thread.slice(pinnedCount);
      this.total = read.totalMessages ?? thread.length;
      this.olderToken = read.nextPageToken ?? "";
      // Read back as far as shown before (a page's bounds move as messages come).
      const reached = () =>
        this.run.length > shown.length || this.run.some((e) => e.message.messageId === shown[0]?.message.messageId);
      while (this.olderPages && this.olderToken && !reached()) {
        const older = await this.readPage(this.olderToken);
        this.run = [...(older.thread ?? []), ...this.run];
        this.olderToken = older.nextPageToken ?? "";
      }
      if (this.onePageMore && this.olderToken) {
        const older = await this.readPage(this.olderToken);
        this.run = [...(older.thread ?? []), ...this.run];
        this.olderToken = older.nextPageToken ?? "";
      }
      this.onePageMore = false;
      this.joinThread();
      this.missing = false;
      // Who answered or closed it may have written nothing here: read their names.
      this.app.resolveHandles?.([this.item.answeredByAccountId, this.item.closedByAccountId]);
    } catch (err) {
      if (err.code === "not_found" || err.code === "invalid_argument") this.missing = true;
      else this.app.alert(describe(err, "Couldn't load the item"));
    }
    this.renderItem();
  }

  readPage(pageToken) {
    return this.comms.call("GetInboxItem", { itemId: this.itemId, pageToken }, INBOX);
  }

  /** The pinned first and open-ask message until a page read brings them in their place, then the pages. */
  joinThread() {
    const read = new Set(this.run.map((e) => e.message.messageId));
    const pinned = this.pinned.filter((e) => !read.has(e.message.messageId));
    this.pinnedShown = pinned.map((e) => (e.askStatus === ASK.open ? "the open ask" : "the first"));
    this.thread = [...pinned, ...this.run];
  }

  async loadOlder() {
    if (!this.olderToken) return;
    this.olderButton.disabled = true;
    const height = this.scroller.scrollHeight;
    try {
      const token = this.olderToken;
      const older = await this.readPage(token);
      this.olderPages += 1;
      if (this.olderToken !== token) {
        // Read again meanwhile, so its pages moved: read them again, one more.
        this.onePageMore = true;
        this.refreshItem();
        return;
      }
      this.run = [...(older.thread ?? []), ...this.run];
      this.olderToken = older.nextPageToken ?? "";
      this.total = older.totalMessages ?? this.total;
      this.joinThread();
    } catch (err) {
      this.app.alert(describe(err, "Couldn't load older messages"));
    } finally {
      this.olderButton.disabled = false;
    }
    this.renderItem();
    // Keep the messages in view where they were; the older ones come above.
    this.scroller.scrollTop += this.scroller.scrollHeight - height;
  }

  renderItem() {
    if (!this.itemId) {
      replaceChildren(this.itemPane, h("p", { class: "empty" }, "Pick an item to read its thread and answer."));
      return;
    }
    if (this.missing) {
      replaceChildren(this.itemPane, h("p", { class: "empty" }, "That item isn't here, or you can't see it."));
      return;
    }
    if (!this.item) {
      replaceChildren(this.itemPane, h("p", { class: "empty" }, "Loading…"));
      return;
    }
    if (!this.itemPane.contains(this.threadList)) {
      replaceChildren(this.itemPane, this.header, this.scroller, this.replyForm);
    }
    const item = this.item;
    const atBottom = this.isAtBottom();
    const first = this.rendered.size === 0;
    replaceChildren(
      this.header,
      h("a", { class: "back-to-inbox", href: "#/inbox" }, "Back to the inbox"),
      h(
        "div",
        { class: "inbox-item-title" },
        h("h2", {}, item.title || item.key),
        h(
          "p",
          { class: "topic" },
          `From ${item.agentHandle} `,
          presenceBadge(this.model, item.agentAccountId),
          " · ",
          h("span", { class: `inbox-status ${statusClass(item.status)}` }, STATUS[item.status] ?? ""),
        ),
      ),
      item.status === OPEN ? this.closeButton : this.undoButton(item),
    );
    this.closeButton.disabled = false;
    this.replyLabel.textContent = `Reply to ${item.agentHandle}`;
    const cut = Boolean(this.olderToken);
    this.cutNote.hidden = !cut;
    this.cutText.textContent = cut
      ? `Showing ${this.thread.length} of ${this.total} messages` +
        `: ${[...this.pinnedShown, "the latest"].join(", ").replace(/, (?=[^,]*$)/, " and ")}.`
      : "";
    this.renderThread();
    if (first || atBottom) this.scrollToBottom();
  }

  /** Draws changed messages only, so a field being typed in keeps its focus. */
  renderThread() {
    const next = new Map();
    const elements = this.thread.map((entry) => {
      const id = entry.message.messageId;
      const key = this.renderKey(entry);
      let held = this.rendered.get(id);
      if (!held || held.key !== key) held = { key, el: this.renderEntry(entry) };
      next.set(id, held);
      return held.el;
    });
    this.rendered = next;
    let cursor = this.threadList.firstChild;
    for (const el of elements) {
      if (el === cursor) cursor = cursor.nextSibling;
      else this.threadList.insertBefore(el, cursor);
    }
    while (cursor) {
      const after = cursor.nextSibling;
      cursor.remove();
      cursor = after;
    }
  }

  renderKey(entry) {
    const ask = askOf(entry.message);
    return JSON.stringify([
      entry,
      ask ? this.closedStatus(ask, entry.message) : "",
      ask ? this.answerTo(ask.askId)?.messageId : "",
    ]);
  }

  refreshMessage(messageId) {
    const held = this.rendered.get(messageId);
    const entry = this.entry(messageId);
    if (!held || !entry) return;
    const el = this.renderEntry(entry);
    held.el.replaceWith(el);
    held.el = el;
    held.key = this.renderKey(entry);
  }

  renderEntry(entry) {
    const message = entry.message;
    const author = message.authorHandle || this.handleOf(message.authorAccountId) || "someone";
    const texts = [];
    const rest = [];
    const named = pictureNames(entry.attachments);
    for (const block of message.blocks ?? []) {
      if (block.text) texts.push(h("p", { class: "block-text" }, named(block.text.text)));
      else if (block.ask) {
        const snapshot = block.ask.answered ? this.answerSnapshot(block.ask.askId) : null;
        rest.push(renderAsk(withPicks(block.ask, snapshot), message, this.ctx));
      } else if (block.askAnswer) rest.push(renderAskAnswer(block.askAnswer, message, this.ctx));
    }
    const figures = (entry.attachments ?? []).map((a) => this.renderPicture(a));
    return h(
      "li",
      { class: "message", "data-message-id": message.messageId },
      h(
        "div",
        { class: "message-meta" },
        h("span", { class: "author" }, author),
        h("time", { datetime: message.createdAt }, formatTime(message.createdAt)),
      ),
      texts,
      figures.length ? h("div", { class: "inbox-pictures" }, figures) : null,
      rest,
    );
  }

  renderPicture(attachment) {
    const name = attachment.name || "picture";
    const img = h("img", { alt: name, title: name, "data-attachment-id": attachment.attachmentId });
    const figure = h("figure", { class: "inbox-picture" }, img);
    const failed = (why) =>
      replaceChildren(figure, h("p", { class: "inbox-picture-failed" }, `Picture “${name}” couldn't be shown${why}`));
    img.addEventListener("error", () => failed("."));
    pictureUrl(this.comms, this.itemId, attachment.attachmentId).then(
      (url) => (img.src = url),
      (err) => failed(`: ${describe(err)}`),
    );
    return figure;
  }

  // --- what ask.js asks about this thread ---------------------------------------

  entry(messageId) {
    return this.thread.find((e) => e.message.messageId === messageId);
  }

  findAsk(askId) {
    for (const entry of this.thread) {
      const ask = askOf(entry.message);
      if (ask?.askId === askId) return { ask, message: entry.message };
    }
    return undefined;
  }

  askStatus(askId) {
    const found = this.findAsk(askId);
    return found ? this.entry(found.message.messageId)?.askStatus : undefined;
  }

  /** The message that answered the ask, when the thread holds it. */
  answerTo(askId) {
    return this.thread.find((e) => (e.message.blocks ?? []).some((b) => b.askAnswer?.askId === askId))?.message;
  }

  answerSnapshot(askId) {
    const message = this.answerTo(askId);
    return message?.blocks.find((b) => b.askAnswer?.askId === askId).askAnswer;
  }

  handleOf(accountId) {
    if (!accountId) return null;
    const author = this.thread.find((e) => e.message.authorAccountId === accountId && e.message.authorHandle);
    return author?.message.authorHandle ?? this.model.handles.get(accountId) ?? null;
  }

  /** The status line of a closed ask: replaced, withdrawn (and why), closed or answered. */
  closedStatus(ask, message) {
    const entry = this.entry(message.messageId);
    const agent = this.item?.agentHandle || message.authorHandle || "the agent";
    const tried = this.notRecorded.has(ask.askId);
    const status = entry?.askStatus;
    if (status === ASK.replaced) {
      return tried
        ? `${NOT_RECORDED} ${agent} replaced this ask with a newer one.`
        : `Replaced by a newer ask from ${agent}.`;
    }
    if (status === ASK.withdrawn) {
      const reason = entry.withdrawnReason;
      if (reason) {
        return tried ? `${NOT_RECORDED} ${agent} withdrew this ask: ${sentence(reason)}` : `Withdrawn by ${agent}: ${sentence(reason)}`;
      }
      // A member's close gives no reason; while it stands the item names the member.
      const closer = this.item?.askId === ask.askId ? this.handleOf(this.item.closedByAccountId) : null;
      const by = closer ? ` by ${closer}` : "";
      return tried ? `${NOT_RECORDED} it was closed without answering${by}.` : `Closed without answering${by}.`;
    }
    if (status === ASK.declined) {
      // ask.js words it from the ask's ending: who declined, and why.
      return tried ? `${NOT_RECORDED} it was declined.` : "";
    }
    if (status === ASK.answered) {
      const answer = this.answerTo(ask.askId);
      const who =
        answer?.authorHandle ||
        (this.item?.askId === ask.askId ? this.handleOf(this.item.answeredByAccountId) : null);
      const by = who ? ` by ${who}` : "";
      return tried ? `${NOT_RECORDED} it was answered already${by}.` : `Answered${by}.`;
    }
    return "";
  }

  // --- acting on the item -------------------------------------------------------

  /** AnswerInboxAsk for ask.js's form: "" when done, or the error to show with the picks kept. */
  async send(ask, answers) {
    let response;
    try {
      response = await this.comms.call(
        "AnswerInboxAsk",
        { itemId: this.itemId, askId: ask.askId, answers, clientKey: clientKey() },
        INBOX,
      );
    } catch (err) {
      return describe(err, "Your answers weren't sent");
    }
    const reason = (response.reason ?? "").replace(/\.$/, "");
    if (response.outcome === OUTCOME.refused) return `Your answers weren't sent: ${reason}.`;
    if (response.outcome === OUTCOME.taken || response.outcome === OUTCOME.repeated) {
      this.applyAnswer(response);
    } else if (response.outcome === OUTCOME.notOpen) {
      this.notRecorded.add(ask.askId);
    }
    await this.refreshItem();
    // Not open, yet the thread as read again still has it open: say what the server said.
    if (response.outcome === OUTCOME.notOpen && this.askStatus(ask.askId) === ASK.open) {
      this.notRecorded.delete(ask.askId);
      return `${NOT_RECORDED} ${reason}.`;
    }
    return "";
  }

  /** DeclineInboxAsk for ask.js's form: "" when done, or the error to show. */
  async decline(reason) {
    try {
      const response = await this.comms.call("DeclineInboxAsk", { itemId: this.itemId, reason }, INBOX);
      this.item = response.item;
    } catch (err) {
      return describe(err, "The ask wasn't declined");
    }
    await this.refreshItem();
    return "";
  }

  // Shown at once, before the thread is read again.
  applyAnswer(response) {
    const answer = response.answer;
    if (response.item) this.item = response.item;
    if (!answer?.message) return;
    const snapshot = (answer.message.blocks ?? []).find((b) => b.askAnswer)?.askAnswer;
    const asked = snapshot && this.entry(snapshot.askMessageId);
    if (asked) {
      asked.askStatus = ASK.answered;
      const block = asked.message.blocks.find((b) => b.ask);
      if (block) block.ask = { ...block.ask, answered: true };
    }
    if (!this.entry(answer.message.messageId)) this.thread.push(answer);
    this.renderItem();
  }

  async reply(event) {
    event.preventDefault();
    const text = this.replyInput.value;
    if (!text.trim()) return;
    const button = this.replyForm.querySelector("button");
    button.disabled = true;
    try {
      const response = await this.comms.call("ReplyInboxItem", { itemId: this.itemId, text }, INBOX);
      this.replyInput.value = "";
      this.item = response.item;
      if (!this.entry(response.message.message.messageId)) this.thread.push(response.message);
      this.renderItem();
      this.scrollToBottom();
    } catch (err) {
      this.app.alert(describe(err, "Your reply wasn't sent"));
    } finally {
      button.disabled = false;
      this.replyInput.focus();
    }
  }

  async closeItem() {
    this.closeButton.disabled = true;
    try {
      const response = await this.comms.call("CloseInboxItem", { itemId: this.itemId }, INBOX);
      this.item = response.item;
      await this.refreshItem();
    } catch (err) {
      this.app.alert(describe(err, "Couldn't close the item"));
      this.closeButton.disabled = false;
    }
  }

  undoButton(item) {
    return undoButton(this.comms, item, this.app.me, {
      done: (response) => {
        this.item = response.item;
        this.renderItem();
        this.refreshItem();
      },
      failed: (err) => this.app.alert(describe(err, "Couldn't undo that")),
    });
  }

  isAtBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 40;
  }

  scrollToBottom() {
    requestAnimationFrame(() => (this.scroller.scrollTop = this.scroller.scrollHeight));
  }
}

function askOf(message) {
  return (message.blocks ?? []).find((b) => b.ask)?.ask;
}

function statusClass(status) {
  return `status-${(STATUS[status] ?? "unknown").toLowerCase()}`;
}
