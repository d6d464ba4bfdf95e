// One question of an ask: its options and the free-text field, as a fieldset
// (open, or read-only once the ask ended), and an answer in a few words.

import { h } from "./dom.js";

/**
 * chosen: the option ids shown picked; text: the free text shown;
 * locked: nothing can be changed; closed: the ask ended, so only the answer
 * is highlighted and a recommendation is a note.
 */
export function renderQuestion(question, qi, { chosen, text, locked, closed, formId }) {
  const name = `${formId}-q${qi}`;
  const multi = Boolean(question.allowMultiple);
  const options = (question.options ?? []).map((option, oi) => {
    const id = `${name}-o${oi}`;
    // An index out of range recommends nothing.
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
    // A preview needs a row's whole width to be read: such choices go one under another.
    options.length
      ? h("div", { class: `ask-options${(question.options ?? []).some((o) => o.preview) ? " stacked" : ""}` }, options)
      : null,
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

/** A question's answer in words: the picked labels, then the typed text in quotes. */
export function answerWords(question) {
  const labels = (question.chosenOptionIds ?? []).map(
    (id) => (question.options ?? []).find((o) => o.id === id)?.label ?? id,
  );
  const parts = [...labels];
  if (question.customText) parts.push(`“${question.customText}”`);
  if (parts.length) return parts.join(", ");
  return question.timedOut ? "(timed out)" : "(skipped)";
}

/** The question as a summary's row names it: its chip, then its words. */
export function questionTitle(question) {
  return [
    question.header ? h("span", { class: "chip" }, question.header) : null,
    h("span", { class: "question-text" }, question.question),
  ];
}
