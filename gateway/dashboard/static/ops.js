// clawgate dashboard, people and health pages: keep the channel table and the log tail live
// by polling small JSON endpoints. Without this file both pages still show a snapshot.
"use strict";

(function () {
  const CHANNELS_EVERY_MS = 3000;
  const LOG_EVERY_MS = 2000;
  const LOG_KEEP_LINES = 1000;

  function getJson(url) {
    return fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error(response.status + " " + response.statusText); }
        return response.json();
      });
  }

  function every(ms, work) {
    let running = false;
    function tick() {
      if (running || document.hidden) { return; }
      running = true;
      work().catch(function () { /* the next tick tries again */ })
        .finally(function () { running = false; });
    }
    tick();
    window.setInterval(tick, ms);
  }

  function cell(text, className, label) {
    const td = document.createElement("td");
    if (className) { td.className = className; }
    if (label) { td.setAttribute("data-label", label); }
    td.textContent = text;
    return td;
  }

  function when(seconds) {
    if (!seconds) { return ""; }
    return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ");
  }

  const channels = document.querySelector("table[data-poll]#channels");
  if (channels) {
    const body = channels.tBodies[0];
    every(CHANNELS_EVERY_MS, function () {
      return getJson(channels.getAttribute("data-poll")).then(function (data) {
        const names = Object.keys(data.channels).sort();
        if (!names.length) { return; }
        const rows = names.map(function (name) {
          const info = data.channels[name];
          const tr = document.createElement("tr");
          tr.setAttribute("data-channel", name);
          tr.appendChild(cell(name));
          const state = cell("", "", "state");
          const badge = document.createElement("span");
          badge.className = "badge state-" + info.state;
          badge.textContent = info.state;
          state.appendChild(badge);
          tr.appendChild(state);
          tr.appendChild(cell(String(info.restarts), "num", "reconnects"));
          tr.appendChild(cell(when(info.since), "", "since"));
          tr.appendChild(cell(info.last_error || "", "", "last error"));
          return tr;
        });
        body.replaceChildren.apply(body, rows);
      });
    });
  }

  const log = document.querySelector("pre[data-poll]#log");
  if (log) {
    let offset = null;
    every(LOG_EVERY_MS, function () {
      const url = log.getAttribute("data-poll") + (offset === null ? "" : "?offset=" + offset);
      return getJson(url).then(function (data) {
        const stuck = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
        if (offset !== null && data.offset < offset) { log.textContent = ""; }  // rotated
        offset = data.offset;
        if (!data.lines.length) { return; }
        log.appendChild(document.createTextNode(data.lines.join("\n") + "\n"));
        const all = log.textContent.split("\n");
        if (all.length > LOG_KEEP_LINES) { log.textContent = all.slice(-LOG_KEEP_LINES).join("\n"); }
        if (stuck) { log.scrollTop = log.scrollHeight; }
      });
    });
  }
})();
