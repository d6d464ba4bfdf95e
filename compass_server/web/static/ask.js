// An ask as one form: every question, one Submit, one RespondToAsk. And the
// answer snapshot an ask_answer message shows.

import { formatTime, h } from "./dom.js";
import { describe } from "./rpc.js";
import { isClosed } from "./model.js";

export const WITHDRAWN = "Withdrawn by the asker — no longer taking answers.";
export const EXPIRED = "Expired — no answer was given in time";
const DROPPED = "Your unsent answers were cleared.";
const REFUSED = "Your answers weren't recorded: the ask had already ended.";

const ENDING = {
  answered: "ASK_ENDING_KIND_ANSWERED",
  byAgent: "ASK_ENDING_KIND_WITHDRAWN_BY_AGENT",
  byOwner: "ASK_ENDING_KIND_WITHDRAWN_BY_OWNER",
  declined: "ASK_ENDING_KIND_DECLINED",
  expired: "ASK_ENDING_KIND_EXPIRED",
};

const HISTORY = {
  ASK_HISTORY_KIND_POSTED: "Posted",
  ASK_HISTORY_KIND_ANSWERED: "Answered",
  ASK_HISTORY_KIND_WITHDRAWN_BY_AGENT: "Withdrawn",
  ASK_HISTORY_KIND_WITHDRAWN_BY_OWNER: "Withdrawn by the owner",
  ASK_HISTORY_KIND_DECLINED: "Declined",
  ASK_HISTORY_KIND_EXPIRED: "Expired",
};

const SURFACE = {
  ASK_SURFACE_GRPC: "gRPC",
  ASK_SURFACE_CONNECT: "Connect",
  ASK_SURFACE_RELAY: "the relay",
  ASK_SURFACE_WEB: "the web page",
  ASK_SURFACE_INBOX: "the inbox",
  ASK_SURFACE_SERVER: "the server",
};

// Picks and typed text are local until Submit: askId → { picks, text, error,
// confirmSkip, declining, reason }; confirmSkip while the person is asked to
// confirm skipping all.
const drafts = new Map();
// Asks with a RespondToAsk, DeclineAsk or WithdrawAsk on the wire: askId → what it says meanwhile.
const sending = new Map();
// Asks whose staged or sent input an ending made moot: askId → what the ask says about it.
const dropped = new Map();
// GetAskHistory per ask, read again when the ask ends: askId → { state, data }.
const histories = new Map();
const MAX_HISTORIES = 500;

function draftOf(askId) {
  let draft = drafts.get(askId);
  if (!draft) {
    draft = { picks: new Map(), text: new Map(), error: "", confirmSkip: false, declining: false, reason: "" };
    drafts.set(askId, draft);
  }
  return draft;
}

function staged(draft) {
  return Boolean(
    draft &&
      ([...draft.picks.values()].some((p) => p.size) || [...draft.text.values()].some(Boolean) || draft.reason),
  );
}

/** The status line of an ended ask, from its typed ending. */
function endingLine(ask, ctx) {
  const ending = ask.ending ?? {};
  const who = ending.actorHandle || (ending.actorAccountId ? ctx.model.handleOf(ending.actorAccountId) : "");
  if (ask.cancelled && ending.kind !== ENDING.byOwner) return WITHDRAWN;
  if (ending.kind === ENDING.byOwner) return `Withdrawn by ${who || "the agent's owner"} (owner)`;
  if (ending.kind === ENDING.declined) return `Declined by ${who || "someone"}${ending.reason ? `: ${ending.reason}` : ""}`;
  if (ending.kind === ENDING.expired) return EXPIRED;
  const answer = ctx.model.answerOf(ask.askId);
  const by = who || (answer ? answer.authorHandle || ctx.model.handleOf(answer.authorAccountId) : "");
  return `Answered${by ? ` by ${by}` : ""}.`;
}

/**
 * What the signed-in person may do with a channel ask, from GetAskHistory;
 * read once and again whenever the ask's state changes. Null until read.
 */
function historyOf(ask, message, ctx) {
  const state = ask.ending?.kind ?? (isClosed(ask) ? "closed" : "open");
  let held = histories.get(ask.askId);
  if (!held || held.state !== state) {
    held = { state, data: held?.data ?? null };
    histories.set(ask.askId, held);
    while (histories.size > MAX_HISTORIES) histories.delete(histories.keys().next().value);
    ctx.comms.call("GetAskHistory", { askId: ask.askId }).then(
      (data) => {
        if (histories.get(ask.askId) !== held) return;
        held.data = data;
        ctx.refresh(message.messageId);
      },
      (err) => console.warn("reading the ask's history:", err.message),
    );
  }
  return held.data;
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
 * and resolves to "" when done, or to an error to show with the picks kept;
 * ctx.decline(ask, message, reason) does the same in place of DeclineAsk.
 * A channel's ask reads its history, which says whether the reader may
 * answer, decline or withdraw it.
 */
export function renderAsk(ask, message, ctx) {
  const closed = isClosed(ask);
  // Asks in channels have a history and the actions beside answering; the inbox sends its own way.
  const inChannel = !ctx.send;
  // While this person's own answer, decline or withdraw is on the wire, the
  // ending may be theirs: its reply decides, not the update that lands first.
  if (closed && !sending.has(ask.askId)) {
    if (staged(drafts.get(ask.askId))) {
      dropped.set(ask.askId, DROPPED);
      ctx.reportQuiet(`Unsent answers to ${ask.askId} were cleared: the ask ended.`);
    }
    drafts.delete(ask.askId);
  }
  const draft = closed ? null : draftOf(ask.askId);
  const busy = sending.has(ask.askId);
  const history = inChannel ? historyOf(ask, message, ctx) : null;
  const named = (ask.answererAccountIds ?? []).length > 0;
  // Until the history says otherwise, an ask that names its answerers is theirs alone.
  const mayAnswer = history ? history.callerMayAnswer : !named;
  const readOnly = !closed && inChannel && !mayAnswer;
  const locked = closed || busy || readOnly;
  const formId = `ask-${ask.askId}`;

  const questions = (ask.questions ?? []).map((question, qi) =>
    renderQuestion(ask, question, qi, { draft, locked, formId, closed }),
  );

  let status = null;
  const custom = closed && ctx.closedStatus ? ctx.closedStatus(ask, message) : "";
  if (custom) {
    status = h("div", { class: ask.answered ? "ask-answered-line" : "ask-withdrawn", role: "status" }, custom);
  } else if (closed) {
    status = h("div", { class: ask.answered ? "ask-answered-line" : "ask-withdrawn", role: "status" }, endingLine(ask, ctx));
  } else if (busy) {
    status = h("div", { class: "ask-sending", role: "status" }, sending.get(ask.askId));
  } else if (draft.error) {
    status = h("div", { class: "ask-error", role: "alert" }, draft.error);
  }

  const form = h(
    "form",
    {
      class: `block-ask${ask.answered ? " answered" : ""}${closed && !ask.answered ? " cancelled" : ""}${readOnly ? " read-only" : ""}`,
      id: formId,
      "data-ask-id": ask.askId,
      "data-ending": ask.ending?.kind ?? null,
      "aria-label": `Ask from ${ctx.model.nameOf(message.authorAccountId, message.authorHandle)}`,
      "aria-busy": busy ? "true" : "false",
      novalidate: true,
      onsubmit: (e) => {
        e.preventDefault();
        submit(ask.askId, ctx);
      },
      onchange: (e) => locked || stage(ask, e.target, draft),
      oninput: (e) => locked || stage(ask, e.target, draft),
    },
    named ? h("p", { class: "ask-answerers" }, `Asked of ${(ask.answererHandles ?? []).join(", ")}`) : null,
    !closed && ask.deadline ? countdown(ask.deadline) : null,
    questions,
    status,
    closed && dropped.has(ask.askId) ? h("p", { class: "ask-dropped" }, dropped.get(ask.askId)) : null,
    closed
      ? null
      : draft.confirmSkip && !busy
        ? renderConfirmSkip(ask.askId, ctx)
        : renderActions(ask, message, ctx, { draft, busy, history, inChannel, readOnly }),
    history ? renderHistory(history) : null,
  );
  return form;
}

/** Submit, Decline… (with its optional reason) and the owner's Withdraw, as the history allows. */
function renderActions(ask, message, ctx, { draft, busy, history, inChannel, readOnly }) {
  const withdraw = history?.callerMayWithdraw
    ? h(
        "button",
        { type: "button", class: "ask-withdraw", disabled: busy, onclick: () => end(ask, message, ctx, "WithdrawAsk", {}) },
        "Withdraw ask",
      )
    : null;
  // Someone the ask doesn't name sees it read-only; its agent's owner may still withdraw it.
  if (readOnly) return withdraw ? h("div", { class: "ask-actions" }, withdraw) : null;
  if (draft.declining) {
    const reasonId = `ask-${ask.askId}-reason`;
    return h(
      "div",
      { class: "ask-actions ask-decline" },
      h("label", { for: reasonId }, "Reason (optional)"),
      h("input", {
        type: "text",
        id: reasonId,
        class: "ask-reason",
        value: draft.reason,
        maxlength: 1000,
        autocomplete: "off",
        disabled: busy,
        oninput: (e) => (draft.reason = e.target.value),
        onkeydown: (e) => {
          if (e.key === "Enter") {
            e.preventDefault();
            end(ask, message, ctx, "DeclineAsk", { reason: draft.reason });
          }
        },
      }),
      h(
        "button",
        { type: "button", class: "danger", disabled: busy, onclick: () => end(ask, message, ctx, "DeclineAsk", { reason: draft.reason }) },
        "Decline",
      ),
      h(
        "button",
        {
          type: "button",
          class: "quiet",
          disabled: busy,
          onclick: () => {
            draft.declining = false;
            ctx.refresh(message.messageId);
          },
        },
        "Keep it",
      ),
    );
  }
  return h(
    "div",
    { class: "ask-actions" },
    withdraw,
    (inChannel ? history?.callerMayAnswer : ctx.decline)
      ? h(
          "button",
          {
            type: "button",
            class: "ask-decline-open",
            disabled: busy,
            onclick: () => {
              draft.declining = true;
              ctx.refresh(message.messageId);
              document.getElementById(`ask-${ask.askId}-reason`)?.focus();
            },
          },
          "Decline…",
        )
      : null,
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

/** DeclineAsk or WithdrawAsk: the ask ends; its message comes back. */
async function end(ask, message, ctx, method, extra) {
  if (sending.has(ask.askId)) return;
  const draft = draftOf(ask.askId);
  draft.error = "";
  sending.set(ask.askId, method === "DeclineAsk" ? "Declining…" : "Withdrawing…");
  ctx.refresh(message.messageId);
  if (ctx.decline && method === "DeclineAsk") {
    const error = await ctx.decline(ask, message, extra.reason);
    sending.delete(ask.askId);
    if (error && !closedNow(ctx, ask.askId)) draftOf(ask.askId).error = error;
    else drafts.delete(ask.askId);
    ctx.refresh(message.messageId);
    return;
  }
  try {
    const response = await ctx.comms.call(method, { askId: ask.askId, ...extra });
    sending.delete(ask.askId);
    drafts.delete(ask.askId);
    ctx.model.upsertMessage(response.askMessage);
  } catch (err) {
    sending.delete(ask.askId);
    if (err.code === "already_exists") await reread(ctx, message);
    if (!closedNow(ctx, ask.askId)) {
      draftOf(ask.askId).error = describe(err, method === "DeclineAsk" ? "The ask wasn't declined" : "The ask wasn't withdrawn");
    } else {
      ctx.reportQuiet(`${method} of ${ask.askId} not recorded: ${err.message}`);
    }
  }
  ctx.refresh(message.messageId);
}

async function reread(ctx, message) {
  try {
    const fresh = await ctx.comms.call("GetMessage", { messageId: message.messageId });
    ctx.model.upsertMessage(fresh.message);
  } catch (readErr) {
    console.warn("re-reading the ask:", readErr.message);
  }
}

function renderHistory(history) {
  const entries = history.entries ?? [];
  if (!entries.length) return null;
  return h(
    "ol",
    { class: "ask-history", "aria-label": "History" },
    entries.map((e) => {
      const who = e.actorHandle ? ` by ${e.actorHandle}` : "";
      const where = SURFACE[e.surface] ? ` through ${SURFACE[e.surface]}` : "";
      return h(
        "li",
        { "data-kind": e.kind },
        `${HISTORY[e.kind] ?? "Changed"}${who}${where}`,
        e.at ? [" · ", h("time", { datetime: e.at }, formatTime(e.at))] : null,
        e.reason ? `: ${e.reason}` : null,
      );
    }),
  );
}

// --- the deadline countdown ---------------------------------------------------

function countdown(deadline) {
  const el = h("p", { class: "ask-deadline", "data-deadline": deadline, title: new Date(deadline).toLocaleString() });
  el.textContent = remaining(deadline);
  tick();
  return el;
}

/** "Expires in 4m 05s"; past the deadline, until the server's push lands: "Expiring…". */
function remaining(deadline) {
  const ms = new Date(deadline).getTime() - Date.now();
  if (!(ms > 0)) return "Expiring…";
  const s = Math.ceil(ms / 1000);
  const d = Math.floor(s / 86400);
  const hr = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const two = (n) => String(n).padStart(2, "0");
  if (d) return `Expires in ${d}d ${hr}h`;
  if (hr) return `Expires in ${hr}h ${two(m)}m`;
  if (m) return `Expires in ${m}m ${two(sec)}s`;
  return `Expires in ${sec}s`;
}

// One timer for every countdown on the page; it stops when none is left.
let ticking = null;

function tick() {
  if (ticking) return;
  ticking = setInterval(() => {
    const shown = document.querySelectorAll("[data-deadline]");
    if (!shown.length) {
      clearInterval(ticking);
      ticking = null;
      return;
    }
    for (const el of shown) el.textContent = remaining(el.dataset.deadline);
  }, 1000);
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
  if (drafts.get(askId)?.declining) return;
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
  sending.set(askId, "Sending your answers…");
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
      await reread(ctx, message);
    }
    sending.delete(askId);
    if (closedNow(ctx, askId)) {
      // Ended another way meanwhile: the status line says how, the note that these answers weren't taken.
      drafts.delete(askId);
      dropped.set(askId, REFUSED);
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
  const askedBy = asked ? ctx.model.nameOf(asked.authorAccountId, asked.authorHandle) : null;
  const who = ctx.model.nameOf(message.authorAccountId, message.authorHandle);
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
