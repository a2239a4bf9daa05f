// clawgate dashboard: progressive enhancement only; every page works without this file.
// Loaded as a file (the Content-Security-Policy allows no inline script).
"use strict";

(function () {
  document.documentElement.classList.add("js");
  const meta = document.querySelector('meta[name="csrf-token"]');
  const csrf = meta ? meta.content : "";

  // fetch() with the session's CSRF token, for page scripts that post without a form.
  window.clawgate = {
    csrf: csrf,
    post: function (url, body) {
      return fetch(url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "X-CSRF-Token": csrf, "Content-Type": "application/json" },
        body: JSON.stringify(body || {}),
      });
    },
  };

  // <form data-confirm="Restore this version?">: ask before a destructive submit.
  document.addEventListener("submit", function (event) {
    const form = event.target;
    const question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
    }
  });

  // <select data-autosubmit>: submit its form on change (a date picker, a filter).
  document.addEventListener("change", function (event) {
    const field = event.target;
    if (field.hasAttribute && field.hasAttribute("data-autosubmit") && field.form) {
      field.form.submit();
    }
  });

  // A box that scrolls (a wide table on a phone, the log) takes keyboard focus, so it can
  // be scrolled without a pointer; checked again when the window's size changes.
  function focusableScrollers() {
    document.querySelectorAll(".table-wrap, .diff, pre, [data-scrolls]").forEach(function (box) {
      const scrolls = box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight;
      if (scrolls && !box.hasAttribute("tabindex")) {
        box.setAttribute("tabindex", "0");
      }
    });
  }
  document.addEventListener("DOMContentLoaded", focusableScrollers);
  window.addEventListener("resize", focusableScrollers);

  // Warn before leaving a form whose text was edited but not saved.
  let dirty = null;
  document.addEventListener("input", function (event) {
    if (event.target.closest && event.target.closest("form[data-guard]")) {
      dirty = event.target.closest("form");
    }
  });
  document.addEventListener("submit", function () { dirty = null; });
  window.addEventListener("beforeunload", function (event) {
    if (dirty) {
      event.preventDefault();
      event.returnValue = "";
    }
  });
})();
