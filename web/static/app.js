// compactor status page: live updates without reloading.
//
// The server sends a "change" event on /events whenever a job or a
// collection changes. On each one this script fetches the current page again
// with ?partial=1, which returns only the content of <main id="main">, and
// swaps it in. Without JavaScript the page refreshes itself instead (a
// <noscript> meta refresh).
(function () {
  "use strict";

  var main = document.getElementById("main");
  var live = document.getElementById("live");
  var PERIODIC_MS = 30000; // refresh relative times ("3m ago") when idle

  // Drop the one-shot flash parameters, so a reload does not repeat them.
  try {
    var here = new URL(window.location.href);
    if (here.searchParams.has("flash") || here.searchParams.has("job")) {
      here.searchParams.delete("flash");
      here.searchParams.delete("job");
      window.history.replaceState(null, "", here.pathname + here.search + here.hash);
    }
  } catch (e) { /* old browser: keep the URL */ }

  // Forms that ask before they act (cancel).
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    var question = form && form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      ev.preventDefault();
    }
  });

  // Filters apply as soon as a choice changes.
  document.addEventListener("change", function (ev) {
    var el = ev.target;
    if (el && el.matches && el.matches("select[data-autosubmit]") && el.form) {
      if (el.form.requestSubmit) { el.form.requestSubmit(); } else { el.form.submit(); }
    }
  });

  if (!main || !main.hasAttribute("data-live") || !window.EventSource || !window.fetch) {
    return;
  }

  function setStatus(text, state) {
    if (!live) { return; }
    live.hidden = false;
    live.textContent = text;
    live.setAttribute("data-state", state);
  }

  var inflight = false;
  var again = false;
  var deferred = false;

  // busy: the user is typing or choosing in a form inside main; swapping
  // it now would throw their input away.
  function busy() {
    var el = document.activeElement;
    return !!(el && el !== document.body && main.contains(el) && el.closest && el.closest("form"));
  }

  function refresh() {
    if (busy()) { deferred = true; return; }
    if (inflight) { again = true; return; }
    inflight = true;
    var url = new URL(window.location.href);
    url.searchParams.set("partial", "1");
    url.hash = "";
    window.fetch(url.toString(), {
      credentials: "same-origin",
      cache: "no-store",
      headers: { "Accept": "text/html" }
    }).then(function (res) {
      if (!res.ok) { throw new Error("status " + res.status); }
      return res.text();
    }).then(function (html) {
      if (busy()) { deferred = true; return; }
      main.innerHTML = html;
      main.setAttribute("data-refreshed", String(Date.now()));
    }).catch(function () {
      setStatus("update failed", "error");
    }).then(function () {
      inflight = false;
      if (again) { again = false; refresh(); }
    });
  }

  main.addEventListener("focusout", function () {
    window.setTimeout(function () {
      if (deferred && !busy()) { deferred = false; refresh(); }
    }, 0);
  });

  var source = null;
  var timer = null;
  var stale = false; // events may have been missed (disconnected, paused)

  function connect() {
    if (source) { return; }
    source = new window.EventSource("/events");
    source.addEventListener("open", function () {
      setStatus("live", "live");
      if (stale) { stale = false; refresh(); } // catch up on missed changes
    });
    source.addEventListener("change", refresh);
    source.addEventListener("error", function () {
      stale = true;
      setStatus("reconnecting…", "error");
    });
    timer = window.setInterval(refresh, PERIODIC_MS);
  }

  function disconnect() {
    if (source) { source.close(); source = null; }
    if (timer) { window.clearInterval(timer); timer = null; }
    stale = true;
    setStatus("paused", "paused");
  }

  // Hidden tabs hold no connection (browsers allow few per host).
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { disconnect(); } else { connect(); }
  });
  if (!document.hidden) { connect(); } else { stale = true; setStatus("paused", "paused"); }
})();
