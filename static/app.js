// Crew Planner: small enhancements on top of htmx. Every page works without this file.
(function () {
  "use strict";

  // htmx loaded (its deferred script runs before this one): hide the buttons kept for pages
  // without it (app.css, .without-htmx).
  if (window.htmx) {
    document.documentElement.classList.add("has-htmx");
  }

  // The language applies as soon as it is chosen, so its button goes (base.html keeps it in the
  // page for when this file does not run). Removed, not hidden: .button's display would win over [hidden].
  var languageSubmit = document.getElementById("language-submit");
  if (languageSubmit) {
    languageSubmit.remove();
  }
  document.addEventListener("change", function (evt) {
    if (evt.target && evt.target.id === "language-select" && evt.target.form) {
      evt.target.form.submit();
    }
  });

  // An htmx swap replaces the focused button (say "Move up") with a new copy, and focus
  // falls back to <body>. Put it back on the element with the same id, or, when that one is
  // now disabled (the task reached the top), on the first enabled button of its form.
  var focusedId = null;

  document.addEventListener("htmx:beforeSwap", function () {
    var active = document.activeElement;
    focusedId = active && active !== document.body && active.id ? active.id : null;
  });

  document.addEventListener("htmx:afterSettle", function () {
    var id = focusedId;
    focusedId = null;
    // htmx already focused an [autofocus] element in the new content: leave it there.
    if (!id || (document.activeElement && document.activeElement !== document.body)) {
      return;
    }
    var target = document.getElementById(id);
    if (target && target.disabled && target.form) {
      target = Array.prototype.find.call(target.form.elements, function (el) {
        return el.tagName === "BUTTON" && !el.disabled;
      });
    }
    if (target) {
      target.focus();
    }
  });
})();
