// An ask as one form: every question, one Submit, one RespondToAsk. And the
// answer snapshot an ask_answer message shows.

import { h } from "./dom.js";
import { describe } from "./rpc.js";
import { isClosed } from "./model.js";

export const WITHDRAWN = "Withdrawn by the asker — no longer taking answers.";

// Picks and typed text are local until Submit: askId → { picks, text, error,
// confirmSkip }; confirmSkip while the person is asked to confirm skipping all.
const drafts = new Map();
// Asks with a RespondToAsk on the wire.
const sending = new Set();

function draftOf(askId) {
  let draft = drafts.get(askId);
  if (!draft) {
    draft = { picks: new Map(), text: new Map(), error: "", confirmSkip: false };
    drafts.set(askId, draft);
  }
  return draft;
}

function chosenOf(ask, question, draft) {
  if (isClosed(ask)) return new Set(question.chosenOptionIds ?? []);
  return draft.picks.get(question.questionId) ?? new Set();
}

/**
 * ctx: { model, comms, refresh(messageId), reportQuiet(text) }. A closed ask
 * (answered or withdrawn) renders read-only and drops any staged input,
 * because showing it would suggest it was recorded.
 *
 * Optional, for asks that live outside channels (the inbox):
 * ctx.closedStatus(ask, message) words a closed ask's status line;
 * ctx.send(ask, message, answers) sends the answers in place of RespondToAsk
 * and resolves to "" when done, or to an error to show with the picks kept.
 */
export function renderAsk(ask, message, ctx) {
  const closed = isClosed(ask);
  if (closed) drafts.delete(ask.askId);
  const draft = closed ? null : draftOf(ask.askId);
  const busy = sending.has(ask.askId);
  const locked = closed || busy;
  const formId = `ask-${ask.askId}`;

  const questions = (ask.questions ?? []).map((question, qi) =>
    renderQuestion(ask, question, qi, { draft, locked, formId, closed }),
  );

  let status = null;
  const custom = closed && ctx.closedStatus ? ctx.closedStatus(ask, message) : "";
  if (custom) {
    status = h("div", { class: ask.answered ? "ask-answered-line" : "ask-withdrawn", role: "status" }, custom);
  } else if (ask.cancelled) {
    status = h("div", { class: "ask-withdrawn", role: "status" }, WITHDRAWN);
  } else if (ask.answered) {
    const answer = ctx.model.answerOf(ask.askId);
    const by = answer ? ` by ${answer.authorHandle || ctx.model.handleOf(answer.authorAccountId)}` : "";
    status = h("div", { class: "ask-answered-line", role: "status" }, `Answered${by}.`);
  } else if (busy) {
    status = h("div", { class: "ask-sending", role: "status" }, "Sending your answers…");
  } else if (draft.error) {
    status = h("div", { class: "ask-error", role: "alert" }, draft.error);
  }

  const form = h(
    "form",
    {
      class: `block-ask${ask.answered ? " answered" : ""}${ask.cancelled ? " cancelled" : ""}`,
      id: formId,
      "data-ask-id": ask.askId,
      "aria-label": `Ask from ${message.authorHandle || "an agent"}`,
      "aria-busy": busy ? "true" : "false",
      novalidate: true,
      onsubmit: (e) => {
        e.preventDefault();
        submit(ask.askId, ctx);
      },
      onchange: (e) => closed || stage(ask, e.target, draft),
      oninput: (e) => closed || stage(ask, e.target, draft),
    },
    questions,
    status,
    closed ? null : draft.confirmSkip && !busy ? renderConfirmSkip(ask.askId, ctx) : renderActions(busy),
  );
  return form;
}

function renderActions(busy) {
  return h(
    "div",
    { class: "ask-actions" },
    h("button", { type: "submit", class: "primary", disabled: busy }, "Submit answers"),
  );
}

// Skipping every question is a real answer, so it is made on purpose: the
// person confirms it or goes back to the form.
function renderConfirmSkip(askId, ctx) {
  return h(
    "div",
    { class: "ask-confirm", role: "group", "aria-label": "Confirm skipping" },
    h("p", {}, "Submit with every question skipped?"),
    h("button", { type: "button", "data-action": "back", onclick: () => goBack(askId, ctx) }, "Go back"),
    h(
      "button",
      { type: "button", class: "primary", onclick: () => submit(askId, ctx, { skipAll: true }) },
      "Skip every question",
    ),
  );
}

function goBack(askId, ctx) {
  const found = ctx.model.ask(askId);
  if (!found) return;
  draftOf(askId).confirmSkip = false;
  ctx.refresh(found.message.messageId);
  document.getElementById(`ask-${askId}`)?.querySelector('button[type="submit"]')?.focus();
}

function renderQuestion(ask, question, qi, { draft, locked, formId, closed }) {
  const name = `${formId}-q${qi}`;
  const chosen = chosenOf(ask, question, draft);
  const multi = Boolean(question.allowMultiple);
  const options = (question.options ?? []).map((option, oi) => {
    const id = `${name}-o${oi}`;
    // An index out of range recommends nothing; once closed, only the answer is highlighted.
    const recommended = question.recommended === oi;
    const highlighted = recommended && !closed;
    const descId = option.description ? `${id}-desc` : null;
    const previewId = option.preview ? `${id}-preview` : null;
    const describedBy = [descId, previewId].filter(Boolean).join(" ") || null;
    return h(
      "div",
      { class: `ask-option${highlighted ? " recommended" : ""}` },
      h("input", {
        type: multi ? "checkbox" : "radio",
        id,
        name,
        value: option.id,
        "data-question-id": question.questionId,
        checked: chosen.has(option.id),
        disabled: locked,
        "aria-describedby": describedBy,
      }),
      h(
        "label",
        { for: id },
        h("span", { class: "option-label" }, option.label || option.id),
        recommended ? h("span", { class: "recommended-tag" }, "Recommended") : null,
      ),
      option.description ? h("p", { class: "option-description", id: descId }, option.description) : null,
      option.preview ? h("pre", { class: "option-preview", id: previewId }, option.preview) : null,
    );
  });
  const otherId = `${name}-other`;
  const text = isClosed(ask) ? (question.customText ?? "") : (draft.text.get(question.questionId) ?? "");
  return h(
    "fieldset",
    { class: "ask-question", "data-question-id": question.questionId },
    h(
      "legend",
      {},
      question.header ? h("span", { class: "chip" }, question.header) : null,
      h("span", { class: "question-text" }, question.question),
      options.length ? h("span", { class: "arity" }, multi ? "Choose any" : "Choose one") : null,
    ),
    options,
    h(
      "div",
      { class: "ask-other" },
      h("label", { for: otherId }, options.length ? "Other" : "Your answer"),
      h("input", {
        type: "text",
        id: otherId,
        "data-question-id": question.questionId,
        "data-other": true,
        value: text,
        disabled: locked,
        autocomplete: "off",
      }),
    ),
  );
}

function stage(ask, input, draft) {
  const questionId = input.dataset.questionId;
  if (!questionId || !draft) return;
  if (input.dataset.other !== undefined) {
    draft.text.set(questionId, input.value);
    return;
  }
  const picks = new Set(input.type === "radio" ? [] : (draft.picks.get(questionId) ?? []));
  if (input.checked) picks.add(input.value);
  else picks.delete(input.value);
  draft.picks.set(questionId, picks);
}

async function submit(askId, ctx, { skipAll = false } = {}) {
  const found = ctx.model.ask(askId);
  if (!found || isClosed(found.ask) || sending.has(askId)) return;
  const { ask, message } = found;
  const draft = draftOf(askId);
  const answers = ask.questions.map((q) => ({
    questionId: q.questionId,
    chosenOptionIds: [...(draft.picks.get(q.questionId) ?? [])],
    customText: draft.text.get(q.questionId) ?? "",
  }));
  const skipped = answers.every((a) => a.chosenOptionIds.length === 0 && !a.customText.trim());
  if (skipped && !skipAll) {
    draft.confirmSkip = true;
    draft.error = "";
    ctx.refresh(message.messageId);
    document.getElementById(`ask-${askId}`)?.querySelector('[data-action="back"]')?.focus();
    return;
  }
  draft.confirmSkip = false;
  draft.error = "";
  sending.add(askId);
  ctx.refresh(message.messageId);
  if (ctx.send) {
    const error = await ctx.send(ask, message, answers);
    sending.delete(askId);
    if (error && !closedNow(ctx, askId)) draftOf(askId).error = error;
    else drafts.delete(askId);
    ctx.refresh(message.messageId);
    return;
  }
  try {
    const response = await ctx.comms.call("RespondToAsk", { askId, answers });
    sending.delete(askId);
    drafts.delete(askId);
    ctx.model.upsertMessage(response.answerMessage);
    ctx.model.upsertMessage(response.askMessage);
  } catch (err) {
    if (err.code === "already_exists" && !closedNow(ctx, askId)) {
      // Closed before its push reached us: read the ask to show its real state.
      try {
        const fresh = await ctx.comms.call("GetMessage", { messageId: message.messageId });
        ctx.model.upsertMessage(fresh.message);
      } catch (readErr) {
        console.warn("re-reading the ask:", readErr.message);
      }
    }
    sending.delete(askId);
    if (closedNow(ctx, askId)) {
      // Withdrawn or answered meanwhile: the status line says so; the refusal is only logged.
      drafts.delete(askId);
      ctx.reportQuiet(`Answer to ${askId} not recorded: ${err.message}`);
    } else {
      draftOf(askId).error = describe(err, "Your answers weren't sent");
    }
  }
  ctx.refresh(message.messageId);
}

function closedNow(ctx, askId) {
  const found = ctx.model.ask(askId);
  return Boolean(found && isClosed(found.ask));
}

/** The ask_answer message: who answered what. */
export function renderAskAnswer(block, message, ctx) {
  const asked = ctx.model.findMessage(block.askMessageId);
  const askedBy = asked ? asked.authorHandle || ctx.model.handleOf(asked.authorAccountId) : null;
  const who = message.authorHandle || ctx.model.handleOf(message.authorAccountId);
  return h(
    "section",
    { class: "block-ask-answer", "data-ask-id": block.askId },
    h("p", { class: "answer-title" }, `${who} answered${askedBy ? ` ${askedBy}'s ask` : " an ask"}:`),
    h(
      "dl",
      {},
      (block.questions ?? []).map((q) => {
        const labels = (q.chosenOptionIds ?? []).map(
          (id) => (q.options ?? []).find((o) => o.id === id)?.label ?? id,
        );
        const parts = [...labels];
        if (q.customText) parts.push(`“${q.customText}”`);
        return [
          h(
            "dt",
            {},
            q.header ? h("span", { class: "chip" }, q.header) : null,
            h("span", { class: "question-text" }, q.question),
          ),
          h("dd", {}, parts.length ? parts.join(", ") : q.timedOut ? "(timed out)" : "(skipped)"),
        ];
      }),
    ),
  );
}
