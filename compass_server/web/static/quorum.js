// A quorum ask's progress and votes: how many of the people it names must
// answer, each one's answer or decline so far (final for them), and at the
// end every answer it took.

import { h } from "./dom.js";
import { answerWords, questionTitle } from "./question.js";

export const VOTE = { answer: "QUORUM_VOTE_KIND_ANSWER", decline: "QUORUM_VOTE_KIND_DECLINE" };

export function answersOf(ask) {
  return (ask.quorumVotes ?? []).filter((v) => v.kind === VOTE.answer);
}

/** The ask's questions as one person's vote answered them. */
export function voteQuestions(questions, vote) {
  const given = new Map((vote.answers ?? []).map((a) => [a.questionId, a]));
  return (questions ?? []).map((q) => ({
    ...q,
    chosenOptionIds: given.get(q.questionId)?.chosenOptionIds ?? [],
    customText: given.get(q.questionId)?.customText ?? "",
  }));
}

/** Who voted, and whether their standing answer did it for them. */
export function voterName(vote, ctx) {
  const who = vote.handle || ctx.model.handleOf(vote.accountId);
  return vote.standingAnswerId ? `${who}'s standing answer` : who;
}

/** The signed-in person's vote in the ask, if they voted. */
export function myVote(ask, ctx) {
  const me = ctx.me?.accountId;
  return me ? (ask.quorumVotes ?? []).find((v) => v.accountId === me) : undefined;
}

/** "Needs 2 answers of ada, grace, cy: 1 so far; a decline ends it." */
export function progressLine(ask) {
  const rule = ask.declinesCountAgainstQuorum ? "a decline counts against that" : "a decline by any of them ends it";
  const names = (ask.answererHandles ?? []).join(", ");
  return `Needs ${ask.quorum} answers of ${names}: ${answersOf(ask).length} so far; ${rule}.`;
}

/** One vote: who answered what, or who declined and why. */
export function renderVote(questions, vote, ctx) {
  const by = voterName(vote, ctx);
  if (vote.kind === VOTE.decline) {
    return h("li", { "data-kind": "decline" }, `${by} declined${vote.reason ? `: ${vote.reason}` : ""}`);
  }
  return h(
    "li",
    { "data-kind": "answer" },
    h("p", { class: "vote-by" }, `${by} answered`),
    h(
      "dl",
      { class: "ask-answers" },
      voteQuestions(questions, vote).map((q) => [h("dt", {}, questionTitle(q)), h("dd", {}, answerWords(q))]),
    ),
  );
}

/** The votes of a quorum ask, in the order recorded; null when there are none. */
export function renderVotes(ask, ctx, label = "Votes") {
  const votes = ask.quorumVotes ?? [];
  if (!votes.length) return null;
  return h(
    "ul",
    { class: "ask-votes", "aria-label": label },
    votes.map((v) => renderVote(ask.questions, v, ctx)),
  );
}

/** An open quorum ask's progress, its votes, and what became of the reader's own. */
export function renderQuorum(ask, ctx) {
  if (!ask.quorum) return null;
  const mine = myVote(ask, ctx);
  const left = ask.quorum - answersOf(ask).length;
  let yours = null;
  if (mine) {
    const did = mine.kind === VOTE.answer ? "You answered" : "You declined";
    yours = h("p", { class: "ask-your-vote" }, `${did}; it waits for ${left} more answer${left === 1 ? "" : "s"}.`);
  }
  return h(
    "div",
    { class: "ask-quorum" },
    h("p", { class: "ask-quorum-progress" }, progressLine(ask)),
    yours,
    renderVotes(ask, ctx),
  );
}
