// Small enhancements; every form works without this file.
"use strict";
(function () {
  // Files dropped on the drop zone go into the file input (then the form is sent as usual).
  const drop = document.getElementById("drop");
  const input = document.getElementById("files");
  if (drop && input) {
    ["dragenter", "dragover"].forEach(function (e) {
      drop.addEventListener(e, function (ev) { ev.preventDefault(); drop.classList.add("over"); });
    });
    ["dragleave", "drop"].forEach(function (e) {
      drop.addEventListener(e, function () { drop.classList.remove("over"); });
    });
    drop.addEventListener("drop", function (ev) {
      ev.preventDefault();
      if (ev.dataTransfer && ev.dataTransfer.files.length) { input.files = ev.dataTransfer.files; }
    });
  }
})();
(function () {
  // An audit in progress: poll its progress, reload the page when it is done.
  const running = document.getElementById("audit-running");
  if (running) {
    const bar = document.getElementById("audit-progress");
    const count = document.getElementById("audit-count");
    const poll = function () {
      fetch(running.dataset.progress, { credentials: "same-origin" })
        .then(function (r) { return r.json(); })
        .then(function (p) {
          bar.max = Math.max(p.listed, 1);
          bar.value = p.done;
          count.textContent = p.done + " of " + p.listed + " listed so far";
          if (p.finished) { window.location.reload(); } else { window.setTimeout(poll, 700); }
        })
        .catch(function () { window.setTimeout(poll, 2000); });
    };
    window.setTimeout(poll, 300);
  }
  // Sortable tables: a header's button sorts by its column (again: the other way).
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th button[data-sort]").forEach(function (button) {
      button.addEventListener("click", function () {
        const col = Number(button.dataset.sort);
        const th = button.parentElement;
        const up = th.getAttribute("aria-sort") !== "ascending";
        table.querySelectorAll("th").forEach(function (h) { h.setAttribute("aria-sort", "none"); });
        th.setAttribute("aria-sort", up ? "ascending" : "descending");
        const body = table.tBodies[0];
        const rows = Array.from(body.rows);
        rows.sort(function (a, b) {
          const x = a.cells[col].textContent.trim();
          const y = b.cells[col].textContent.trim();
          return up ? x.localeCompare(y) : y.localeCompare(x);
        });
        rows.forEach(function (r) { body.appendChild(r); });
      });
    });
  });
})();
