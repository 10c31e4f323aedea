// Keeps the first page of the conversations list current while it is open: the rows are
// fetched again every few seconds (server-rendered, same filters) and swapped in. Pages work
// without this script; it only saves a reload.
(function () {
  "use strict";
  var box = document.getElementById("rows");
  if (!box || !box.dataset.live) { return; }
  var url = box.dataset.live;
  var busy = false;
  function refresh() {
    if (busy || document.hidden) { return; }
    if (box.contains(document.activeElement) && document.activeElement !== document.body) { return; }
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.querySelector("table.conversations");
        var old = box.querySelector("table.conversations");
        if (fresh && old && fresh.outerHTML !== old.outerHTML) {
          old.replaceWith(document.importNode(fresh, true));
          box.setAttribute("data-updated", String(Date.now()));
        }
      })
      .catch(function () {})
      .then(function () { busy = false; });
  }
  setInterval(refresh, 3000);
}());
