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
