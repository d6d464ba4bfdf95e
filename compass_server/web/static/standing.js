// Standing answers: "answer this the same way from now on". The option under
// an agent's ask, sent with the answer; and the person's own list, where each
// can be revoked ("#/standing").

import { formatTime, h } from "./dom.js";
import { answerWords, questionTitle } from "./question.js";
import { describe } from "./rpc.js";

// How long a standing answer may stand, as the page offers it (the server takes 1 minute to its longest).
const DURATIONS = [
  [3600, "1 hour"],
  [86400, "1 day"],
  [7 * 86400, "7 days"],
  [30 * 86400, "30 days"],
];
const DEFAULT_SECONDS = 86400;

export function newStanding() {
  return { on: false, seconds: DEFAULT_SECONDS, subagents: false };
}

/** What RespondToAsk takes, or undefined when the answer is not made standing. */
export function standingTerms(standing) {
  if (!standing?.on) return undefined;
  return { duration: `${standing.seconds}s`, includeSubagents: standing.subagents };
}

/** The option under an agent's ask: off by default, then for how long and for whom. */
export function renderStandingOption(ask, message, ctx, standing, busy) {
  const id = `ask-${ask.askId}-standing`;
  const agent = ctx.model.nameOf(message.authorAccountId, message.authorHandle);
  const redraw = () => ctx.refresh(message.messageId);
  return h(
    "div",
    { class: "ask-standing" },
    h(
      "label",
      { for: id },
      h("input", {
        type: "checkbox",
        id,
        checked: standing.on,
        disabled: busy,
        onchange: (e) => {
          standing.on = e.target.checked;
          redraw();
        },
      }),
      ` Answer ${agent}'s asks like this the same way from now on`,
    ),
    standing.on
      ? [
          h("label", { for: `${id}-for` }, "for"),
          h(
            "select",
            {
              id: `${id}-for`,
              disabled: busy,
              onchange: (e) => (standing.seconds = Number(e.target.value)),
            },
            DURATIONS.map(([seconds, label]) =>
              h("option", { value: seconds, selected: seconds === standing.seconds }, label),
            ),
          ),
          h(
            "label",
            { for: `${id}-tree` },
            h("input", {
              type: "checkbox",
              id: `${id}-tree`,
              checked: standing.subagents,
              disabled: busy,
              onchange: (e) => (standing.subagents = e.target.checked),
            }),
            ` and its sub-agents' asks`,
          ),
        ]
      : null,
  );
}

/** What the page says once an answer became standing. */
export function madeNote(rule) {
  return `Your answer stands until ${formatTime(rule.expiresAt)}: asks like this from ${rule.agentHandle} are answered this way. Revoke it under Standing answers.`;
}

function stateOf(rule) {
  if (rule.revokedAt) return `Revoked ${formatTime(rule.revokedAt)}`;
  if (new Date(rule.expiresAt).getTime() <= Date.now()) return `Expired ${formatTime(rule.expiresAt)}`;
  return `Until ${formatTime(rule.expiresAt)}`;
}

/** "#/standing": the signed-in person's standing answers, each revocable. */
export class StandingView {
  constructor(app) {
    this.app = app;
    this.showEnded = false;
    this.list = h("div", { class: "standing-list" }, h("p", { class: "empty" }, "Loading…"));
    this.root = h(
      "section",
      { class: "standing-view", "aria-labelledby": "standing-title" },
      h("h2", { id: "standing-title" }, "Standing answers"),
      h(
        "p",
        { class: "standing-about" },
        "An answer you made standing answers an agent's later asks with the same questions at once, for you. Revoked or expired, it answers nothing more.",
      ),
      h(
        "label",
        { class: "standing-ended" },
        h("input", {
          type: "checkbox",
          onchange: (e) => {
            this.showEnded = e.target.checked;
            this.reload();
          },
        }),
        " Show revoked and expired ones",
      ),
      this.list,
    );
  }

  async open() {
    await this.reload();
  }

  close() {}

  async reload() {
    try {
      const listed = await this.app.comms.call("ListStandingAnswers", { includeEnded: this.showEnded });
      this.render(listed.standingAnswers ?? []);
    } catch (err) {
      this.list.replaceChildren(h("p", { class: "empty" }, describe(err, "Couldn't read your standing answers")));
    }
  }

  render(rules) {
    if (!rules.length) {
      this.list.replaceChildren(h("p", { class: "empty" }, "You have no standing answers."));
      return;
    }
    this.list.replaceChildren(...rules.map((rule) => this.renderRule(rule)));
  }

  renderRule(rule) {
    const inForce = !rule.revokedAt && new Date(rule.expiresAt).getTime() > Date.now();
    const whose = `${rule.agentHandle}${rule.includeSubagents ? " and its sub-agents" : ""}`;
    const used = Number(rule.asksAnswered ?? 0);
    return h(
      "article",
      { class: `standing-answer${inForce ? "" : " ended"}`, "data-standing-answer-id": rule.standingAnswerId },
      h("h3", {}, `For ${whose}`),
      h(
        "p",
        { class: "standing-state" },
        `${stateOf(rule)} · answered ${used} ask${used === 1 ? "" : "s"}`,
      ),
      h(
        "dl",
        { class: "ask-answers" },
        (rule.questions ?? []).map((q) => [h("dt", {}, questionTitle(q)), h("dd", {}, answerWords(q))]),
      ),
      inForce
        ? h(
            "button",
            {
              type: "button",
              class: "danger",
              onclick: async (e) => {
                e.target.disabled = true;
                try {
                  await this.app.comms.call("RevokeStandingAnswer", { standingAnswerId: rule.standingAnswerId });
                } catch (err) {
                  this.app.alert(describe(err, "The standing answer wasn't revoked"));
                }
                await this.reload();
              },
            },
            "Revoke",
          )
        : null,
    );
  }
}
