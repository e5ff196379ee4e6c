// Plan editor: in-place editing keys, drag and drop through SortableJS, "Saving…" as a toast,
// keyboard shortcuts on a focused step, focus.
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
      region.dataset.state = key;
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

  // Keyboard shortcuts ----------------------------------------------------------------------
  // On a focused step (its card, or one of its buttons), never while typing. Each key presses
  // the step's own control, so a shortcut does exactly what its button does (and saves the
  // same way). The list people read is #plan-shortcuts (plan_detail.html); "?" opens it.

  var STEP_KEYS = {e: "edit", a: "add", p: "pin", Delete: "delete", Backspace: "delete"};
  var MOVE_KEYS = {ArrowUp: "up", ArrowDown: "down"};

  function has(table, key) {
    return Object.prototype.hasOwnProperty.call(table, key);
  }

  function isTyping(element) {
    return !!element && (element.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(element.tagName));
  }

  function pressControl(uid, part) {
    var control = document.getElementById("step-" + uid + "-" + part);
    if (!control || control.disabled) {
      return false;
    }
    control.click();
    return true;
  }

  // The step above or below, across tasks: arrows walk the plan like a list.
  function neighbour(step, offset) {
    var steps = Array.prototype.slice.call(document.querySelectorAll("#plan-editor .step[tabindex]"));
    return steps[steps.indexOf(step) + offset] || null;
  }

  function toggleShortcuts() {
    var help = document.getElementById("plan-shortcuts");
    if (!help) {
      return false;
    }
    help.open = !help.open;
    if (help.open) {
      help.querySelector("summary").focus();
      help.scrollIntoView({block: "nearest"});
    }
    return true;
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.isComposing || event.ctrlKey || event.metaKey || isTyping(event.target)) {
      return;
    }
    if (event.key === "?" && !event.altKey) {
      if (toggleShortcuts()) {
        event.preventDefault();
      }
      return;
    }
    var step = event.target.closest && event.target.closest(".step[tabindex]");
    if (!step) {
      return;
    }
    var key = event.key.length === 1 ? event.key.toLowerCase() : event.key;
    var done = false;
    // A key held down repeats: a control (move, pin, delete…) acts once per press, not once per
    // repeat, which would save again and again and delete the steps that follow. The arrows
    // alone only walk the list, and may repeat.
    if (event.altKey) {
      done = has(MOVE_KEYS, key) && (event.repeat || pressControl(step.dataset.stepId, MOVE_KEYS[key]));
    } else if (has(MOVE_KEYS, key) && event.target === step) {
      var next = neighbour(step, key === "ArrowUp" ? -1 : 1);
      if (next) {
        next.focus();
      }
      done = true;  // at either end, the page does not scroll away either
    } else if (has(STEP_KEYS, key) && !(key.length === 1 && event.shiftKey)) {
      done = event.repeat || pressControl(step.dataset.stepId, STEP_KEYS[key]);
    }
    if (done) {
      event.preventDefault();
    }
  });

  // Saving… / Saved, as a toast ---------------------------------------------------------------
  // #plan-save-status sits in the page head, out of sight once a long plan scrolls, so
  // plan-editor.css pins it to the bottom of the window, in view wherever the step that changed
  // is. Each new message shows it for a while; it stays in the page (only faded), so screen
  // readers hear every message (aria-live), and a failure stays until the next message.

  var toastTimer = null;

  function showToast(region) {
    region.classList.add("save-status--shown");
    window.clearTimeout(toastTimer);
    if (region.dataset.state !== "failed") {
      toastTimer = window.setTimeout(function () {
        region.classList.remove("save-status--shown");
      }, 6000);
    }
  }

  function watchToast() {
    var region = status();
    if (!region || region.dataset.watched) {
      return;
    }
    region.dataset.watched = "1";
    if (region.textContent.trim()) {
      showToast(region);  // a message the page came with (a plain form's answer)
    }
    new MutationObserver(function () {
      if (region.textContent.trim()) {
        showToast(region);
      } else {
        region.classList.remove("save-status--shown");
      }
    }).observe(region, {childList: true, characterData: true, subtree: true});
  }

  // An answer's message (filled in out of band) is not a failure of the connection.
  document.addEventListener("htmx:oobBeforeSwap", function (event) {
    var region = status();
    if (region && event.detail.target === region) {
      delete region.dataset.state;
    }
  });

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
    watchToast();
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
