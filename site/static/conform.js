/* conform's site: sortable tables, the lazily loaded coverage matrix, and the diff of any two
   environments. Plain JavaScript, no dependencies. Data files are <script src="data/*.js"> that
   assign to window.CONFORM_DATA, because Chromium refuses fetch() from file://.
   Every string that came from the database goes into the page with textContent, never innerHTML. */
(function () {
  "use strict";
  var D = (window.CONFORM_DATA = window.CONFORM_DATA || {});
  var root = document.body.getAttribute("data-root") || "";
  var ROW_LIMIT = 500; // rows rendered per family before a "show all" button

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) if (attrs[k] != null) e.setAttribute(k, attrs[k]);
    if (text != null) e.textContent = text;
    return e;
  }

  /* Load data/<name>.js files not loaded yet, then call done(). */
  var pending = {};
  function load(names, done, failed) {
    var left = 0;
    names.forEach(function (n) {
      if (D[n] !== undefined) return;
      left++;
      var cbs = pending[n];
      var finish = function () {
        if (--left === 0) done();
      };
      if (cbs) {
        cbs.push(finish);
        return;
      }
      pending[n] = [finish];
      var s = el("script", { src: root + "data/" + n + ".js" });
      s.onload = function () {
        var list = pending[n];
        delete pending[n];
        list.forEach(function (f) { f(); });
      };
      s.onerror = function () {
        delete pending[n];
        if (failed) failed(n);
      };
      document.head.appendChild(s);
    });
    if (left === 0) done();
  }

  /* ---- sortable tables ---------------------------------------------------------------- */
  function sortKey(td) {
    var v = td ? td.getAttribute("data-sort") : null;
    if (v == null) v = td ? td.textContent.trim() : "";
    var n = parseFloat(v.replace(/,/g, ""));
    return isNaN(n) || !/^-?[\d.,eE+-]+%?$/.test(v.replace(/\s/g, "")) ? { s: v.toLowerCase() } : { n: n };
  }
  function makeSortable(table) {
    var ths = table.tHead ? table.tHead.rows[0].cells : [];
    Array.prototype.forEach.call(ths, function (th, col) {
      th.classList.add("sort");
      th.title = "sort";
      th.addEventListener("click", function () {
        var asc = th.getAttribute("aria-sort") !== "ascending";
        Array.prototype.forEach.call(ths, function (h) { h.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", asc ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var keyed = rows.map(function (r, i) { return { r: r, k: sortKey(r.cells[col]), i: i }; });
        keyed.sort(function (a, b) {
          var x = a.k, y = b.k, c;
          if (x.n !== undefined && y.n !== undefined) c = x.n - y.n;
          else if (x.n !== undefined) c = -1;
          else if (y.n !== undefined) c = 1;
          else c = x.s < y.s ? -1 : x.s > y.s ? 1 : 0;
          return (asc ? c : -c) || a.i - b.i;
        });
        keyed.forEach(function (o) { body.appendChild(o.r); });
      });
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), makeSortable);

  /* ---- copy buttons of reproduction scripts -------------------------------------------- */
  function bindCopy(b) {
    b.addEventListener("click", function () {
      var pre = b.closest(".repro").querySelector("pre");
      var text = pre.textContent;
      var ok = function () { b.textContent = "copied"; setTimeout(function () { b.textContent = "copy"; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(ok, function () { select(pre); });
      } else {
        select(pre);
        try { if (document.execCommand("copy")) ok(); } catch (e) { /* selected: the reader copies */ }
      }
    });
  }
  Array.prototype.forEach.call(document.querySelectorAll("button.copy"), bindCopy);
  function select(node) {
    var r = document.createRange();
    r.selectNodeContents(node);
    var s = window.getSelection();
    s.removeAllRanges();
    s.addRange(r);
  }

  /* ---- shared helpers over the index ---------------------------------------------------- */
  function index() {
    var idx = D.index;
    if (!idx) throw new Error("data/index.js did not load");
    if (!idx._rank) {
      idx._rank = {};
      idx.outcomes.forEach(function (o, i) { idx._rank[o] = i; });
      idx._failing = {};
      idx.failing.forEach(function (o) { idx._failing[o] = true; });
    }
    return idx;
  }
  function outcomeOf(idx, code) { return idx.codes[code] || "unknown"; }
  function worstOf(idx, codes) {
    var best = null, bestRank = 1e9;
    for (var i = 0; i < codes.length; i++) {
      var o = outcomeOf(idx, codes[i]);
      var r = o === "not tested" ? 1e6 : o in idx._rank ? idx._rank[o] : -1;
      if (r < bestRank) { bestRank = r; best = o; }
    }
    return best || "not tested";
  }
  function cls(o) { return "o-" + o.replace(/ /g, "") ; }
  function chunkNames(idx, fams) {
    var names = [];
    idx.families.forEach(function (f) { if (!fams || fams.indexOf(f.name) >= 0) names = names.concat(f.chunks); });
    return names;
  }
  function familyRows(f) {
    var rows = [];
    f.chunks.forEach(function (c) { rows = rows.concat(D[c].ops); });
    return rows;
  }
  function opLink(row) {
    return el("a", { href: root + "op.html?op=" + encodeURIComponent(row[1]) }, row[0]);
  }
  function readHash() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      if (!kv) return;
      var i = kv.indexOf("=");
      out[decodeURIComponent(i < 0 ? kv : kv.slice(0, i))] = i < 0 ? "1" : decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }
  function writeHash(obj) {
    var parts = [];
    for (var k in obj) if (obj[k]) parts.push(encodeURIComponent(k) + "=" + encodeURIComponent(obj[k]));
    var h = parts.length ? "#" + parts.join("&") : "";
    try { history.replaceState(null, "", h || location.pathname + location.search); } catch (e) { location.hash = h; }
  }

  /* ---- the coverage matrix ---------------------------------------------------------------- */
  function matrix() {
    var idx = index();
    var table = document.getElementById("matrix");
    var status = document.getElementById("f-status");
    var f = {
      text: document.getElementById("f-text"),
      outcome: document.getElementById("f-outcome"),
      family: document.getElementById("f-family"),
      changed: document.getElementById("f-changed"),
      declared: document.getElementById("f-declared"),
    };
    if (idx.has_declared) document.getElementById("declared-toggle").hidden = false;
    var DECLARED = { K: ["K", "a kernel"], C: ["C", "a composite kernel only"], D: ["D", "no kernel: decomposes"], "0": ["–", "not available"], _: ["?", "not in that release's yaml"] };
    document.getElementById("dtype-list").textContent = idx.dtypes.join(", ");
    var expanded = {};
    var showAll = {};
    var bodies = {};
    Array.prototype.forEach.call(table.tBodies, function (b) { bodies[b.getAttribute("data-family")] = b; });

    var h = readHash();
    if (h.q) f.text.value = h.q;
    if (h.outcome) f.outcome.value = h.outcome;
    if (h.family) f.family.value = h.family;
    if (h.changed) f.changed.checked = true;
    if (h.declared) f.declared.checked = true;

    function matches(row, st) {
      if (st.q && row[0].toLowerCase().indexOf(st.q) < 0) return false;
      if (st.changed && !row[3]) return false;
      if (st.outcome) {
        var hit = false;
        for (var i = 0; i < row[4].length && !hit; i++) {
          var c = row[4][i];
          if (c === null) continue;
          for (var j = 0; j < c.length; j++) {
            var o = outcomeOf(idx, c[j]);
            if (st.outcome === "failing" ? idx._failing[o] : o === st.outcome) { hit = true; break; }
          }
        }
        if (!hit) return false;
      }
      return true;
    }

    function runText(env, k) {
      var r = env.runs && env.runs[k];
      return r ? "run " + r[0] + (r[1] ? " of " + r[1] : "") + (r[2] && r[2] !== "finished" ? " (" + r[2] + ")" : "") : "";
    }

    /* prev: the codes of the nearest column to the left that has the op (null: none); runs:
       which of the environment's runs each dtype's result came from (one index, or one per dtype) */
    function cell(codes, prev, env, runs) {
      if (codes === null) {
        var td0 = el("td", { class: "cell absent", title: "not in this torch's catalog" });
        td0.textContent = "·";
        return td0;
      }
      var worst = worstOf(idx, codes);
      var td = el("td", { class: "cell " + cls(worst) + (prev !== null && prev !== codes ? " diffprev" : "") });
      var lines = [];
      var mixed = runs !== null && typeof runs === "object";
      for (var i = 0; i < codes.length; i++) {
        var o = outcomeOf(idx, codes[i]);
        lines.push(idx.dtypes[i] + ": " + o + (mixed && runs[i] !== null ? " · " + runText(env, runs[i]) : ""));
        td.appendChild(el("span", { class: "d " + cls(o) }));
      }
      if (!mixed && runs !== null && runs !== undefined) lines.push("from " + runText(env, runs) + (env.runs.length > 1 ? " (newest result per cell of " + env.runs.length + " runs)" : ""));
      if (prev !== null && prev !== codes) lines.push("differs from the column to its left");
      td.title = lines.join("\n");
      td.setAttribute("data-outcome", worst);
      return td;
    }

    /* the declared-kernels toggle: a letter per cell, outlined where a kernel is declared yet a
       dtype fails (what the Declared page lists as "declared but failing") */
    function declaredMark(td, codes, env, code) {
      var d = DECLARED[code];
      if (!d || !env.declared) return;
      var broken = false;
      for (var i = 0; i < codes.length; i++) {
        var o = outcomeOf(idx, codes[i]);
        if (idx._failing[o] && o !== "unsupported_dtype") broken = true;
      }
      td.appendChild(el("span", { class: "decl decl-" + (code === "_" ? "none" : code === "0" ? "no" : code) + (code === "K" && broken ? " decl-broken" : "") }, d[0]));
      td.title += "\ndeclared by torch " + env.declared[0] + " for " + env.declared[1] + ": " + d[1] + (code === "K" && broken ? ", yet it fails here" : "");
    }

    function renderFamily(name, st, filtering) {
      var body = bodies[name];
      while (body.rows.length > 1) body.deleteRow(1);
      var fam = idx.families.filter(function (x) { return x.name === name; })[0];
      var rows = familyRows(fam).filter(function (r) { return !filtering || matches(r, st); });
      var limit = showAll[name] ? rows.length : Math.min(rows.length, ROW_LIMIT);
      var frag = document.createDocumentFragment();
      for (var i = 0; i < limit; i++) {
        var r = rows[i];
        var tr = el("tr", { class: "oprow" + (r[3] ? " changed" : ""), "data-op": r[0] });
        var th = el("th", { class: "opcol" });
        if (r[3]) th.appendChild(el("span", { class: "changed-mark", title: "outcome differs between environments" }, "▲ "));
        th.appendChild(opLink(r));
        if (r[2] !== "functional") th.appendChild(el("span", { class: "sub" }, " " + r[2]));
        tr.appendChild(th);
        // reset per row: a bare `var prev;` keeps the previous row's value (var is function-scoped),
        // which marked a row's first cell as "differs from its left" against the row above
        var prev = null;
        for (var k = 0; k < r[4].length; k++) {
          var td = tr.appendChild(cell(r[4][k], prev, idx.envs[k], r[5] ? r[5][k] : null));
          if (st.declared && r[6] && r[4][k] !== null) declaredMark(td, r[4][k], idx.envs[k], r[6].charAt(k));
          if (r[4][k] !== null) prev = r[4][k];
        }
        frag.appendChild(tr);
      }
      if (limit < rows.length) {
        var more = el("tr", { class: "more" });
        var td = el("td", { colspan: String(1 + idx.envs.length) });
        var b = el("button", { type: "button" }, "show all " + rows.length + " rows (" + (rows.length - limit) + " more)");
        b.addEventListener("click", function () { showAll[name] = true; apply(); });
        td.appendChild(b);
        more.appendChild(td);
        frag.appendChild(more);
      }
      body.appendChild(frag);
      return rows.length;
    }

    function setOpen(name, open) {
      var body = bodies[name];
      body.classList.toggle("collapsed", !open);
      var t = body.querySelector("button.toggle");
      t.setAttribute("aria-expanded", open ? "true" : "false");
      t.textContent = (open ? "▾ " : "▸ ") + name;
    }

    var generation = 0;
    function apply() {
      var st = { q: f.text.value.trim().toLowerCase(), outcome: f.outcome.value, family: f.family.value, changed: f.changed.checked, declared: f.declared.checked };
      writeHash({ q: f.text.value.trim(), outcome: st.outcome, family: st.family, changed: st.changed ? "1" : "", declared: st.declared ? "1" : "" });
      var filtering = !!(st.q || st.outcome || st.changed);
      var fams = idx.families.map(function (x) { return x.name; }).filter(function (n) { return !st.family || n === st.family; });
      var wanted = filtering ? fams : fams.filter(function (n) { return expanded[n] || st.family === n; });
      var gen = ++generation;
      status.textContent = "loading…";
      load(chunkNames(idx, wanted), function () {
        if (gen !== generation) return; // a newer filter state superseded this one
        var shown = 0, total = 0;
        idx.families.forEach(function (x) {
          var name = x.name, body = bodies[name];
          if (fams.indexOf(name) < 0) { body.hidden = true; return; }
          if (wanted.indexOf(name) < 0) {
            body.hidden = false;
            while (body.rows.length > 1) body.deleteRow(1);
            setOpen(name, false);
            return;
          }
          var n = renderFamily(name, st, filtering);
          total += n;
          body.hidden = filtering && n === 0;
          setOpen(name, true);
          if (n) shown++;
        });
        status.textContent = filtering ? total + " ops match in " + shown + " families" : "";
        table.setAttribute("data-ready", String(gen));
      }, function (name) {
        status.textContent = "could not load data/" + name + ".js";
      });
    }

    Array.prototype.forEach.call(table.querySelectorAll("button.toggle"), function (b) {
      b.addEventListener("click", function () {
        var name = b.closest("tbody").getAttribute("data-family");
        expanded[name] = b.getAttribute("aria-expanded") !== "true";
        if (!expanded[name] && f.family.value === name) f.family.value = "";
        apply();
      });
    });
    document.getElementById("expand-all").addEventListener("click", function () {
      idx.families.forEach(function (x) { expanded[x.name] = true; });
      apply();
    });
    document.getElementById("collapse-all").addEventListener("click", function () {
      expanded = {};
      f.family.value = "";
      apply();
    });
    var timer;
    f.text.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(apply, 200); });
    [f.outcome, f.family, f.changed, f.declared].forEach(function (x) { x.addEventListener("change", apply); });
    if (!h.family && !h.q && !h.outcome && !h.changed && idx.families.length) expanded[idx.families[0].name] = true;
    apply();
  }

  /* ---- the diff of any two environments -------------------------------------------------- */
  function computeDiff(idx, ia, ib) {
    var out = { newly_failing: [], newly_passing: [], other_changes: [], new_ops: [], removed_ops: [], regressions: [], improvements: [] };
    var rows = [];
    idx.families.forEach(function (f) { rows = rows.concat(familyRows(f)); });
    rows.sort(function (x, y) { return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0; });
    var byName = {};
    rows.forEach(function (r) {
      byName[r[0]] = r;
      var a = r[4][ia], b = r[4][ib];
      if (a === null && b !== null) out.new_ops.push(r);
      if (a !== null && b === null) out.removed_ops.push(r);
      if (a === null || b === null) return;
      for (var i = 0; i < a.length; i++) {
        if (a[i] === "-" || b[i] === "-" || a[i] === b[i]) continue;
        var oa = outcomeOf(idx, a[i]), ob = outcomeOf(idx, b[i]);
        var item = [r, idx.dtypes[i], oa, ob];
        if (oa === "pass" && idx._failing[ob]) out.newly_failing.push(item);
        else if (idx._failing[oa] && ob === "pass") out.newly_passing.push(item);
        else out.other_changes.push(item);
      }
    });
    var significant = D["timing-rule"].significant;  // conform.timing.changes, written by the build
    idx.families.forEach(function (f) {
      if (!f.timings) return;
      var t = D[f.timings];
      Object.keys(t).sort().forEach(function (name) {
        var ta = t[name][ia], tb = t[name][ib];
        Object.keys(ta).sort().forEach(function (key) {
          if (!(key in tb)) return;
          // [median, low, high]: conform.timing.changes.is_change, written by the build
          var a = ta[key], b = tb[key];
          if (!significant(a, b)) return;
          var parts = key.split("/");
          var item = [byName[name] || [name, name], parts[0], parts[1], a[0], b[0], b[0] / a[0]];
          (b[0] > a[0] ? out.regressions : out.improvements).push(item);
        });
      });
    });
    out.regressions.sort(function (x, y) { return y[5] - x[5]; });
    out.improvements.sort(function (x, y) { return x[5] - y[5]; });
    return out;
  }

  function fmtSeconds(s) {
    var units = [["s", 1], ["ms", 1e-3], ["µs", 1e-6], ["ns", 1e-9]];
    for (var i = 0; i < units.length; i++) if (s >= units[i][1]) return (s / units[i][1]).toPrecision(3) + " " + units[i][0];
    return s.toPrecision(2) + " s";
  }

  function renderDiff(idx, ia, ib, d, box) {
    box.textContent = "";
    var A = idx.envs[ia], B = idx.envs[ib];
    var sections = [
      ["newly-failing", "Newly failing", d.newly_failing, "cells"],
      ["newly-passing", "Newly passing", d.newly_passing, "cells"],
      ["other-changes", "Other outcome changes", d.other_changes, "cells"],
      ["new-ops", "New ops", d.new_ops, "ops"],
      ["removed-ops", "Removed ops", d.removed_ops, "ops"],
      ["regressions", "Timing regressions (device time grew " + D["timing-rule"].describe + ")", d.regressions, "timings"],
      ["improvements", "Faster (device time shrank " + D["timing-rule"].describe + ")", d.improvements, "timings"],
    ];
    var counts = el("p", { class: "counts" });
    sections.forEach(function (s, i) {
      var a = el("a", { href: "#" + s[0] }, s[1].replace(/ \(.*/, "") + " ");
      a.appendChild(el("b", { id: "n-" + s[0] }, String(s[2].length)));
      counts.appendChild(a);
      if (i < sections.length - 1) counts.appendChild(document.createTextNode(" · "));
    });
    box.appendChild(counts);
    sections.forEach(function (s) {
      var h = el("h2", { id: s[0] }, s[1] + " ");
      h.appendChild(el("span", { class: "sub" }, "(" + s[2].length + ")"));
      box.appendChild(h);
      if (!s[2].length) {
        var none = s[3] === "timings" && !idx.has_timings ? "no timings" : "none";
        box.appendChild(el("p", { class: "empty" }, none));
        return;
      }
      if (s[3] === "ops") {
        var ul = el("ul", { class: "oplist" });
        s[2].forEach(function (r) { var li = el("li"); li.appendChild(opLink(r)); ul.appendChild(li); });
        box.appendChild(ul);
        return;
      }
      var table = el("table", { class: "sortable" });
      var head = s[3] === "cells" ? ["op", "dtype", A.torch + " " + A.backend, B.torch + " " + B.backend] : ["op", "dtype", "size", A.torch + " " + A.backend, B.torch + " " + B.backend, "ratio"];
      var tr = el("tr");
      head.forEach(function (x) { tr.appendChild(el("th", null, x)); });
      table.appendChild(el("thead")).appendChild(tr);
      var body = el("tbody");
      s[2].forEach(function (it) {
        var row = el("tr");
        var td = el("td");
        td.appendChild(opLink(it[0]));
        row.appendChild(td);
        row.appendChild(el("td", null, it[1]));
        if (s[3] === "cells") {
          [it[2], it[3]].forEach(function (o) { var c = el("td"); c.appendChild(el("span", { class: "o " + cls(o) }, o)); row.appendChild(c); });
        } else {
          row.appendChild(el("td", null, it[2]));
          row.appendChild(el("td", { class: "num", "data-sort": String(it[3]) }, fmtSeconds(it[3])));
          row.appendChild(el("td", { class: "num", "data-sort": String(it[4]) }, fmtSeconds(it[4])));
          row.appendChild(el("td", { class: "num", "data-sort": String(it[5]) }, it[5].toFixed(2) + "×"));
        }
        body.appendChild(row);
      });
      table.appendChild(body);
      box.appendChild(table);
      makeSortable(table);
    });
  }

  function diffPage(isStatic) {
    var idx = index();
    var sa = document.getElementById("diff-a"), sb = document.getElementById("diff-b");
    if (!sa) return;
    var keys = idx.envs.map(function (e) { return e.key; });
    if (isStatic) {
      var go = function () { location.href = "diff.html#a=" + sa.value + "&b=" + sb.value; };
      sa.addEventListener("change", go);
      sb.addEventListener("change", go);
      return;
    }
    var h = readHash();
    if (keys.indexOf(h.a) >= 0) sa.value = h.a;
    else if (keys.length > 1) sa.value = keys[keys.length - 2];
    if (keys.indexOf(h.b) >= 0) sb.value = h.b;
    var status = document.getElementById("diff-status");
    var box = document.getElementById("diff-out");
    var names = chunkNames(idx, null);
    idx.families.forEach(function (f) { if (f.timings) names.push(f.timings); });
    function run() {
      writeHash({ a: sa.value, b: sb.value });
      status.textContent = "loading…";
      load(names, function () {
        var ia = keys.indexOf(sa.value), ib = keys.indexOf(sb.value);
        renderDiff(idx, ia, ib, computeDiff(idx, ia, ib), box);
        status.textContent = ia === ib ? "the same environment on both sides" : "";
        box.setAttribute("data-ready", sa.value + ":" + sb.value);
      }, function (n) { status.textContent = "could not load data/" + n + ".js"; });
    }
    sa.addEventListener("change", run);
    sb.addEventListener("change", run);
    run();
  }


  /* ---- one op: op.html?op=<slug>, data from data/op/<slug>.js ---------------------------- */
  function num(x) {
    if (x === null || x === undefined) return "–";
    if (typeof x === "number" && !Number.isInteger(x)) return Number(x.toPrecision(3)).toString();
    return String(x);
  }
  function badge(o) { return el("span", { class: "o " + cls(o in (index()._rank) ? o : "unknown") }, o); }
  function table(head, rows, sortable) {
    var t = el("table", sortable ? { class: "sortable" } : null);
    var tr = el("tr");
    head.forEach(function (h) { tr.appendChild(el("th", h[1] ? { class: h[1] } : null, h[0])); });
    t.appendChild(el("thead")).appendChild(tr);
    var body = t.appendChild(el("tbody"));
    rows.forEach(function (cells) {
      var r = body.appendChild(el("tr"));
      cells.forEach(function (c) {
        var td = el("td", c && c.cls ? { class: c.cls } : null);
        if (c && c.sort !== undefined) td.setAttribute("data-sort", String(c.sort));
        var v = c && c.node !== undefined ? c.node : c && c.text !== undefined ? c.text : c;
        if (v instanceof Node) td.appendChild(v);
        else td.textContent = v === null || v === undefined ? "" : String(v);
        r.appendChild(td);
      });
    });
    if (sortable) makeSortable(t);
    return t;
  }
  function envNode(e) {
    var s = el("span");
    s.appendChild(el("span", { class: "env" }, "torch " + e.torch + " "));
    s.appendChild(el("span", { class: "dev" }, e.device || e.backend));
    return s;
  }
  function runOf(env, k) {
    var r = env.runs && env.runs[k];
    return r ? r[1] + " · " + r[0] + (r[2] && r[2] !== "finished" ? " (" + r[2] + ")" : "") : "";
  }
  function cutText(box, texts, i, what) {
    var t = texts[i];
    box.appendChild(el("pre", what === "script" ? { class: "script" } : null, t[0]));
    if (t[1]) box.appendChild(el("p", { class: "sub" }, "… " + t[1] + " more characters of this " + what + " are in the database."));
  }

  function opPage() {
    var idx = index();
    var page = document.getElementById("op-page");
    var status = document.getElementById("op-status");
    var slug = new URLSearchParams(location.search).get("op") || readHash().op;
    if (!slug || !/^[A-Za-z0-9_.-]+$/.test(slug)) { status.textContent = "No op named in the address (op.html?op=add.Tensor)."; return; }
    load(["op/" + slug], function () { renderOp(idx, D["op/" + slug], page); }, function () {
      status.textContent = "No op " + slug + " in this site.";
    });
  }

  function renderOp(idx, op, page) {
    page.textContent = "";
    document.title = op.qualname + " · conform";
    var envs = idx.envs;
    var crumbs = el("p", { class: "crumbs" });
    crumbs.appendChild(el("a", { href: root + "matrix.html#family=" + encodeURIComponent(op.family) }, op.family));
    crumbs.appendChild(document.createTextNode(" / " + op.variant + (op.tags.length ? " · tags: " + op.tags.join(", ") : "")));
    page.appendChild(crumbs);
    var h1 = page.appendChild(el("h1", { class: "opname" }, op.qualname));
    if (op.changed) h1.appendChild(el("span", { class: "changed-mark", title: "outcome differs between environments" }, " ▲ changed"));
    page.appendChild(el("pre", { class: "schema" }, op.schema || "(no schema recorded)"));

    page.appendChild(el("h2", null, "Declared kernels"));
    if (op.kernels.length) {
      page.appendChild(table([["environment"], ["dispatch keys with a kernel"], ["note"]], op.kernels.map(function (k) {
        return [{ node: envNode(envs[k[0]]), sort: k[0] }, k[1] === null ? "not in this torch's catalog" : k[1].join(", ") || "–", k[2]];
      }), true));
    } else page.appendChild(el("p", { class: "empty" }, "Not in the catalog of any measured environment."));
    if (op.declared.releases.length) {
      page.appendChild(el("h3", { id: "declared" }, "Declared by releases"));
      page.appendChild(el("p", { class: "sub" }, "From each release's native_functions.yaml: its own kernel for the dispatch key, a composite kernel, decomposition into other ops, or not available (see the Declared page)."));
      var HOW = { kernel: ["kernel", "o-pass"], structured_delegate: ["kernel (delegate)", "o-pass"], composite_explicit: ["composite kernel", "o-fallback"], composite_implicit: ["decomposes", "o-skipped"] };
      // consecutive releases that declare the same collapse into one row: "1.12.1 – 2.13.0"
      var spans = [];
      op.declared.releases.forEach(function (d) {
        var last = spans[spans.length - 1], same = last && JSON.stringify(last[1]) === JSON.stringify(d[1]);
        if (same) last[2] = d[0];
        else spans.push([d[0], d[1], d[0]]);
      });
      var dt = table([["torch"]].concat(op.declared.keys.map(function (k) { return [k]; })), spans.map(function (s) {
        var d = [s[0] === s[2] ? s[0] : s[0] + " – " + s[2], s[1]];
        if (d[1] === null) return [d[0]].concat(op.declared.keys.map(function () { return { node: el("span", { class: "sub" }, "not in this release") }; }));
        return [d[0]].concat(d[1].map(function (h) {
          var x = HOW[h];
          return { node: x ? el("span", { class: "o " + x[1] }, x[0]) : el("span", { class: "o o-untested" }, "–") };
        }));
      }));
      dt.className = "declared-op";
      page.appendChild(dt);
    }

    page.appendChild(el("h2", null, "Results"));
    var byCell = {};
    op.cells.forEach(function (c) { byCell[c[0] + "|" + c[1]] = c; });
    if (!op.cells.length) page.appendChild(el("p", { class: "empty" }, "No results for this op yet."));
    else {
      var legend = page.appendChild(el("div", { class: "legend" }));
      idx.outcomes.forEach(function (o) { legend.appendChild(badge(o)); legend.appendChild(document.createTextNode(" ")); });
      var grid = table([["environment"]].concat(op.dtypes.map(function (d) { return [d]; })), op.envs.map(function (ei) {
        return [{ node: envNode(envs[ei]) }].concat(op.dtypes.map(function (d) {
          var c = byCell[ei + "|" + d];
          if (!c) return { node: el("span", { class: "o o-untested" }, "–") };
          var box = el("span", { title: "from run " + runOf(envs[ei], c[16]) });
          box.appendChild(badge(c[2]));
          box.appendChild(el("div", { class: "sub" }, c[5] + "/" + c[4] + " ex" + (c[6] !== null ? " · abs " + num(c[6]) : "")));
          return { node: box };
        }));
      }));
      grid.className = "results";
      page.appendChild(el("div", { class: "scroll" })).appendChild(grid);
      page.appendChild(el("h3", null, "Details"));
      var head = [["environment"], ["dtype"], ["outcome"], ["phase"], ["examples", "num"], ["passed", "num"], ["max abs err", "num"], ["max rel err", "num"], ["max ulp", "num"], ["rtol / atol", "num"], ["device vs golden", "num"], ["CPU vs golden", "num"], ["time (s)", "num"], ["run"], ["message"]];
      var details = table(head, op.cells.map(function (c) {
        var msg = c[13] === null ? "" : op.texts[c[13]][0];
        return [{ node: envNode(envs[c[0]]), sort: c[0] }, c[1], { node: badge(c[2]), sort: idx._rank[c[2]] }, c[3], { text: c[4], cls: "num" }, { text: c[5], cls: "num" },
          { text: num(c[6]), sort: c[6] === null ? -1 : c[6], cls: "num" }, { text: num(c[7]), sort: c[7] === null ? -1 : c[7], cls: "num" }, { text: num(c[8]), sort: c[8] === null ? -1 : c[8], cls: "num" },
          { text: num(c[9]) + " / " + num(c[10]), cls: "num" }, { text: num(c[11]), cls: "num" }, { text: num(c[12]), cls: "num" }, { text: num(c[14]), sort: c[14], cls: "num" },
          { text: runOf(envs[c[0]], c[16]), sort: (envs[c[0]].runs[c[16]] || [])[1] || "" },
          { text: msg.length > 300 ? msg.slice(0, 300) + "… (see below)" : msg, cls: "msg" }];
      }), true);
      details.classList.add("details");
      page.appendChild(el("div", { class: "scroll" })).appendChild(details);
    }

    // findings: facts about the CPU reference or the case, never the device's failure
    var FINDING = { reference: "reference finding (the device agrees with the CPU; both deviate from float64)", cpu_wrong: "CPU wrong here (the device matches float64)", precision_edge: "precision edge (within the case's conditioning)" };
    var withFindings = op.cells.filter(function (c) { return c[17] && c[17].length; });
    if (withFindings.length) {
      page.appendChild(el("h2", null, "Findings"));
      withFindings.forEach(function (c) {
        c[17].forEach(function (f) {
          var sec = page.appendChild(el("section", { class: "finding finding-" + f[0] }));
          var h = sec.appendChild(el("h3", null, (FINDING[f[0]] || f[0]) + " · " + c[1] + " · " + f[1] + " on "));
          h.appendChild(envNode(envs[c[0]]));
          if (f[2] !== null) cutText(sec, op.texts, f[2], "message");
        });
      });
    }

    page.appendChild(el("h2", null, "Failing cases"));
    var failing = op.cells.filter(function (c) { return c[2] !== "pass"; });
    failing.sort(function (a, b) { return (idx._rank[a[2]] === undefined ? -1 : idx._rank[a[2]]) - (idx._rank[b[2]] === undefined ? -1 : idx._rank[b[2]]) || a[0] - b[0]; });
    if (!failing.length) page.appendChild(el("p", { class: "empty" }, "No failing or skipped cells."));
    failing.forEach(function (c) {
      var sec = page.appendChild(el("section", { class: "failure", id: "f-" + envs[c[0]].key + "-" + c[1] }));
      var h = sec.appendChild(el("h3"));
      h.appendChild(badge(c[2]));
      h.appendChild(document.createTextNode(" " + c[1] + " on "));
      h.appendChild(envNode(envs[c[0]]));
      if (c[3]) h.appendChild(el("span", { class: "sub" }, " (" + c[3] + ")"));
      if (c[18]) h.appendChild(el("span", { class: "sub skip-reason" }, " · skipped: " + ({ no_kernel: "no CPU kernel for this dtype", no_valid_case: "no valid case found", untestable: "untestable", internal_error: "conform internal error", reference_crash: "the CPU reference died or hung (not the device)" }[c[18]] || c[18])));
      h.appendChild(el("span", { class: "sub" }, " · run " + runOf(envs[c[0]], c[16])));
      if (c[13] !== null) cutText(sec, op.texts, c[13], "message");
      var f = c[15];
      if (f && f[0] !== null) {
        var repro = sec.appendChild(el("div", { class: "repro" }));
        var head = repro.appendChild(el("div", { class: "repro-head" }, "Reproduction script "));
        bindCopy(head.appendChild(el("button", { type: "button", class: "copy" }, "copy")));
        cutText(repro, op.texts, f[0], "script");
      } else if (c[2] !== "skipped") sec.appendChild(el("p", { class: "sub" }, "No minimal case was recorded for this cell."));
      [[f && f[2], "minimal case (JSON)", "case"], [f && f[1], "traceback", "traceback"]].forEach(function (x) {
        if (x[0] === null || x[0] === undefined) return;
        var d = sec.appendChild(el("details"));
        d.appendChild(el("summary", null, x[1]));
        cutText(d, op.texts, x[0], x[2]);
      });
      // failures of other kinds the cell found after its verdict, each with its own script
      ((f && f[3]) || []).forEach(function (m) {
        var more = sec.appendChild(el("div", { class: "further" }));
        var mh = more.appendChild(el("h4"));
        mh.appendChild(el("span", { class: "sub" }, "further failure: "));
        mh.appendChild(badge(m[0]));
        if (m[1]) mh.appendChild(el("span", { class: "sub" }, " (" + m[1] + ")"));
        if (m[2] !== null) cutText(more, op.texts, m[2], "message");
        if (m[3] !== null) {
          var d = more.appendChild(el("details", { class: "repro" }));
          var s = d.appendChild(el("summary", { class: "repro-head" }, "reproduction script "));
          bindCopy(s.appendChild(el("button", { type: "button", class: "copy" }, "copy")));
          cutText(d, op.texts, m[3], "script");
        }
      });
    });

    page.appendChild(el("h2", null, "Timings"));
    if (!op.timings.length) {
      page.appendChild(el("p", { class: "empty" }, idx.has_timings ? "No timings for this op." : "No timings in this database (timing is a separate serial pass: conform bench)."));
    } else {
      var charts = page.appendChild(el("div", { class: "charts" }));
      op.charts.forEach(function (svg) {
        // drawn by conform at build time, every label escaped there
        var holder = el("div");
        holder.innerHTML = svg;
        charts.appendChild(holder);
      });
      page.appendChild(table([["environment"], ["dtype"], ["size"], ["shape"], ["elements", "num"], ["device median", "num"], ["CPU median", "num"], ["speedup", "num"]], op.timings.map(function (t) {
        return [{ node: envNode(envs[t[0]]), sort: t[0] }, t[1], t[2], (t[3] || []).join("×"), { text: t[4].toLocaleString("en-US"), sort: t[4], cls: "num" },
          { text: t[5] ? fmtSeconds(t[5]) : "–", sort: t[5] || 0, cls: "num" }, { text: t[6] ? fmtSeconds(t[6]) : "–", sort: t[6] || 0, cls: "num" },
          { text: t[7] ? t[7].toFixed(2) + "×" : t[8] || "–", sort: t[7] || 1, cls: "num" }];
      }), true));
    }
    if (op.models && op.models.length) {
      page.appendChild(el("h2", null, "Models using it"));
      page.appendChild(table([["model"], ["outcome in the model"], ["environment"]], op.models.map(function (m) {
        return [{ node: el("a", { href: "models/" + m[3] + ".html" }, m[0]), sort: m[0] }, m[1], m[2]];
      }), true));
    }
    page.setAttribute("data-ready", "1");
  }

  window.Conform = { opPage: opPage, matrix: matrix, diffPage: diffPage, load: load, computeDiff: computeDiff };
})();
