(function () {
  var filter = document.getElementById("filter");
  var boxes = Array.prototype.slice.call(document.querySelectorAll("input[name=result]"));
  var items = Array.prototype.slice.call(document.querySelectorAll("[data-result]"));
  var shown = document.getElementById("shown");
  function apply() {
    var text = filter.value.trim().toLowerCase();
    var on = {};
    boxes.forEach(function (b) { on[b.value] = b.checked; });
    var rows = 0, total = 0;
    items.forEach(function (el) {
      var visible = on[el.dataset.result] && el.dataset.name.toLowerCase().indexOf(text) !== -1;
      el.hidden = !visible;
      if (el.tagName === "TR") { total += 1; if (visible) { rows += 1; } }
    });
    shown.textContent = rows + " of " + total + " scenarios shown";
  }
  filter.addEventListener("input", apply);
  boxes.forEach(function (b) { b.addEventListener("change", apply); });
  apply();
})();
