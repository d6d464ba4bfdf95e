// The service worker: shows a push about an ask while no Compass tab is open
// (or the browser is in the background), and opens the ask when clicked.
// A push's payload is JSON: { title, body, url, tag, urgent }.

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
  event.waitUntil(
    self.registration.showNotification(title, {
      body: typeof data.body === "string" ? data.body : "",
      tag: typeof data.tag === "string" ? data.tag : undefined,
      icon: "/favicon.svg",
      requireInteraction: data.urgent === true,
      data: { url: typeof data.url === "string" ? data.url : "/" },
    }),
  );
});

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const wanted = new URL(event.notification.data?.url || "/", self.location.origin);
  // Only this server's own pages open from a notification.
  const url = wanted.origin === self.location.origin ? wanted.href : self.location.origin + "/";
  event.waitUntil(self.clients.openWindow(url));
});
