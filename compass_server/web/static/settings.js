// The signed-in person's notification settings ("#/settings"): which
// surfaces tell them about an ask (this page, push to this device, mail, a
// Slack direct message where their Slack account is linked) and
// their quiet hours, when only an urgent notification reaches them; and,
// where the workspace has a Slack app, a one-time code that links their
// Slack account (typed in Slack as /compass link CODE).

import { h } from "./dom.js";
import { describe } from "./rpc.js";

const PREFERENCES = "compass.v1.PreferencesService";
const MAIL = [
  ["MAIL_PREFERENCE_NAMED", "Asks that name me"],
  ["MAIL_PREFERENCE_ALL", "Every ask in my channels"],
  ["MAIL_PREFERENCE_OFF", "No mail"],
];

function keyBytes(base64url) {
  const raw = atob(base64url.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}

function base64url(buffer) {
  const text = btoa(String.fromCharCode(...new Uint8Array(buffer)));
  return text.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** The service worker that shows pushes; null where the browser has none. */
export async function registerWorker() {
  if (!("serviceWorker" in navigator)) return null;
  try {
    return await navigator.serviceWorker.register("/sw.js", { scope: "/" });
  } catch {
    return null;
  }
}

/** The person's preferences, with the defaults filled in (null if they can't be read). */
export async function loadPreferences(comms) {
  try {
    return await comms.call("GetNotificationPreferences", {}, PREFERENCES);
  } catch {
    return null;
  }
}

export class SettingsView {
  constructor(app) {
    this.app = app;
    this.publicKey = "";
    this.slackDm = false;
    this.slackApp = false;
    this.status = h("p", { class: "settings-status", role: "status" });
    this.form = h("form", { class: "settings-form", novalidate: true }, h("p", { class: "empty" }, "Loading…"));
    this.form.addEventListener("submit", (e) => {
      e.preventDefault();
      this.save();
    });
    this.root = h(
      "section",
      { class: "settings-view", "aria-labelledby": "settings-title" },
      h("h2", { id: "settings-title" }, "Notifications"),
      this.form,
      this.status,
    );
  }

  async open() {
    await this.reload();
  }

  close() {}

  async reload() {
    try {
      const got = await this.app.comms.call("GetNotificationPreferences", {}, PREFERENCES);
      this.publicKey = got.vapidPublicKey ?? "";
      this.slackDm = !!got.slackDmAvailable;
      this.slackApp = !!got.slackAppConnected;
      this.render(got.preferences ?? {});
    } catch (err) {
      this.form.replaceChildren(h("p", { class: "alert" }, describe(err, "Couldn't load your settings")));
    }
  }

  render(p) {
    const zone = p.timeZone || Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
    const check = (id, label, on) =>
      h("label", { for: id }, h("input", { type: "checkbox", id, name: id, checked: !!on }), ` ${label}`);
    const mail = h(
      "select",
      { id: "settings-email", name: "email" },
      MAIL.map(([value, label]) =>
        h("option", { value, selected: (p.email || "MAIL_PREFERENCE_NAMED") === value }, label),
      ),
    );
    const pushButton = h("button", { type: "button", id: "settings-push-device", class: "quiet" }, "Push to this device");
    pushButton.addEventListener("click", () => this.subscribe(pushButton));
    pushButton.disabled = !this.publicKey || !("PushManager" in window);
    this.form.replaceChildren(
      h(
        "fieldset",
        {},
        h("legend", {}, "Tell me about asks by"),
        check("settings-page", "A notification from an open Compass tab", p.page),
        check("settings-push", "Push, even with no tab open", p.push),
        pushButton,
        h("label", { for: "settings-email" }, "Mail"),
        mail,
        this.slackDm ? check("settings-slack-dm", "A direct message in Slack", p.slackDm) : null,
      ),
      h(
        "fieldset",
        {},
        h("legend", {}, "Quiet hours (only urgent notifications)"),
        h("label", { for: "settings-quiet-start" }, "Quiet from"),
        h("input", { type: "time", id: "settings-quiet-start", value: p.quietStart || "" }),
        h("label", { for: "settings-quiet-end" }, "Quiet until"),
        h("input", { type: "time", id: "settings-quiet-end", value: p.quietEnd || "" }),
        h("label", { for: "settings-zone" }, "Time zone"),
        h("input", { type: "text", id: "settings-zone", value: zone, spellcheck: "false" }),
      ),
      this.slackApp ? this.slackLink() : null,
      h("button", { type: "submit", id: "settings-save" }, "Save"),
    );
  }

  /** A one-time code that links the person's Slack account, typed in Slack. */
  slackLink() {
    const shown = h("p", { id: "settings-slack-code", role: "status" });
    const button = h("button", { type: "button", id: "settings-slack-link", class: "quiet" }, "Link my Slack account");
    button.addEventListener("click", async () => {
      button.disabled = true;
      try {
        const made = await this.app.comms.call("CreateSlackLinkCode", {}, PREFERENCES);
        const until = new Date(made.expiresAt).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
        shown.replaceChildren(
          "In Slack, type ",
          h("code", {}, `/compass link ${made.code}`),
          ` (it works once, until ${until}).`,
        );
      } catch (err) {
        shown.textContent = describe(err, "Couldn't make a code");
      } finally {
        button.disabled = false;
      }
    });
    return h(
      "fieldset",
      {},
      h("legend", {}, "Slack"),
      h("p", {}, this.slackDm ? "Your Slack account is linked." : "Answer asks in Slack as yourself."),
      button,
      shown,
    );
  }

  value(id) {
    return this.form.querySelector(`#${id}`);
  }

  async save() {
    const preferences = {
      page: this.value("settings-page").checked,
      push: this.value("settings-push").checked,
      email: this.value("settings-email").value,
      quietStart: this.value("settings-quiet-start").value,
      quietEnd: this.value("settings-quiet-end").value,
      timeZone: this.value("settings-zone").value.trim(),
      slackDm: this.value("settings-slack-dm")?.checked ?? false,
    };
    try {
      const saved = await this.app.comms.call("SetNotificationPreferences", { preferences }, PREFERENCES);
      this.app.preferences = saved.preferences;
      this.status.textContent = "Saved.";
    } catch (err) {
      this.status.textContent = describe(err, "Couldn't save");
    }
  }

  async subscribe(button) {
    button.disabled = true;
    try {
      if ((await Notification.requestPermission()) !== "granted") {
        this.status.textContent = "Notifications are blocked for this site in your browser's settings.";
        return;
      }
      const registration = await registerWorker();
      if (!registration) throw new Error("no service worker");
      await navigator.serviceWorker.ready;
      const subscription = await registration.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey: keyBytes(this.publicKey),
      });
      await this.app.comms.call(
        "AddPushSubscription",
        {
          endpoint: subscription.endpoint,
          p256dh: base64url(subscription.getKey("p256dh")),
          auth: base64url(subscription.getKey("auth")),
        },
        PREFERENCES,
      );
      this.status.textContent = "This device gets pushes.";
    } catch (err) {
      this.status.textContent = describe(err, "Couldn't turn on push for this device");
    } finally {
      button.disabled = false;
    }
  }
}
