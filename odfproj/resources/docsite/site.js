// odfproj docs site: routing by #fragment, search, and lineage highlighting.
// Only shows, hides and marks elements the page already holds; never builds markup from data.
(function () {
  "use strict";
  var search = document.getElementById("search");
  var count = document.getElementById("search-count");
  var items = Array.prototype.slice.call(document.querySelectorAll("#datasets li"));
  var pages = Array.prototype.slice.call(document.querySelectorAll("main section.page"));
  var nodes = Array.prototype.slice.call(document.querySelectorAll("#lineage .node"));
  var edges = Array.prototype.slice.call(document.querySelectorAll("#lineage .edge"));

  function current() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    return document.getElementById(id) && id.indexOf("ds-") === 0 ? id.slice(3) : null;
  }

  function show() {
    var name = current();
    var wanted = name === null ? "overview" : "ds-" + name;
    pages.forEach(function (page) { page.hidden = page.id !== wanted; });
    var near = {};
    edges.forEach(function (edge) {
      var on = name !== null && (edge.dataset.source === name || edge.dataset.target === name);
      edge.classList.toggle("active", on);
      if (on) { near[edge.dataset.source] = true; near[edge.dataset.target] = true; }
    });
    nodes.forEach(function (node) {
      node.classList.toggle("selected", node.dataset.name === name);
      node.classList.toggle("near", name !== null && !!near[node.dataset.name] && node.dataset.name !== name);
    });
    items.forEach(function (li) { li.classList.toggle("selected", li.dataset.name === name); });
    // Keep the graph in view: the browser's own jump to the #fragment would scroll it away.
    var scroller = document.querySelector(".graph-scroll");
    var selected = document.querySelector("#lineage .node.selected rect");
    if (selected && scroller) {
      var box = selected.getBBox();
      scroller.scrollLeft = Math.max(0, box.x + box.width / 2 - scroller.clientWidth / 2);
      scroller.scrollTop = Math.max(0, box.y + box.height / 2 - scroller.clientHeight / 2);
    }
    window.scrollTo(0, 0);
  }

  function filter() {
    var terms = search.value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    var hits = {};
    items.forEach(function (li) {
      var text = li.dataset.search;
      var hit = terms.every(function (t) { return text.indexOf(t) >= 0; });
      li.hidden = !hit;
      if (hit) { shown += 1; hits[li.dataset.name] = true; }
    });
    nodes.forEach(function (node) { node.classList.toggle("dimmed", terms.length > 0 && !hits[node.dataset.name]); });
    count.textContent = terms.length ? shown + " of " + items.length + " dataset(s)" : items.length + " dataset(s)";
  }

  search.addEventListener("input", filter);
  search.addEventListener("keydown", function (event) {
    if (event.key !== "Enter") { return; }
    var first = items.filter(function (li) { return !li.hidden; })[0];
    if (first) { window.location.hash = first.querySelector("a").getAttribute("href"); }
  });
  document.addEventListener("keydown", function (event) {
    if (event.key === "/" && document.activeElement !== search) { event.preventDefault(); search.focus(); }
  });
  window.addEventListener("hashchange", show);
  window.addEventListener("load", function () { window.requestAnimationFrame(show); });
  filter();
  show();
})();
