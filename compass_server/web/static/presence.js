// Agent presence badges: WAITING (an open ask), working, idle, offline.

import { h } from "./dom.js";

const LABEL = { waiting: "WAITING", working: "working", idle: "idle", offline: "offline" };

function describeState(state, statusText) {
  const base = state === "waiting" ? "waiting for an answer" : state;
  return statusText ? `${base} — ${statusText}` : base;
}

/** A badge that follows the agent's presence: every copy is updated by refreshBadges. */
export function presenceBadge(model, accountId) {
  const badge = h("span", { class: "presence-badge", "data-presence-of": accountId });
  paint(badge, model.presence.get(accountId));
  return badge;
}

function paint(badge, presence) {
  const state = presence?.state ?? "offline";
  badge.textContent = LABEL[state];
  badge.className = `presence-badge presence-${state}`;
  badge.dataset.state = state;
  badge.title = describeState(state, presence?.statusText);
  badge.setAttribute("aria-label", `presence: ${describeState(state, presence?.statusText)}`);
}

export function refreshBadges(model, root, accountId) {
  const selector = accountId ? `[data-presence-of="${CSS.escape(accountId)}"]` : "[data-presence-of]";
  for (const badge of root.querySelectorAll(selector)) {
    paint(badge, model.presence.get(badge.dataset.presenceOf));
  }
}

/** The sidebar's agent list, sorted by name: a sub-agent right under the agent above it. */
export function renderAgents(model, list) {
  const agents = [...model.presence.keys()].sort((a, b) => model.nameOf(a).localeCompare(model.nameOf(b)));
  list.replaceChildren(
    ...agents.map((id) => {
      const p = model.presence.get(id);
      return h(
        "li",
        { class: "agent", "data-account-id": id },
        h("span", { class: "agent-name" }, model.nameOf(id)),
        presenceBadge(model, id),
        p.statusText ? h("span", { class: "agent-status" }, p.statusText) : null,
      );
    }),
  );
  if (agents.length === 0) list.replaceChildren(h("li", { class: "empty" }, "No agents yet"));
}
