// clawgate chat page: sends through fetch, shows the reply as it streams (Server-Sent
// Events), tool calls as cards, a Stop button and slash-command completion. Without this
// file the page still works: the forms post and the transcript shows on reload.
"use strict";

(function () {
  const root = document.getElementById("chat");
  if (!root || !window.clawgate || !window.EventSource) {
    return;
  }
  const base = "/chat/" + encodeURIComponent(root.dataset.conversation);
  const list = document.getElementById("messages");
  const composer = document.getElementById("composer");
  const stopForm = document.getElementById("stop-form");
  const input = document.getElementById("text");
  const status = document.getElementById("status");
  const commands = document.getElementById("commands");
  const commandButtons = Array.from(commands.querySelectorAll("button.command"));

  // The text bubble the running turn streams into, and the message that turn answers.
  let live = null;
  let liveFor = null;
  // Ids of the messages that were `/new`: their answer means the transcript starts over.
  const fresh = new Set();

  root.classList.add("enhanced");

  function scrollDown() {
    const last = list.lastElementChild;
    if (last) {
      last.scrollIntoView({ block: "end" });
    }
  }

  function append(kind) {
    const empty = document.getElementById("empty");
    if (empty) {
      empty.remove();
    }
    const item = document.createElement("li");
    item.className = kind;
    list.appendChild(item);
    return item;
  }

  function bubble(kind, text) {
    const body = document.createElement("div");
    body.className = "bubble";
    body.textContent = text;
    append(kind).appendChild(body);
    scrollDown();
    return body;
  }

  // A reply's Markdown, rendered and sanitised by the server (gateway/dashboard/markdown.py).
  function showHtml(body, html) {
    body.classList.add("md");
    body.innerHTML = html;
  }

  function labelled(parent, label, className, text) {
    const title = document.createElement("p");
    title.className = "label";
    title.textContent = label;
    const pre = document.createElement("pre");
    pre.className = className;
    pre.textContent = text;
    parent.appendChild(title);
    parent.appendChild(pre);
  }

  function card(id, name, args, result) {
    const item = append("tool");
    item.dataset.call = id;
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.append("Tool ");
    const code = document.createElement("code");
    code.textContent = name;
    summary.appendChild(code);
    details.appendChild(summary);
    labelled(details, "Arguments", "arguments", args);
    labelled(details, "Result", "result", result === null ? "(running…)" : result);
    item.appendChild(details);
    if (result === null) {
      item.classList.add("running");
    }
    scrollDown();
  }

  function finishCard(id, result) {
    const item = list.querySelector('li.tool[data-call="' + CSS.escape(id) + '"]');
    if (item) {
      item.querySelector("pre.result").textContent = result;
      item.classList.remove("running");
    }
  }

  function busy(on) {
    root.classList.toggle("busy", on);
    status.textContent = on ? "Working…" : "";
  }

  function endLive() {
    if (live) {
      live.parentElement.classList.remove("live");
    }
    live = null;
    liveFor = null;
  }

  const handlers = {
    user: function (event) {
      if (/^\/new(@\S+)?(\s|$)/i.test(event.text.trim())) {
        fresh.add(event.id);
      }
      bubble("user", event.text);
      busy(true);
    },
    delta: function (event) {
      if (live && event.restart) {
        live.textContent = "";
      }
      if (!live) {
        live = bubble("assistant live", "");
        liveFor = event.for;
      }
      live.textContent += event.text;
      scrollDown();
    },
    tool_started: function (event) {
      endLive();
      card(event.call_id, event.name, event.arguments, null);
    },
    tool_finished: function (event) {
      finishCard(event.call_id, event.result);
    },
    turn_ended: function () {
      if (live) {
        live.parentElement.classList.remove("live");
      }
    },
    reply: function (event) {
      if (event.choices && event.choices.length) {
        approvalCard(event);
        return;
      }
      const kind = event.is_error ? "assistant error" : "assistant";
      if (fresh.delete(event.reply_to)) {
        list.textContent = "";
      }
      let body;
      if (live && liveFor && liveFor === event.reply_to && !event.is_error) {
        // The stored reply is the authority; the streamed text was its preview.
        live.textContent = event.text;
        body = live;
        endLive();
      } else {
        endLive();
        body = bubble(kind, event.text);
      }
      if (event.html) {
        showHtml(body, event.html);
      }
      scrollDown();
      (event.files || []).forEach(function (name) {
        bubble("assistant file", "File: " + name);
      });
      busy(false);
    },
  };

  // A press on an approval card's button: answered from here, the answer shown in its place.
  function answer(row, choice) {
    row.querySelectorAll("button").forEach(function (b) { b.disabled = true; });
    window.clawgate.post("/approvals/answer", { choice: choice })
      .then(function (response) { return response.json(); })
      .then(function (said) { row.textContent = said.result; });
  }

  // An exec approval card: the command and a button per answer; the turn waits on it.
  function approvalCard(event) {
    const body = bubble("assistant approval", event.text);
    const row = document.createElement("div");
    row.className = "choices";
    event.choices.forEach(function (choice) {
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = choice.label;
      button.addEventListener("click", function () { answer(row, choice.id); });
      row.appendChild(button);
    });
    body.appendChild(row);
    scrollDown();
  }

  // The cards the page was drawn with post forms (to /approvals); answer them here instead.
  list.querySelectorAll("li.approval .choices").forEach(function (row) {
    row.addEventListener("submit", function (event) {
      event.preventDefault();
      answer(row, event.target.elements.choice.value);
    });
  });

  function render(items) {
    list.textContent = "";
    live = null;
    liveFor = null;
    items.forEach(function (item) {
      if (item.kind === "tool") {
        card(item.id, item.name, item.arguments, item.result === null ? "(no result)" : item.result);
        list.lastElementChild.classList.remove("running");
      } else if (item.kind === "approval") {
        approvalCard(item);
      } else {
        const body = bubble(item.kind, item.text);
        if (item.html) {
          showHtml(body, item.html);
        }
      }
    });
  }

  let opened = false;
  const stream = new EventSource(base + "/events");
  stream.onopen = function () {
    root.classList.add("connected");
    const first = !opened;
    opened = true;
    // Events sent before this stream opened are lost: those since the page was drawn (the
    // first open) or while a stream was down. The transcript has what matters. On the first
    // open it is drawn again only when it holds more than the page shows, so what the page
    // drew from the stream meanwhile is not replaced under the reader.
    fetch(base + "/transcript", {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    })
      .then(function (response) { return response.json(); })
      .then(function (body) {
        const shown = list.querySelectorAll(":scope > li:not(#empty)").length;
        if (!first || body.items.length > shown) {
          render(body.items);
        }
      })
      .catch(function () {});
  };
  stream.onerror = function () {
    root.classList.remove("connected");
  };
  stream.onmessage = function (message) {
    const event = JSON.parse(message.data);
    const handler = handlers[event.type];
    if (handler) {
      handler(event);
    }
  };

  function send(text) {
    status.textContent = "Sending…";
    return window.clawgate.post(base + "/send", { text: text }).then(function (response) {
      if (!response.ok) {
        return response.text().then(function (reason) {
          status.textContent = "Not sent: " + reason;
          return false;
        });
      }
      return true;
    }, function () {
      status.textContent = "Not sent: the gateway cannot be reached.";
      return false;
    });
  }

  composer.addEventListener("submit", function (event) {
    event.preventDefault();
    const text = input.value;
    if (!text.trim()) {
      return;
    }
    send(text).then(function (sent) {
      if (sent) {
        input.value = "";
        filterCommands();
      }
    });
  });

  stopForm.addEventListener("submit", function (event) {
    event.preventDefault();
    send("/stop");
  });

  // Enter (or Ctrl/Cmd+Enter) sends, Shift+Enter is a new line; Tab completes a slash
  // command; Escape closes the command menu, else stops the running reply.
  input.addEventListener("keydown", function (event) {
    if (event.key === "Escape") {
      event.preventDefault();
      if (commands.classList.contains("open")) {
        input.value = "";
        filterCommands();
      } else if (root.classList.contains("busy")) {
        send("/stop");
      }
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      composer.requestSubmit();
    } else if (event.key === "Tab") {
      const shown = commandButtons.filter(function (button) { return !button.parentElement.hidden; });
      if (input.value.startsWith("/") && shown.length > 0 && !input.value.includes(" ")) {
        event.preventDefault();
        input.value = shown[0].dataset.command + " ";
        filterCommands();
      }
    }
  });

  function filterCommands() {
    const text = input.value;
    const typing = text.startsWith("/") && !text.includes(" ");
    let shown = 0;
    commandButtons.forEach(function (button) {
      const match = typing && button.dataset.command.startsWith(text.toLowerCase());
      button.parentElement.hidden = !match;
      shown += match ? 1 : 0;
    });
    commands.classList.toggle("open", shown > 0);
  }

  input.addEventListener("input", filterCommands);
  commands.addEventListener("click", function (event) {
    const button = event.target.closest("button.command");
    if (button) {
      input.value = button.dataset.command + " ";
      filterCommands();
      input.focus();
    }
  });
  filterCommands();
  scrollDown();
})();
