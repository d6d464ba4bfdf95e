// The service worker: shows a push about an ask while no Compass tab is open
// (or the browser is in the background), opens the ask when clicked, and
// answers it when one of the notification's choices is tapped.
// A push's payload is JSON: { title, body, url, tag, urgent, ask_id,
// question_id, actions: [{ action: option id, title: label }] }; `url` is the
// ask's one-ask link, whose capability a tap answers through.

// The most choices a notification shows as buttons.
const MAX_ACTIONS = 2;

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));

self.addEventListener("push", (event) => {
  let data = {};
  try {
    data = event.data ? event.data.json() : {};
  } catch {
    data = { body: event.data ? event.data.text() : "" };
  }
  const title = typeof data.title === "string" && data.title ? data.title : "Compass";
  const choices = (Array.isArray(data.actions) ? data.actions : [])
    .filter((a) => a && typeof a.action === "string" && typeof a.title === "string")
    .slice(0, MAX_ACTIONS);
  const tappable = choices.length > 0 && typeof data.ask_id === "string" && typeof data.question_id === "string";
  event.waitUntil(
    self.registration.showNotification(title, {
      body: typeof data.body === "string" ? data.body : "",
      tag: typeof data.tag === "string" ? data.tag : undefined,
      icon: "/favicon.svg",
      requireInteraction: data.urgent === true,
      actions: tappable ? choices : [],
      data: {
        url: typeof data.url === "string" ? data.url : "/",
        askId: tappable ? data.ask_id : "",
        questionId: tappable ? data.question_id : "",
        choices: tappable ? choices : [],
      },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  event.waitUntil(event.action ? tapped(event.notification, event.action) : opened(event.notification));
});

/** Only this server's own pages open from a notification, or take its taps. */
function ownUrl(url) {
  const wanted = new URL(url || "/", self.location.origin);
  return wanted.origin === self.location.origin ? wanted.href : null;
}

function opened(notification) {
  return self.clients.openWindow(ownUrl(notification.data?.url) ?? self.location.origin + "/");
}

/**
 * A tap on one of the choices: answered through the ask's link, as its page
 * would (the server takes a tap only for an ask one tap answers), and the
 * notification is replaced by what happened; tapped, that opens the ask.
 */
async function tapped(notification, choice) {
  const data = notification.data ?? {};
  const link = ownUrl(data.url);
  const choices = data.choices ?? [];
  const picked = choices.find((c) => c.action === choice);
  if (!link || !data.askId || !data.questionId || !picked) return opened(notification);
  let said;
  try {
    const response = await fetch(link, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        askId: data.askId,
        action: "answer",
        tap: true,
        answers: [{ questionId: data.questionId, chosenOptionIds: [choice], customText: "" }],
      }),
    });
    let json = {};
    try {
      json = await response.json();
    } catch {
      // A proxy's page, say: the status speaks for it.
    }
    if (response.ok) said = `Answered: ${picked.title}.`;
    else if (json.code === "failed_precondition") said = "Not answered: this ask needs more than one tap. Tap here to open it.";
    else said = `Not answered: ${(json.message || `the server answered ${response.status}`).replace(/\.$/, "")}. Tap here to open the ask.`;
  } catch {
    said = "Not answered: the server can't be reached. Tap here to open the ask.";
  }
  return self.registration.showNotification(notification.title, {
    body: said,
    tag: notification.tag || undefined,
    icon: "/favicon.svg",
    data: { url: data.url, askId: "", questionId: "", choices: [] },
  });
}
