
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("tokaudit-data").textContent);
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function num(n) { return typeof n === "number" ? n.toLocaleString("en-US") : (n === null ? "" : String(n)); }
  function pct(x) { return (x * 100).toFixed(3) + "%"; }
  function table(box, columns, rows, opts) {
    opts = opts || {};
    var page = 0, size = opts.size || 50, key = null, desc = false, query = "", only = false;
    var tools = el("div", null, "tools"), search = el("input");
    search.type = "search"; search.placeholder = "filter (" + (opts.what || "any column") + ")";
    tools.appendChild(search);
    var check = null;
    if (opts.only) {
      check = el("input"); check.type = "checkbox";
      var lab = el("label"); lab.appendChild(check); lab.appendChild(document.createTextNode(" " + opts.only[0]));
      tools.appendChild(document.createTextNode(" ")); tools.appendChild(lab);
    }
    var prev = el("button", "<"), next = el("button", ">"), info = el("span");
    tools.appendChild(prev); tools.appendChild(next); tools.appendChild(info);
    var t = el("table"), head = el("tr"), body = el("tbody");
    columns.forEach(function (c, i) {
      var th = el("th", c.name);
      th.title = "sort by " + c.name;
      th.addEventListener("click", function () { desc = key === i ? !desc : !!c.num; key = i; page = 0; draw(); });
      head.appendChild(th);
    });
    var thead = el("thead"); thead.appendChild(head); t.appendChild(thead); t.appendChild(body);
    box.appendChild(tools); box.appendChild(t);
    function shown() {
      var out = rows.filter(function (r) {
        if (only && !opts.only[1](r)) return false;
        if (!query) return true;
        return columns.some(function (c) { return String(c.get(r)).toLowerCase().indexOf(query) >= 0; });
      });
      if (key !== null) {
        var c = columns[key];
        out.sort(function (a, b) {
          var x = c.get(a), y = c.get(b), r = x < y ? -1 : x > y ? 1 : 0;
          return desc ? -r : r;
        });
      }
      return out;
    }
    function draw() {
      var all = shown(), pages = Math.max(1, Math.ceil(all.length / size));
      page = Math.min(page, pages - 1);
      body.textContent = "";
      all.slice(page * size, page * size + size).forEach(function (r) {
        var tr = el("tr", null, opts.cls ? opts.cls(r) : "");
        columns.forEach(function (c) {
          var v = c.get(r), td = el("td", c.fmt ? c.fmt(v, r) : v, c.num ? "n" : "");
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      info.textContent = " " + (all.length ? (page * size + 1) + "-" + Math.min(all.length, page * size + size) : 0) +
        " of " + num(all.length) + " (page " + (page + 1) + " of " + pages + ")";
      prev.disabled = page === 0; next.disabled = page >= pages - 1;
    }
    search.addEventListener("input", function () { query = search.value.toLowerCase(); page = 0; draw(); });
    if (check) check.addEventListener("change", function () { only = check.checked; page = 0; draw(); });
    prev.addEventListener("click", function () { page -= 1; draw(); });
    next.addEventListener("click", function () { page += 1; draw(); });
    draw();
  }
  function col(name, i, numeric, fmt) { return { name: name, get: function (r) { return r[i]; }, num: numeric, fmt: fmt }; }
  var C = {}; D.columns.forEach(function (c, i) { C[c] = i; });
  function ratio(r) { return r[C.billed] ? r[C.absdiff] / r[C.billed] : 0; }
  var fileCols = [
    col("file", C.path), col("records", C.records, true, num), col("audited", C.audited, true, num),
    { name: "mean billed", num: true, get: function (r) { return r[C.checked] ? r[C.billed] / r[C.checked] : 0; }, fmt: function (v) { return v.toFixed(1); } },
    { name: "mean |diff| %", num: true, get: function (r) { return r[C.mean_ratio]; }, fmt: pct },
    col("max |diff|", C.max_absdiff, true, num), col("findings", C.findings, true, num),
    { name: "verdict", get: function (r) { return r[C.failed] ? "failed" : (r[C.complete] ? "passed" : "not audited to the end"); } }
  ];
  if (D.files.some(function (r) { return r[C.unreadable]; }))
    fileCols.splice(3, 0, col("unreadable", C.unreadable, true, num));
  if (D.files.some(function (r) { return r[C.rt_checked]; }))
    fileCols.push({ name: "mean round trip %", num: true, get: function (r) { return r[C.rt_mean]; }, fmt: pct });
  if (D.files.some(function (r) { return r[C.cached]; }))
    fileCols.push({ name: "cached", get: function (r) { return r[C.cached] ? "yes" : ""; } });
  table(document.getElementById("files-table"), fileCols, D.files,
        { what: "path", only: ["failing only", function (r) { return r[C.failed]; }],
          cls: function (r) { return r[C.failed] ? "bad" : ""; } });
  var folders = {};
  D.files.forEach(function (r) {
    var p = r[C.path], k = p.lastIndexOf("/"), f = k >= 0 ? p.slice(0, k) : ".";
    var a = folders[f] || (folders[f] = [f, 0, 0, 0, 0, 0, 0]);
    a[1] += 1; a[2] += r[C.failed] ? 1 : 0; a[3] += r[C.audited]; a[4] += r[C.billed]; a[5] += r[C.absdiff]; a[6] += r[C.findings];
  });
  table(document.getElementById("folders-table"), [
    col("folder", 0), col("files", 1, true, num), col("failing", 2, true, num), col("audited", 3, true, num),
    col("billed", 4, true, num),
    { name: "mean |diff| %", num: true, get: function (r) { return r[4] ? r[5] / r[4] : 0; }, fmt: pct },
    col("findings", 6, true, num)
  ], Object.keys(folders).sort().map(function (k) { return folders[k]; }),
  { what: "folder", size: 20, cls: function (r) { return r[2] ? "bad" : ""; } });
  // places, id labels and billed - counted come worded from the data (one wording, every output)
  table(document.getElementById("worst-table"), [
    col("record", 6), col("id", 7), col("billed", 3, true, num), col("counted", 4, true, num),
    { name: "billed - counted", num: true, get: function (r) { return r[5]; }, fmt: function (v) { return (v > 0 ? "+" : "") + num(v); } }
  ], D.worst, { what: "path, id", size: 25 });
  table(document.getElementById("findings-table"), [
    col("where", 6), col("id", 7), col("check", 3), col("message", 4), col("level", 5)
  ], D.findings, { what: "path, id, check, message", size: 50,
    only: ["errors only", function (r) { return r[5] !== "allowed outlier"; }],
    cls: function (r) { return r[5] === "allowed outlier" ? "warn" : "bad"; } });
  if (D.baseline && D.baseline.rows.length) {
    var bc = D.baseline.columns.map(function (name, i) {
      return { name: name, get: function (r) { return r[i]; }, num: i > 0 && i < D.baseline.columns.length - 1,
               fmt: i > 0 && i < D.baseline.columns.length - 1 ? function (v) { return v < 1 && v % 1 ? pct(v) : num(v); } : null };
    });
    table(document.getElementById("baseline-table"), bc, D.baseline.rows,
          { what: "path", only: ["worse only", function (r) { return r[r.length - 1]; }],
            cls: function (r) { return r[r.length - 1] ? "bad" : ""; } });
  }
  document.body.setAttribute("data-ready", "1");
})();
