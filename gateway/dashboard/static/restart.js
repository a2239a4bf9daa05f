// The page a restart answers with: ask the dashboard which run it is, every second, until a
// new run answers (the old one stops, the new one starts: requests fail in between), then
// go back to the page that asked. A lost login lands on the login page.
"use strict";

(function () {
  const waiting = document.getElementById("restarting");
  if (!waiting) {
    return;
  }
  const before = waiting.dataset.run;
  const back = waiting.dataset.back || "/settings";

  function poll() {
    fetch("/restart/alive", { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 401) {
          window.location.assign("/login");
          return null;
        }
        return response.ok ? response.json() : null;
      })
      .then(function (body) {
        if (body && body.run && body.run !== before) {
          waiting.textContent = "Restarted. Going back…";
          window.location.assign(back);
        } else {
          window.setTimeout(poll, 1000);
        }
      })
      .catch(function () { window.setTimeout(poll, 1000); });
  }
  // Loaded: the restart may begin (the server stops serving files once it does).
  window.clawgate.post("/restart/go").finally(function () { window.setTimeout(poll, 500); });
})();
