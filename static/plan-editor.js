// Plan editor: in-place editing keys, drag and drop through SortableJS, "Saving…", focus.
// The page works without this file: every control is a plain form or link, and the Move
// up / Move down buttons reorder from the keyboard. The server renders every change.
(function () {
  "use strict";

  document.documentElement.classList.add("plan-js");

  var status = function () { return document.getElementById("plan-save-status"); };
  var pendingFocus = null;  // an id to focus once the next swap settles

  function setStatus(key) {
    var region = status();
    if (region && region.dataset[key]) {
      region.textContent = region.dataset[key];
    }
  }

  // Drag and drop --------------------------------------------------------------------------

  function initSortable(root) {
    if (typeof Sortable === "undefined") {
      return;  // the vendored file did not load: the move buttons still work
    }
    var lists = root.querySelectorAll ? root.querySelectorAll("[data-sortable]") : [];
    if (root.matches && root.matches("[data-sortable]")) {
      lists = [root].concat(Array.prototype.slice.call(lists));
    }
    Array.prototype.forEach.call(lists, function (list) {
      if (list.sortable) {
        return;
      }
      list.sortable = Sortable.create(list, {
        handle: ".step__handle",
        draggable: ".step:not(.step--editing):not(.step--new)",
        animation: 150,
        ghostClass: "step--ghost",
        chosenClass: "step--chosen",
        // Each step carries a hidden "order" input tied to the task's reorder form, so once
        // the cards are in their new order the form sends the ids in that order.
        onEnd: function (event) {
          if (event.oldIndex === event.newIndex) {
            return;
          }
          var form = document.getElementById(list.dataset.reorderForm);
          if (form) {
            form.requestSubmit();
          }
        }
      });
    });
  }

  // Editing in place -----------------------------------------------------------------------

  function focusEnd(textarea) {
    textarea.focus();
    var end = textarea.value.length;
    textarea.setSelectionRange(end, end);
    autosize(textarea);
  }

  function autosize(textarea) {
    textarea.style.height = "auto";
    textarea.style.height = textarea.scrollHeight + 2 + "px";
  }

  function stepIdOf(form) {
    var item = form.closest("li");
    return item ? item.id : "";
  }

  function cancel(form) {
    var newStep = form.closest("[data-new-step]");
    if (newStep) {
      var link = form.querySelector("[data-cancel-new]");
      var opener = link && document.getElementById(link.dataset.cancelNew);
      newStep.remove();
      if (opener) {
        opener.focus();
      }
      return;
    }
    var cancelLink = form.querySelector("[data-cancel]");
    if (cancelLink) {
      pendingFocus = stepIdOf(form) + "-edit";
      cancelLink.click();  // htmx fetches the step's card again
    }
  }

  function save(form) {
    if (form.dataset.state === "saving") {
      return;
    }
    form.dataset.state = "saving";
    form.requestSubmit();
  }

  // Whether leaving the field has anything to save: not the text it had, not what was just
  // refused, and not after "changed elsewhere" (that needs a reload, not another try).
  function hasNewText(form) {
    var text = form.querySelector("textarea").value;
    if (form.hasAttribute("data-stale")) {
      return false;
    }
    if (form.dataset.sent !== undefined && text === form.dataset.sent) {
      return false;
    }
    return text.trim() !== (form.dataset.original || "").trim();
  }

  document.addEventListener("keydown", function (event) {
    var textarea = event.target;
    if (!(textarea instanceof HTMLTextAreaElement)) {
      return;
    }
    var form = textarea.closest("[data-step-form]");
    if (!form) {
      return;
    }
    if (event.key === "Escape") {
      event.preventDefault();
      cancel(form);
    } else if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (form.hasAttribute("data-new") || hasNewText(form) || form.hasAttribute("data-stale")) {
        pendingFocus = form.hasAttribute("data-new") ? null : stepIdOf(form) + "-edit";
        save(form);
      } else {
        cancel(form);
      }
    }
  });

  document.addEventListener("input", function (event) {
    if (event.target instanceof HTMLTextAreaElement && event.target.closest("[data-step-form]")) {
      autosize(event.target);
    }
  });

  // Leaving the form (not just moving to its own Save or Cancel button) saves a change, and
  // closes an unchanged edit.
  document.addEventListener("focusout", function (event) {
    var form = event.target.closest && event.target.closest("[data-step-form]");
    if (!form || form.dataset.state === "saving") {
      return;
    }
    var next = event.relatedTarget;
    if (next && form.contains(next)) {
      return;
    }
    // Let a click on Cancel run first; it removes the form before this decides anything.
    window.setTimeout(function () {
      if (!document.body.contains(form) || form.contains(document.activeElement) || form.dataset.state === "saving") {
        return;
      }
      if (hasNewText(form)) {
        save(form);
      } else if (!form.hasAttribute("data-new") && form.dataset.sent === undefined && !form.hasAttribute("data-stale")) {
        cancel(form);
      }
    }, 150);
  });

  document.addEventListener("click", function (event) {
    // Clicking a step's text opens it for editing, like its Edit button.
    var text = event.target.closest && event.target.closest("[data-edit-link]");
    if (text && !window.getSelection().toString()) {
      var link = document.getElementById(text.dataset.editLink);
      if (link) {
        link.click();
      }
      return;
    }
    var cancelNew = event.target.closest && event.target.closest("[data-cancel-new]");
    if (cancelNew) {
      event.preventDefault();
      cancel(cancelNew.closest("form"));
    }
  });

  // Saving… / Saved --------------------------------------------------------------------------

  document.addEventListener("htmx:beforeRequest", function (event) {
    var config = event.detail.requestConfig;
    if (config && config.verb === "post" && event.detail.elt.closest("#plan-editor")) {
      setStatus("saving");
    }
  });

  document.addEventListener("htmx:sendError", function () { setStatus("failed"); });
  document.addEventListener("htmx:responseError", function () { setStatus("failed"); });

  // After a swap --------------------------------------------------------------------------

  document.addEventListener("htmx:afterSettle", function () {
    if (pendingFocus) {
      var target = document.getElementById(pendingFocus);
      pendingFocus = null;
      if (target && (!document.activeElement || document.activeElement === document.body)) {
        target.focus();
      }
    }
  });

  function onLoad(root) {
    initSortable(root);
    var textarea = root.querySelector && root.querySelector("[data-step-form] textarea[autofocus]");
    if (textarea) {
      focusEnd(textarea);
    }
  }

  if (window.htmx) {
    // Runs for the page and for every piece htmx swaps in.
    window.htmx.onLoad(onLoad);
  } else {
    document.addEventListener("DOMContentLoaded", function () { onLoad(document.body); });
  }
})();
