// The prompt editor's placeholder buttons: each inserts its {name} at the cursor of the text
// field (or replaces the selection) and gives the focus back to it. The page works without
// this file: the names are there to type.
"use strict";

(function () {
  function insert(button) {
    var field = document.getElementById(button.dataset.target);
    var token = button.dataset.insertPlaceholder;
    if (!field || !token) return;
    var start = field.selectionStart, end = field.selectionEnd;
    if (typeof start !== "number") { start = end = field.value.length; }
    field.focus();
    field.setRangeText(token, start, end, "end");
    field.dispatchEvent(new Event("input", { bubbles: true }));
  }

  function setUp(root) {
    root.querySelectorAll("[data-js-only]").forEach(function (el) { el.hidden = false; });
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-insert-placeholder]");
    if (button) {
      event.preventDefault();
      insert(button);
    }
  });
  document.addEventListener("DOMContentLoaded", function () { setUp(document); });
  document.addEventListener("htmx:afterSwap", function (event) { setUp(event.target); });
})();
