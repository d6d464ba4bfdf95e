// A tiny element builder: text always goes in as text, never as HTML.

/**
 * h("label", { class: "x", for: "id", onclick: fn }, "text", child, [more])
 * Props starting with "on" add listeners; false/null/undefined props and
 * children are skipped; `true` sets an empty attribute.
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props ?? {})) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "value" || key === "checked") {
      el[key] = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

export function replaceChildren(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

export function formatTime(timestamp) {
  const when = new Date(timestamp);
  if (Number.isNaN(when.getTime())) return "";
  const sameDay = when.toDateString() === new Date().toDateString();
  return sameDay
    ? when.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : when.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}
