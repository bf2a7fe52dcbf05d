// MiniCache dashboard: the live event feed, and the overview's live refresh. No library, no build step.

// The overview: every few seconds the page is fetched again and its cards, chart and tables are
// swapped in (the server renders them; nothing is computed here).
(function () {
  "use strict";
  var box = document.getElementById("overview");
  if (!box) return;
  var status = document.getElementById("live-status");
  var every = parseInt(box.getAttribute("data-refresh"), 10) || 5000;
  var busy = false;
  function refresh() {
    if (busy) return;
    busy = true;
    fetch(window.location.href, { credentials: "same-origin" })
      .then(function (r) {
        if (r.redirected || r.status === 401) { window.location.reload(); throw new Error("logged out"); }
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("overview");
        if (fresh) box.innerHTML = fresh.innerHTML;
        if (status) { status.textContent = "live · updated " + new Date().toLocaleTimeString(); status.className = ""; }
      })
      .catch(function (err) {
        if (status) { status.textContent = "not updating (" + err.message + "); retrying"; status.className = "off"; }
      })
      .then(function () { busy = false; });
  }
  setInterval(refresh, every);
})();

// The live event feed: every 2 s it asks the server for events newer than the last one shown and
// puts the rows it gets (server-rendered HTML) on top.
(function () {
  "use strict";
  var rows = document.getElementById("event-rows");
  if (!rows) return;
  var status = document.getElementById("live-status");
  var last = parseInt(rows.getAttribute("data-last"), 10) || 0;
  var feed = rows.getAttribute("data-feed");
  var busy = false;

  function mark(ok, text) {
    if (!status) return;
    status.textContent = text;
    status.className = ok ? "" : "off";
  }

  function poll() {
    if (busy) return;
    busy = true;
    var url = feed + (feed.indexOf("?") >= 0 ? "&" : "?") + "after=" + last;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (r) {
        if (r.redirected || r.status === 401) { window.location.reload(); throw new Error("logged out"); }
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        if (data.html && data.html.trim()) {
          rows.insertAdjacentHTML("afterbegin", data.html);
          var empty = document.getElementById("no-events");
          if (empty) empty.remove();
          Array.prototype.forEach.call(rows.querySelectorAll("tr"), function (tr) {
            if (parseInt(tr.getAttribute("data-seq"), 10) > last) tr.classList.add("new");
          });
        }
        last = data.last;
        mark(true, "live · updated " + new Date().toLocaleTimeString());
      })
      .catch(function (err) { mark(false, "not updating (" + err.message + "); retrying"); })
      .then(function () { busy = false; });
  }

  setInterval(poll, 2000);
})();
