// What the page knows about the workspace: channels, messages, presence and
// handles, kept current from snapshots and the live event stream.

const PRESENCE = {
  PRESENCE_STATE_OFFLINE: "offline",
  PRESENCE_STATE_IDLE: "idle",
  PRESENCE_STATE_WORKING: "working",
  PRESENCE_STATE_WAITING: "waiting",
};

export function askBlocks(message) {
  return (message.blocks ?? []).filter((b) => b.ask).map((b) => b.ask);
}

/** Ended in any way: answered, withdrawn, declined or expired. */
export function isClosed(ask) {
  return Boolean(ask.answered || ask.cancelled || ask.ending);
}

// An ask only ever moves from open to closed, and a quorum ask's votes only
// grow, so the copy further along is the newer one, whatever order a
// snapshot and an event arrive in.
function progressOf(message) {
  const asks = askBlocks(message);
  return [asks.filter(isClosed).length, asks.reduce((n, a) => n + (a.quorumVotes ?? []).length, 0)];
}

function behind(existing, message) {
  const [closedWas, votesWas] = progressOf(existing);
  const [closed, votes] = progressOf(message);
  return closedWas > closed || (closedWas === closed && votesWas > votes);
}

function byCreated(a, b) {
  return (a.createdAt ?? "").localeCompare(b.createdAt ?? "") || a.messageId.localeCompare(b.messageId);
}

export class Model {
  constructor() {
    this.channels = new Map();
    this.messages = new Map(); // channelId → Map(messageId → message)
    this.olderPage = new Map(); // channelId → next page token of ListMessages
    this.presence = new Map(); // agent accountId → { state, statusText }
    this.handles = new Map(); // accountId → handle
    this.parents = new Map(); // accountId → the agent above it ("" for none), once GetAccounts read it
    this.authors = new Set(); // accounts whose messages the page holds
    this.asks = new Map(); // askId → messageId
    this.answers = new Map(); // askId → the ask_answer message
    this.inboxOpen = new Set(); // ids of inbox items whose ask waits for an answer
    this.listeners = new Set();
  }

  /** listener(change): change.kind is "channels" | "message" | "presence" | "handles" | "inbox". */
  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  emit(change) {
    for (const listener of this.listeners) listener(change);
  }

  // --- channels -----------------------------------------------------------

  setChannels(list) {
    this.channels = new Map(list.map((c) => [c.channelId, c]));
    this.emit({ kind: "channels" });
  }

  upsertChannel(channel) {
    this.channels.set(channel.channelId, channel);
    this.emit({ kind: "channels" });
  }

  sortedChannels() {
    return [...this.channels.values()].sort(
      (a, b) => (a.createdAt ?? "").localeCompare(b.createdAt ?? "") || a.channelId.localeCompare(b.channelId),
    );
  }

  channelTitle(channel) {
    if (channel.kind === "CHANNEL_KIND_DM") {
      const names = (channel.memberAccountIds ?? []).map((id) => this.nameOf(id));
      return names.join(", ");
    }
    return channel.name;
  }

  // --- messages -----------------------------------------------------------

  isLoaded(channelId) {
    return this.messages.has(channelId);
  }

  /** A page of ListMessages (newest first) merged in. */
  addPage(channelId, messages, nextPageToken) {
    if (!this.messages.has(channelId)) this.messages.set(channelId, new Map());
    this.olderPage.set(channelId, nextPageToken || "");
    for (const message of messages) this.upsertMessage(message, { quiet: true });
    this.emit({ kind: "page", channelId });
  }

  upsertMessage(message, { quiet = false } = {}) {
    const channel = this.messages.get(message.channelId);
    this.authors.add(message.authorAccountId);
    if (message.authorHandle && this.handles.get(message.authorAccountId) !== message.authorHandle) {
      this.handles.set(message.authorAccountId, message.authorHandle);
      if (!quiet) this.emit({ kind: "handles" });
    }
    for (const block of message.blocks ?? []) {
      if (block.ask) this.asks.set(block.ask.askId, message.messageId);
      if (block.askAnswer) this.answers.set(block.askAnswer.askId, message);
    }
    // Channels not on screen are read fresh when opened.
    if (!channel) return;
    const existing = channel.get(message.messageId);
    if (existing && behind(existing, message)) return;
    channel.set(message.messageId, message);
    if (!quiet) this.emit({ kind: "message", message, added: !existing });
  }

  messagesOf(channelId) {
    return [...(this.messages.get(channelId)?.values() ?? [])].sort(byCreated);
  }

  findMessage(messageId) {
    for (const channel of this.messages.values()) {
      const found = channel.get(messageId);
      if (found) return found;
    }
    return undefined;
  }

  /** The latest copy of an ask, with the id of the message that holds it. */
  ask(askId) {
    const messageId = this.asks.get(askId);
    const message = messageId && this.findMessage(messageId);
    const ask = message && askBlocks(message).find((a) => a.askId === askId);
    return ask ? { ask, message } : undefined;
  }

  answerOf(askId) {
    return this.answers.get(askId);
  }

  // --- presence and names ---------------------------------------------------

  setPresence(list) {
    this.presence = new Map(list.map((p) => [p.accountId, toPresence(p)]));
    this.emit({ kind: "presence" });
  }

  updatePresence(p) {
    const known = this.presence.has(p.accountId);
    this.presence.set(p.accountId, toPresence(p));
    this.emit({ kind: "presence", accountId: p.accountId, newAgent: !known });
  }

  isAgent(accountId) {
    return this.presence.has(accountId);
  }

  handleOf(accountId) {
    return this.handles.get(accountId) ?? `account ${accountId.slice(0, 8)}`;
  }

  /** How the page names an account: a sub-agent through the agents above it, "scout › planner". */
  nameOf(accountId, handle) {
    const names = [handle || this.handleOf(accountId)];
    const seen = new Set([accountId]);
    for (let up = this.parents.get(accountId); up && !seen.has(up); up = this.parents.get(up)) {
      seen.add(up);
      names.unshift(this.handleOf(up));
    }
    return names.join(" › ");
  }

  /** Accounts the page shows by name (agents, channel members, the agents above them) it hasn't read. */
  unnamed() {
    const shown = new Set([...this.presence.keys(), ...this.authors]);
    for (const channel of this.channels.values()) {
      for (const id of channel.memberAccountIds ?? []) shown.add(id);
    }
    for (const parent of this.parents.values()) if (parent) shown.add(parent);
    return [...shown].filter((id) => !this.parents.has(id));
  }

  /** Accounts as GetAccounts returns them: handles, and the agent above each. */
  setAccounts(accounts) {
    let changed = false;
    for (const account of accounts) {
      if (account.handle && this.handles.get(account.accountId) !== account.handle) {
        this.handles.set(account.accountId, account.handle);
        changed = true;
      }
      const parent = account.parentAccountId ?? "";
      if (this.parents.get(account.accountId) !== parent) {
        this.parents.set(account.accountId, parent);
        changed = true;
      }
    }
    if (changed) this.emit({ kind: "handles" });
  }

  // --- the inbox ------------------------------------------------------------

  setInboxOpen(itemIds) {
    this.inboxOpen = new Set(itemIds);
    this.emit({ kind: "inbox" });
  }

  /** An inboxItemChanged event: the views read the item again, the count follows its status. */
  applyInbox(change) {
    if (change.status === "INBOX_ITEM_STATUS_OPEN") this.inboxOpen.add(change.itemId);
    else this.inboxOpen.delete(change.itemId);
    if (change.message) this.noteHandle(change.message.authorAccountId, change.message.authorHandle);
    this.emit({ kind: "inbox", itemId: change.itemId, live: true });
  }

  /** A handle read elsewhere (an inbox item names its agent). */
  noteHandle(accountId, handle) {
    if (!accountId || !handle || this.handles.get(accountId) === handle) return;
    this.handles.set(accountId, handle);
    this.emit({ kind: "handles" });
  }

  // --- the live stream ------------------------------------------------------

  apply(event) {
    if (event.messagePosted) this.upsertMessage(event.messagePosted.message);
    else if (event.messageUpdated) this.upsertMessage(event.messageUpdated.message);
    else if (event.presenceChanged) this.updatePresence(event.presenceChanged.presence);
    else if (event.channelChanged) this.upsertChannel(event.channelChanged.channel);
    else if (event.inboxItemChanged) this.applyInbox(event.inboxItemChanged);
  }
}

function toPresence(p) {
  return { state: PRESENCE[p.state] ?? "offline", statusText: p.statusText ?? "" };
}
