// Live refresh: every few seconds, fetch this page again and replace the
// content of each element marked data-live with the fresh one of the same
// name. Forms the user is typing in are left alone, and nothing is
// fetched while the tab is hidden.
(function () {
  "use strict";
  var period = parseInt(document.body.getAttribute("data-refresh") || "0", 10);
  if (!period || !window.fetch || !window.DOMParser) { return; }
  function busy(el) {
    var a = document.activeElement;
    return a && el.contains(a) && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA");
  }
  function refresh() {
    if (document.hidden || !document.querySelector("[data-live]")) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Console-Live": "1" } })
      .then(function (res) { return res.ok ? res.text() : null; })
      .then(function (text) {
        if (text === null) { return; }
        var fresh = new DOMParser().parseFromString(text, "text/html");
        document.querySelectorAll("[data-live]").forEach(function (el) {
          var name = el.getAttribute("data-live");
          var next = fresh.querySelector('[data-live="' + CSS.escape(name) + '"]');
          if (next && !busy(el)) { el.innerHTML = next.innerHTML; }
        });
        document.body.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* a failed poll waits for the next one */ });
  }
  window.setInterval(refresh, period);
})();
