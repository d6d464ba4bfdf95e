// An ask as one form: every question, one Submit, one RespondToAsk; Decline
// and the owner's Withdraw beside it; under an agent's ask, the option to
// make the answer standing. A quorum ask shows its progress and votes
// (quorum.js). Once ended, ended.js draws its summary.

import { h } from "./dom.js";
import { endingLine, renderEnded, renderHistory } from "./ended.js";
import { isClosed } from "./model.js";
import { renderQuestion } from "./question.js";
import { myVote, renderQuorum } from "./quorum.js";
import { describe } from "./rpc.js";
import { madeNote, newStanding, renderStandingOption, standingTerms } from "./standing.js";

const DROPPED = "Your unsent answers were cleared.";
const REFUSED = "Your answers weren't recorded: the ask had already ended.";
const NOT_DECLINED = "Your decline wasn't recorded: the ask had already ended.";

// Picks and typed text are local until Submit: askId → { picks, text, error,
// confirming, declining, reason }; confirming is "skip" or "withdraw" while
// the person is asked to confirm one.
const drafts = new Map();
// Asks with a RespondToAsk, DeclineAsk or WithdrawAsk on the wire: askId → what it says meanwhile.
const sending = new Map();
// Asks whose staged or sent input an ending made moot: askId → what the ask says about it.
const dropped = new Map();
// Answers this page made standing: askId → what the ask says about it.
const made = new Map();
// GetAskHistory per ask, read again when the ask ends or a vote lands: askId → { state, data }.
const histories = new Map();
const MAX_HISTORIES = 500;

function draftOf(askId) {
  let draft = drafts.get(askId);
  if (!draft) {
    draft = {
      picks: new Map(),
      text: new Map(),
      error: "",
      confirming: "",
      declining: false,
      reason: "",
      standing: newStanding(),
    };
    drafts.set(askId, draft);
  }
  return draft;
}

/** Opens an ask with a choice already picked (a mail's one-click choice); only Submit sends it. */
export function preset(askId, questionId, optionId) {
  draftOf(askId).picks.set(questionId, new Set([optionId]));
}

function staged(draft) {
  return Boolean(
    draft &&
      ([...draft.picks.values()].some((p) => p.size) || [...draft.text.values()].some(Boolean) || draft.reason),
  );
}

/**
 * What the signed-in person may do with a channel ask, from GetAskHistory;
 * read once and again whenever the ask's state changes. Null until read.
 */
function historyOf(ask, message, ctx) {
  const ended = ask.ending?.kind ?? (isClosed(ask) ? "closed" : "open");
  // A follow-up step may add the reader as an answerer: read again after each.
  const state = `${ended}/${(ask.quorumVotes ?? []).length}/${(ask.followUpSteps ?? []).length}`;
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

/**
 * ctx: { model, comms, refresh(messageId), reportQuiet(text) }. An ended ask
 * (answered, withdrawn, declined or expired) is a summary and drops any
 * staged input, because showing it would suggest it was recorded.
 *
 * Optional, for asks that live outside channels (the inbox):
 * ctx.closedStatus(ask, message) words an ended ask's status line;
 * ctx.answersKnown(ask) says whether an answered ask's questions hold its answer;
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
  const history = inChannel ? historyOf(ask, message, ctx) : null;
  if (closed) {
    return renderEnded(ask, message, ctx, {
      status: (ctx.closedStatus && ctx.closedStatus(ask, message)) || endingLine(ask, ctx),
      note: dropped.get(ask.askId) ?? "",
      made: made.get(ask.askId) ?? "",
      history,
      answers: ctx.answersKnown ? ctx.answersKnown(ask) : true,
    });
  }
  const draft = draftOf(ask.askId);
  const busy = sending.has(ask.askId);
  const named = (ask.answererAccountIds ?? []).length > 0;
  // Until the history says otherwise, an ask that names its answerers is
  // theirs alone, and a vote in a quorum is final for its person.
  const mayAnswer = history ? history.callerMayAnswer : !named && !myVote(ask, ctx);
  const readOnly = inChannel && !mayAnswer;
  const locked = busy || readOnly;
  const formId = `ask-${ask.askId}`;

  const questions = (ask.questions ?? []).map((question, qi) =>
    renderQuestion(question, qi, {
      chosen: draft.picks.get(question.questionId) ?? new Set(),
      text: draft.text.get(question.questionId) ?? "",
      locked,
      closed: false,
      formId,
    }),
  );

  let status = null;
  if (busy) status = h("div", { class: "ask-sending", role: "status" }, sending.get(ask.askId));
  else if (draft.error) status = h("div", { class: "ask-error", role: "alert" }, draft.error);
  // Only for an agent's ask (a standing answer answers an agent's later asks), and before a decline or a confirm.
  const standing =
    inChannel && !readOnly && !draft.declining && !draft.confirming && ctx.model.isAgent(message.authorAccountId)
      ? renderStandingOption(ask, message, ctx, draft.standing, busy)
      : null;

  // Only an ending adds to the record of an open ask; its posting is the message itself.
  const record = history && (history.entries ?? []).length > 1 ? renderHistory(history) : null;
  return h(
    "form",
    {
      class: `block-ask${readOnly ? " read-only" : ""}`,
      id: formId,
      "data-ask-id": ask.askId,
      "aria-label": `Ask from ${ctx.model.nameOf(message.authorAccountId, message.authorHandle)}`,
      "aria-busy": busy ? "true" : "false",
      novalidate: true,
      onsubmit: (e) => {
        e.preventDefault();
        submit(ask.askId, ctx);
      },
      onchange: (e) => locked || stage(e.target, draft),
      oninput: (e) => locked || stage(e.target, draft),
    },
    ask.quorum
      ? renderQuorum(ask, ctx)
      : named
        ? h("p", { class: "ask-answerers" }, `Asked of ${(ask.answererHandles ?? []).join(", ")}`)
        : null,
    ask.deadline ? countdown(ask.deadline) : null,
    renderFollowUps(ask, ctx),
    questions,
    made.has(ask.askId) ? h("p", { class: "ask-standing-made" }, made.get(ask.askId)) : null,
    standing,
    status,
    draft.confirming && !busy
      ? renderConfirm(ask, message, ctx, draft.confirming)
      : renderActions(ask, message, ctx, { draft, busy, history, inChannel, readOnly }),
    record,
  );
}

/** The reminders and escalation the ask sent so far, one line each. */
function renderFollowUps(ask, ctx) {
  const steps = ask.followUpSteps ?? [];
  if (!steps.length) return null;
  const known = new Map((ask.answererAccountIds ?? []).map((id, i) => [id, ask.answererHandles?.[i]]));
  const names = (ids) => (ids ?? []).map((id) => ctx.model.nameOf(id, known.get(id))).join(", ");
  return h(
    "ul",
    { class: "ask-follow-ups", "aria-label": "Follow-ups" },
    steps.map((step) => {
      const at = step.at ? new Date(step.at).toLocaleTimeString() : "";
      const line =
        step.kind === "ASK_FOLLOW_UP_STEP_KIND_ESCALATED"
          ? `Escalated to ${names(step.accountIds) || "nobody new"} (urgent)`
          : `Reminded ${names(step.accountIds) || "the channel"}`;
      return h("li", { class: "ask-follow-up" }, at ? `${line} · ${at}` : line);
    }),
  );
}

/** Submit, Decline… (with its optional reason) and the owner's Withdraw, as the history allows. */
function renderActions(ask, message, ctx, { draft, busy, history, inChannel, readOnly }) {
  const withdraw = history?.callerMayWithdraw
    ? h(
        "button",
        { type: "button", class: "ask-withdraw", disabled: busy, onclick: () => confirm(ask, message, ctx, "withdraw") },
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

// Skipping every question is a real answer, and a withdraw can't be taken
// back, so each is made on purpose: the person confirms it or goes back.
const CONFIRM = {
  skip: {
    label: "Confirm skipping",
    question: () => "Submit with every question skipped?",
    back: "Go back",
    go: "Skip every question",
    done: (ask, message, ctx) => submit(ask.askId, ctx, { skipAll: true }),
    // Back to where the person was before asking.
    from: 'button[type="submit"]',
  },
  withdraw: {
    label: "Confirm withdrawing",
    question: (ask, message, ctx) =>
      `Withdraw this ask? ${ctx.model.nameOf(message.authorAccountId, message.authorHandle)} stops waiting for an answer.`,
    back: "Keep it",
    go: "Withdraw",
    done: (ask, message, ctx) => end(ask, message, ctx, "WithdrawAsk", {}),
    from: ".ask-withdraw",
  },
};

function confirm(ask, message, ctx, what) {
  const draft = draftOf(ask.askId);
  draft.confirming = what;
  draft.error = "";
  ctx.refresh(message.messageId);
  document.getElementById(`ask-${ask.askId}`)?.querySelector('[data-action="back"]')?.focus();
}

function renderConfirm(ask, message, ctx, what) {
  const c = CONFIRM[what];
  const back = () => {
    draftOf(ask.askId).confirming = "";
    ctx.refresh(message.messageId);
    document.getElementById(`ask-${ask.askId}`)?.querySelector(c.from)?.focus();
  };
  return h(
    "div",
    { class: "ask-confirm", role: "group", "aria-label": c.label },
    h("p", {}, c.question(ask, message, ctx)),
    h("button", { type: "button", "data-action": "back", onclick: back }, c.back),
    h(
      "button",
      {
        type: "button",
        class: what === "withdraw" ? "danger" : "primary",
        onclick: () => {
          draftOf(ask.askId).confirming = "";
          c.done(ask, message, ctx);
        },
      },
      c.go,
    ),
  );
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
    if (error && closedNow(ctx, ask.askId)) dropped.set(ask.askId, NOT_DECLINED);
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

function stage(input, draft) {
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
    confirm(ask, message, ctx, "skip");
    return;
  }
  draft.confirming = "";
  draft.error = "";
  sending.set(askId, "Sending your answers…");
  ctx.refresh(message.messageId);
  if (ctx.send) {
    const error = await ctx.send(ask, message, answers);
    sending.delete(askId);
    if (error && !closedNow(ctx, askId)) draftOf(askId).error = error;
    else drafts.delete(askId);
    // Ended another way meanwhile: the status line says how, the note that these answers weren't taken.
    if (error && closedNow(ctx, askId)) dropped.set(askId, REFUSED);
    ctx.refresh(message.messageId);
    return;
  }
  try {
    const response = await ctx.comms.call("RespondToAsk", { askId, answers, standing: standingTerms(draft.standing) });
    sending.delete(askId);
    drafts.delete(askId);
    if (response.standingAnswer) made.set(askId, madeNote(response.standingAnswer));
    // A vote that leaves a quorum short posts no answer message.
    if (response.answerMessage) ctx.model.upsertMessage(response.answerMessage);
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
