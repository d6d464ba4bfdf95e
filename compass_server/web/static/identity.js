// Who is signed in (IdentityService.WhoAmI), and what that lets them undo on
// an inbox item: the person who answered may take the answer back, the
// person who closed it without answering may reopen it.

import { h } from "./dom.js";

const IDENTITY = "compass.v1.IdentityService";
const INBOX = "compass.v1.InboxService";

/** { accountId, handle, admin } for an account token; null for a runner's. */
export async function whoAmI(comms) {
  const me = await comms.call("WhoAmI", {}, IDENTITY);
  if (!me.account) return null;
  return {
    accountId: me.account.accountId,
    handle: me.account.handle,
    admin: me.account.role === "WORKSPACE_ROLE_ADMIN",
  };
}

/** The topbar's "Signed in as …"; a phone shows only the name. */
export function renderSignedIn(el, me) {
  el.replaceChildren(
    ...(me ? [h("span", { class: "signed-in-label" }, "Signed in as "), me.handle, me.admin ? " (admin)" : ""] : []),
  );
  el.title = me ? el.textContent : "";
}

/**
 * The undo the signed-in person may make on this item, as a button, or null.
 * done(response) gets the RPC's response; failed(err) its error.
 */
export function undoButton(comms, item, me, { done, failed }) {
  if (!me) return null;
  let method;
  let label;
  if (item.status === "INBOX_ITEM_STATUS_ANSWERED" && item.answeredByAccountId === me.accountId) {
    [method, label] = ["TakeBackInboxAnswer", "Take back my answer"];
  } else if (item.status === "INBOX_ITEM_STATUS_CLOSED" && item.closedByAccountId === me.accountId) {
    [method, label] = ["ReopenInboxItem", "Reopen"];
  } else {
    return null;
  }
  const button = h("button", { type: "button", class: "undo-item" }, label);
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      done(await comms.call(method, { itemId: item.itemId }, INBOX));
    } catch (err) {
      button.disabled = false;
      failed(err);
    }
  });
  return button;
}
