// An ended ask as a compact summary: who ended it and how, the answers (or
// what was asked), and, opened, the questions as they stood and the ask's
// record. And the answer message, which points at that summary when the
// page holds it.

import { formatTime, h } from "./dom.js";
import { answerWords, questionTitle, renderQuestion } from "./question.js";
import { answersOf, renderVote, renderVotes, voterName } from "./quorum.js";

export const WITHDRAWN = "Withdrawn by the asker — no longer taking answers.";
export const EXPIRED = "Expired — no answer was given in time";

export const ENDING = {
  answered: "ASK_ENDING_KIND_ANSWERED",
  byAgent: "ASK_ENDING_KIND_WITHDRAWN_BY_AGENT",
  byOwner: "ASK_ENDING_KIND_WITHDRAWN_BY_OWNER",
  declined: "ASK_ENDING_KIND_DECLINED",
  expired: "ASK_ENDING_KIND_EXPIRED",
};

// A line of the record, from who made the change ("" when nobody did).
const RECORD = {
  ASK_HISTORY_KIND_POSTED: (who) => `Posted${who ? ` by ${who}` : ""}`,
  ASK_HISTORY_KIND_ANSWERED: (who) => `Answered${who ? ` by ${who}` : ""}`,
  ASK_HISTORY_KIND_WITHDRAWN_BY_AGENT: (who) => `Withdrawn${who ? ` by ${who}` : ""}`,
  ASK_HISTORY_KIND_WITHDRAWN_BY_OWNER: (who) => (who ? `Withdrawn by ${who} (owner)` : "Withdrawn by the agent's owner"),
  ASK_HISTORY_KIND_DECLINED: (who) => `Declined${who ? ` by ${who}` : ""}`,
  ASK_HISTORY_KIND_EXPIRED: () => "Expired",
  ASK_HISTORY_KIND_QUORUM_ANSWER: (who) => `Answered${who ? ` by ${who}` : ""}, toward the quorum`,
  ASK_HISTORY_KIND_QUORUM_DECLINE: (who) => `Declined${who ? ` by ${who}` : ""}, counted against the quorum`,
};

const SURFACE = {
  ASK_SURFACE_GRPC: "gRPC",
  ASK_SURFACE_CONNECT: "Connect",
  ASK_SURFACE_RELAY: "the relay",
  ASK_SURFACE_WEB: "the web page",
  ASK_SURFACE_INBOX: "the inbox",
  ASK_SURFACE_SERVER: "the server",
  ASK_SURFACE_STANDING_ANSWER: "a standing answer",
};

// Summaries the person opened, kept open across redraws.
const opened = new Set();
const MAX_OPENED = 200;

/** The status line of an ended ask, from its typed ending. */
export function endingLine(ask, ctx) {
  const ending = ask.ending ?? {};
  const who = ending.actorHandle || (ending.actorAccountId ? ctx.model.handleOf(ending.actorAccountId) : "");
  if (ask.cancelled && ending.kind !== ENDING.byOwner) return WITHDRAWN;
  if (ending.kind === ENDING.byOwner) return `Withdrawn by ${who || "the agent's owner"} (owner)`;
  if (ending.kind === ENDING.declined) return `Declined by ${who || "someone"}${ending.reason ? `: ${ending.reason}` : ""}`;
  if (ending.kind === ENDING.expired) return EXPIRED;
  if (ending.standingAnswerId) return `Answered by ${who || "someone"}'s standing answer.`;
  if (ask.quorum) {
    const names = answersOf(ask).map((v) => voterName(v, ctx));
    return `Answered by ${names.join(", ")} (${names.length} of ${ask.quorum}).`;
  }
  const answer = ctx.model.answerOf(ask.askId);
  const by = who || (answer ? answer.authorHandle || ctx.model.handleOf(answer.authorAccountId) : "");
  return `Answered${by ? ` by ${by}` : ""}.`;
}

/**
 * status: the line saying who ended it and how; note: what became of this
 * person's own input, or ""; made: what became standing of their answer, or
 * ""; history: GetAskHistory's answer, or null; answers: whether the ask's
 * questions hold its answer. A quorum ask's answers are its votes.
 */
export function renderEnded(ask, message, ctx, { status, note, made = "", history, answers }) {
  const id = `ask-${ask.askId}`;
  const open = opened.has(ask.askId);
  const questions = ask.questions ?? [];
  const endedAt = ask.ending?.endedAt;
  const named = ask.answererHandles ?? [];
  const toggle = () => {
    if (opened.has(ask.askId)) opened.delete(ask.askId);
    else opened.add(ask.askId);
    while (opened.size > MAX_OPENED) opened.delete(opened.values().next().value);
    ctx.refresh(message.messageId);
    document.getElementById(id)?.querySelector(".ask-toggle")?.focus();
  };
  return h(
    "section",
    {
      class: `block-ask ended ${ask.answered ? "answered" : "cancelled"}`,
      id,
      "data-ask-id": ask.askId,
      "data-ending": ask.ending?.kind ?? null,
      "aria-label": `Ask from ${ctx.model.nameOf(message.authorAccountId, message.authorHandle)}`,
    },
    h(
      "div",
      { class: "ask-ended-head" },
      h("p", { class: "ask-ending-line", role: "status" }, status),
      endedAt ? h("time", { datetime: endedAt }, formatTime(endedAt)) : null,
    ),
    h(
      "button",
      { type: "button", class: "ask-toggle", "aria-expanded": String(open), "aria-controls": `${id}-detail`, onclick: toggle },
      open ? "Hide the questions" : "Show the questions",
    ),
    ask.answered && ask.quorum
      ? renderVotes(ask, ctx, "Answers")
      : ask.answered && answers
        ? h(
            "dl",
            { class: "ask-answers" },
            questions.map((q) => [h("dt", {}, questionTitle(q)), h("dd", {}, answerWords(q))]),
          )
        : [
            h(
              "ul",
              { class: "ask-asked", "aria-label": "What was asked" },
              questions.map((q) => h("li", {}, questionTitle(q))),
            ),
            // The votes a quorum ask had when it ended some other way stay on record.
            renderVotes(ask, ctx, "Votes before it ended"),
          ],
    note ? h("p", { class: "ask-dropped" }, note) : null,
    made ? h("p", { class: "ask-standing-made" }, made) : null,
    h(
      "div",
      { class: "ask-detail", id: `${id}-detail`, hidden: !open },
      open
        ? [
            named.length
              ? h(
                  "p",
                  { class: "ask-answerers" },
                  `Asked of ${named.join(", ")}${ask.quorum ? `, ${ask.quorum} of them to answer` : ""}`,
                )
              : null,
            questions.map((q, qi) =>
              renderQuestion(q, qi, {
                chosen: new Set(q.chosenOptionIds ?? []),
                text: q.customText ?? "",
                locked: true,
                closed: true,
                formId: id,
              }),
            ),
            history ? renderHistory(history) : null,
          ]
        : null,
    ),
  );
}

/** The ask's record, oldest first: who posted it, who ended it, how, through what. */
export function renderHistory(history) {
  const entries = history.entries ?? [];
  if (!entries.length) return null;
  return h(
    "ol",
    { class: "ask-history", "aria-label": "History" },
    entries.map((e) => {
      const what = (RECORD[e.kind] ?? (() => "Changed"))(e.actorHandle ?? "");
      const where = SURFACE[e.surface] ? ` through ${SURFACE[e.surface]}` : "";
      return h(
        "li",
        { "data-kind": e.kind },
        `${what}${where}`,
        e.at ? [" · ", h("time", { datetime: e.at }, formatTime(e.at))] : null,
        e.reason ? `: ${e.reason}` : null,
      );
    }),
  );
}

/**
 * The ask_answer message. When the page holds the ask, its summary shows the
 * answers and this points at it; otherwise the answers are shown here.
 */
export function renderAskAnswer(block, message, ctx) {
  const asked = ctx.model.findMessage(block.askMessageId);
  const askedBy = asked ? ctx.model.nameOf(asked.authorAccountId, asked.authorHandle) : null;
  const who = ctx.model.nameOf(message.authorAccountId, message.authorHandle);
  const votes = block.quorumVotes ?? [];
  const title = votes.length
    ? `${votes.map((v) => voterName(v, ctx)).join(", ")} answered${askedBy ? ` ${askedBy}'s ask` : " an ask"}`
    : `${who} answered${askedBy ? ` ${askedBy}'s ask` : " an ask"}`;
  if (asked) {
    return h(
      "section",
      { class: "block-ask-answer pointer", "data-ask-id": block.askId },
      h(
        "p",
        { class: "answer-title" },
        `${title}.`,
        " ",
        h("button", { type: "button", class: "link", onclick: () => goToAsk(block.askId) }, "Go to the ask"),
      ),
    );
  }
  return h(
    "section",
    { class: "block-ask-answer", "data-ask-id": block.askId },
    h("p", { class: "answer-title" }, `${title}:`),
    votes.length
      ? h(
          "ul",
          { class: "ask-votes", "aria-label": "Answers" },
          votes.map((v) => renderVote(block.questions, v, ctx)),
        )
      : h(
          "dl",
          { class: "ask-answers" },
          (block.questions ?? []).map((q) => [h("dt", {}, questionTitle(q)), h("dd", {}, answerWords(q))]),
        ),
  );
}

function goToAsk(askId) {
  const el = document.querySelector(`.block-ask[data-ask-id="${CSS.escape(askId)}"]`);
  if (!el) return;
  el.scrollIntoView({ block: "center" });
  el.querySelector(".ask-toggle")?.focus({ preventScroll: true });
  el.classList.add("focused");
  setTimeout(() => el.classList.remove("focused"), 2000);
}
