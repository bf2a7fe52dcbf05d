// MiniCache dashboard: the live event feed. Every 2 s it asks the server for events newer than the
// last one shown and puts the rows it gets (server-rendered HTML) on top. No library, no build step.
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
