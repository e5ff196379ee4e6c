// The live run page: exactly-once events, reconnection from the last event shown, polling when
// the socket cannot connect, the clock, and Copy. The page works without this file (a reload
// shows everything so far); only the live stream needs it.
(function () {
  "use strict";

  document.documentElement.classList.add("js");

  var page = document.getElementById("run-page");
  if (!page) {
    return;
  }
  var FINISHED = ["succeeded", "failed", "cancelled"];
  // The websocket extension reconnects by itself only after these close codes.
  var RETRIED = [1006, 1011, 1012, 1013];

  function lastSeq() {
    return parseInt(page.getAttribute("data-last-seq") || "0", 10) || 0;
  }

  function finished() {
    var status = document.getElementById("run-status");
    return !!status && FINISHED.indexOf(status.getAttribute("data-status")) >= 0;
  }

  // Every (re)connection asks for the events after the last one on the page: the server then
  // replays only what is missing. The extension keeps the URL it first read, so it is
  // rewritten here, where the extension creates each socket.
  if (window.htmx) {
    var create = window.htmx.createWebSocket;
    window.htmx.createWebSocket = function (url) {
      var target = new URL(url, window.location.href);
      if (target.pathname.indexOf("/ws/runs/") === 0) {
        target.searchParams.set("after", String(lastSeq()));
      }
      return create ? create(target.toString()) : new WebSocket(target.toString());
    };
  }

  // A stored event's message carries its log row, <li id="event-N">. One already on the page
  // (or older than the newest shown) is dropped whole, with every part it would re-render.
  // Messages come from the socket or, when it cannot connect, from polling: both pass here.
  var counter = document.querySelector("[data-event-count]");

  function accept(message) {
    var match = /id="event-(\d+)"/.exec(message);
    if (!match) {
      return true; // streamed tokens: never stored, never repeated
    }
    var seq = parseInt(match[1], 10);
    if (seq <= lastSeq() || document.getElementById("event-" + seq)) {
      return false;
    }
    page.setAttribute("data-last-seq", String(seq));
    if (counter) {
      counter.textContent = String((parseInt(counter.textContent, 10) || 0) + 1);
    }
    return true;
  }

  // A part re-rendered by the socket may hold the focused control (Stop becomes Run again):
  // focus then moves to the element with the same id, or to the first control of its part.
  var focused = null;

  function rememberFocus() {
    var active = document.activeElement;
    focused = active && active !== document.body && active.id ? active.id : null;
  }

  page.addEventListener("htmx:wsBeforeMessage", function (evt) {
    if (!accept(evt.detail.message)) {
      evt.preventDefault();
      return;
    }
    rememberFocus();
  });

  page.addEventListener("htmx:wsAfterMessage", afterMessage);

  function afterMessage() {
    startWait();
    if (finished()) {
      setConnection(""); // a finished or stopped run is not "Live", though its socket still is
    }
    // Keep a stream scrolled to its newest tokens.
    var streams = page.querySelectorAll(".stream");
    for (var i = 0; i < streams.length; i++) {
      streams[i].scrollTop = streams[i].scrollHeight;
    }
    var id = focused;
    focused = null;
    if (!id || (document.activeElement && document.activeElement !== document.body)) {
      return;
    }
    var target = document.getElementById(id);
    if (!target && id === "run-stop") {
      target = document.querySelector("#run-controls button") || document.getElementById("run-status");
    }
    if (target) {
      if (!target.matches("a, button, input, textarea, select, [tabindex]")) {
        target.setAttribute("tabindex", "-1");
      }
      target.focus();
    }
  }

  // The socket renders its parts without a request, so the plain forms among them ("Run
  // again", "Resume", "Run again from this task" once a run ends live) carry no CSRF token.
  // Such a form gets the page's own token (the one htmx sends, on <body hx-headers>) as it is
  // submitted. Forms htmx sends (hx-post) have it in their header already.
  page.addEventListener("submit", function (evt) {
    var form = evt.target;
    if (!form || (form.getAttribute("method") || "").toLowerCase() !== "post" ||
        form.querySelector("input[name=csrfmiddlewaretoken]")) {
      return;
    }
    var token = "";
    try {
      token = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (e) {
      return;
    }
    if (token) {
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = "csrfmiddlewaretoken";
      input.value = token;
      form.appendChild(input);
    }
  }, true);

  // Connection state, shown in words (#conn-status) and as a class on the page.
  var conn = document.getElementById("conn-status");

  function setConnection(state) {
    page.classList.toggle("is-live", state === "live");
    page.classList.toggle("is-reconnecting", state === "reconnecting");
    page.classList.toggle("is-polling", state === "polling");
    if (conn) {
      conn.textContent = state ? conn.getAttribute("data-" + state) || "" : "";
    }
  }

  // Polling, when the socket cannot connect (a proxy or network that drops websockets): every
  // POLL_MS the page asks crews:run-poll for the messages of the events after the last one it
  // shows, and swaps them in as the websocket extension would. The socket keeps trying to
  // reconnect meanwhile; once it opens, polling stops.
  var POLL_MS = 2000;
  var FAILURES_BEFORE_POLLING = 3; // closes in a row without an open, once the socket had opened
  var pollUrl = conn ? conn.getAttribute("data-poll-url") : null;
  var opened = false;
  var failures = 0;
  var polling = false;
  var pollTimer = null;
  var gone = false; // signed out, or the run is no longer visible: neither socket nor poll can help
  var swapApi = null;
  if (window.htmx) {
    // Not used as an extension: its init hands over the API the websocket extension swaps with.
    window.htmx.defineExtension("run-poll", { init: function (api) { swapApi = api; } });
  }

  function swapIn(message) {
    if (!accept(message)) {
      return;
    }
    rememberFocus();
    var settleInfo = swapApi.makeSettleInfo(page);
    var children = Array.prototype.slice.call(swapApi.makeFragment(message).children);
    for (var i = 0; i < children.length; i++) {
      swapApi.oobSwap(swapApi.getAttributeValue(children[i], "hx-swap-oob") || "true", children[i], settleInfo);
    }
    swapApi.settleImmediately(settleInfo.tasks);
    afterMessage();
  }

  function goneForGood(state) {
    gone = true;
    stopPolling();
    setConnection(state);
  }

  function schedulePoll(delay) {
    window.clearTimeout(pollTimer);
    pollTimer = polling ? window.setTimeout(poll, delay) : null;
  }

  function poll() {
    var url = new URL(pollUrl, window.location.href);
    url.searchParams.set("after", String(lastSeq()));
    window.fetch(url.toString(), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (response.status === 401 || response.redirected) { // a redirect: to the sign-in page
          goneForGood("signed-out");
          return null;
        }
        if (response.status === 403 || response.status === 404) {
          goneForGood("gone");
          return null;
        }
        if (!response.ok) {
          throw new Error("poll " + response.status);
        }
        return response.json();
      })
      .then(function (body) {
        if (!body || !polling) {
          return;
        }
        for (var i = 0; i < body.events.length; i++) {
          swapIn(body.events[i].html);
        }
        if (body.finished || finished()) {
          stopPolling();
          setConnection("");
          return;
        }
        schedulePoll(body.more ? 0 : POLL_MS);
      })
      .catch(function () {
        schedulePoll(POLL_MS); // the server is away too: ask again later
      });
  }

  function startPolling() {
    if (gone || polling || !pollUrl || !swapApi || finished()) {
      return;
    }
    polling = true;
    setConnection("polling");
    schedulePoll(0);
  }

  function stopPolling() {
    polling = false;
    schedulePoll(0);
  }

  page.addEventListener("htmx:wsOpen", function () {
    gone = false; // signed in again (in another tab): the socket replays what the page missed
    opened = true;
    failures = 0;
    stopPolling();
    setConnection("live");
  });

  page.addEventListener("htmx:wsClose", function (evt) {
    var code = evt.detail && evt.detail.event ? evt.detail.event.code : 1006;
    if (gone) {
      return; // said already; a later retry must not start polling again
    }
    if (code === 4401 || code === 4404) {
      goneForGood(code === 4401 ? "signed-out" : "gone"); // retrying cannot help
      return;
    }
    if (finished()) {
      setConnection("");
      return;
    }
    failures += 1;
    if (!opened || failures >= FAILURES_BEFORE_POLLING) {
      startPolling(); // it never connected, or keeps failing to: poll while it retries
    }
    if (!polling) {
      setConnection("reconnecting");
    }
    if (RETRIED.indexOf(code) < 0 && evt.detail && evt.detail.socketWrapper) {
      // A server going away cleanly (1001) or closing normally: try again as for a drop.
      var wrapper = evt.detail.socketWrapper;
      window.setTimeout(function () {
        if (!finished()) {
          wrapper.reconnect();
        }
      }, 1000 + Math.random() * 2000);
    }
  });

  // The clock: the server renders the elapsed seconds; it ticks on while data-running is set.
  function clockText(seconds) {
    var s = Math.max(0, Math.floor(seconds));
    var h = Math.floor(s / 3600);
    var m = Math.floor((s % 3600) / 60);
    var sec = s % 60;
    var pad = function (n) { return (n < 10 ? "0" : "") + n; };
    return h ? h + ":" + pad(m) + ":" + pad(sec) : m + ":" + pad(sec);
  }

  window.setInterval(function () {
    var clock = document.getElementById("run-clock");
    if (!clock || !clock.hasAttribute("data-running")) {
      return;
    }
    if (!clock.runBase) { // a new element (each update replaces it): start from its value
      clock.runBase = { at: Date.now(), seconds: parseFloat(clock.getAttribute("data-elapsed")) || 0 };
    }
    clock.textContent = clockText(clock.runBase.seconds + (Date.now() - clock.runBase.at) / 1000);
  }, 1000);

  // The wait note (a retry's back-off, a free slot under a rate limit) counts down. The server
  // renders when the wait ends (data-until, epoch ms) and its sentence with {n} for the seconds
  // (data-counting) and for its end (data-done), in the reader's language. Screen readers hear
  // the note once, as it comes: its live region gets a still copy of the words, and the counting
  // ones are hidden from them (a region that spoke every second would drown everything else).
  // This clock counts, unless it is set more than SKEW_MS off the server's (the page's
  // data-now-ms, against when its answer came): less than that is the page's own time on its
  // way (rendering, the network), and correcting for it would add that to every wait.
  var SKEW_MS = 3000;
  var skew = (function () {
    var served = parseInt(page.getAttribute("data-now-ms"), 10);
    var nav = window.performance && performance.getEntriesByType ? performance.getEntriesByType("navigation")[0] : null;
    var came = nav && performance.timeOrigin ? performance.timeOrigin + nav.responseStart : Date.now();
    return served && Math.abs(served - came) > SKEW_MS ? served - came : 0;
  })();

  var waitTimer = null;

  function startWait() {
    var note = document.getElementById("run-wait");
    var text = note ? note.querySelector("[data-wait-text]") : null;
    if (!text || note.runWait || !note.hasAttribute("data-until")) {
      return; // no wait, one counting already, or a note without its end (words only)
    }
    var still = document.createElement("span");
    still.className = "visually-hidden";
    still.textContent = text.textContent;
    text.setAttribute("aria-hidden", "true");
    note.insertBefore(still, text);
    note.runWait = { text: text, until: parseInt(note.getAttribute("data-until"), 10) || 0 };
    tickWait();
  }

  // Each tick lands just after the number changes (not on a timer of its own phase, which would
  // show a number up to a second late).
  function tickWait() {
    window.clearTimeout(waitTimer);
    var note = document.getElementById("run-wait");
    var wait = note ? note.runWait : null;
    if (!wait) {
      return; // replaced: its successor counts from its own start
    }
    var left = wait.until - (Date.now() + skew);
    if (left > 0) {
      wait.text.textContent = (note.getAttribute("data-counting") || "").replace("{n}", String(Math.ceil(left / 1000)));
      waitTimer = window.setTimeout(tickWait, (left % 1000 || 1000) + 20);
    } else {
      wait.text.textContent = note.getAttribute("data-done") || ""; // the next event replaces the note
    }
  }

  startWait();

  // Copy the result's Markdown source.
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.appendChild(area);
      area.select();
      var ok = document.execCommand("copy");
      document.body.removeChild(area);
      (ok ? resolve : reject)();
    });
  }

  document.addEventListener("click", function (evt) {
    var button = evt.target.closest ? evt.target.closest("[data-copy-from]") : null;
    if (!button) {
      return;
    }
    var source = document.getElementById(button.getAttribute("data-copy-from"));
    var status = button.closest("section") ? button.closest("section").querySelector(".copy-status") : null;
    copyText(source ? source.value : "").then(function () {
      if (status) {
        status.textContent = button.getAttribute("data-copied") || "";
      }
    });
  });
})();
