// kafka-sim web console: draws the page's snapshot (embedded in the page, then one per second
// from /console/events) with plain DOM and inline SVG; buttons call the control API's routes.
"use strict";
(() => {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const PAGE = document.body.dataset.page;
  const HISTORY_MS = 60_000;
  const MAX_DRAWN = 400; // partitions drawn at most: beyond that, a topic at a time
  const TOPIC = new URLSearchParams(location.search).get("topic");
  const live = document.getElementById("live");
  const controls = document.getElementById("controls");
  const statusLine = document.getElementById("status");
  const pending = new Set(); // actions under way: their buttons stay disabled
  const ui = { showInternal: false };
  let last = null; // the last snapshot drawn

  // --- building nodes (text always as text nodes: names come from clients) -------------------
  function build(el, attrs, kids) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
      else if (key === "data") for (const [k, v] of Object.entries(value)) el.dataset[k] = v;
      else el.setAttribute(key, value === true ? "" : String(value));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return el;
  }
  const h = (tag, attrs, ...kids) => build(document.createElement(tag), attrs, kids);
  const s = (tag, attrs, ...kids) => build(document.createElementNS(SVG_NS, tag), attrs, kids);

  const badge = (text, kind) => h("span", { class: `badge ${kind}` }, text);
  const card = (label, value, data) => h("div", { class: "card", data },
    h("div", { class: "label" }, label), h("div", { class: "value" }, value));
  const table = (heads, rows) => h("table", {},
    h("thead", {}, h("tr", {}, heads.map((x) => h("th", {}, x)))), h("tbody", {}, rows));
  const num = (value, data) => h("td", { class: "num", data }, value ?? "–");
  const failed = (section) => section && !Array.isArray(section) && section.error;
  const sectionError = (section) => h("p", { class: "error" }, `could not read: ${section.error}`);
  const duration = (ms) => (ms < 1000 ? `${ms} ms` : ms < 60_000 ? `${+(ms / 1000).toFixed(1)} s`
    : ms < 3_600_000 ? `${+(ms / 60_000).toFixed(1)} min` : `${+(ms / 3_600_000).toFixed(1)} h`);
  const pills = (states, current) => h("div", { class: "pills" },
    states.map((x) => h("span", { class: x === current ? "pill on" : "pill" }, x)),
    states.includes(current) ? null : h("span", { class: "pill on" }, current));

  // --- control actions -----------------------------------------------------------------------
  function toast(text, bad) {
    const el = document.getElementById("toast");
    el.textContent = text;
    el.className = bad ? "show bad" : "show";
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { el.className = ""; }, 5000);
  }

  async function act(key, question, method, path, body) {
    if (!window.confirm(question)) return;
    pending.add(key);
    redraw();
    try {
      const response = await fetch(path, {
        method, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body || {}),
      });
      const answer = await response.json().catch(() => ({}));
      if (response.ok) toast(`${method} ${path}: done`);
      else toast(`${method} ${path}: ${answer.error || response.status}`, true);
    } catch (err) {
      toast(`${method} ${path}: ${err}`, true);
    } finally {
      pending.delete(key);
      redraw();
      connect(); // a fresh stream starts with a snapshot: the action's effect shows at once
    }
  }

  function button(label, key, question, method, path, body, danger) {
    return h("button", {
      class: danger ? "danger" : null, disabled: pending.has(key), data: { action: key },
      onclick: () => act(key, question, method, path, body),
    }, pending.has(key) ? `${label}…` : label);
  }

  // --- pages ---------------------------------------------------------------------------------
  function clusterPage(snap) {
    const brokers = snap.brokers;
    if (failed(brokers)) return sectionError(brokers);
    const controller = brokers.find((b) => b.controller);
    const epoch = Math.max(0, ...brokers.map((b) => b.controller_epoch ?? 0));
    const alive = brokers.filter((b) => b.alive).length;
    const rows = brokers.map((b) => h("tr", { data: { broker: b.id, alive: b.alive } },
      num(b.id),
      h("td", { class: "mono" }, `${b.host}:${b.port}`),
      h("td", {}, b.alive ? badge("alive", "ok") : badge("stopped", "bad")),
      h("td", {}, b.controller ? badge(`controller · epoch ${b.controller_epoch}`, "info") : ""),
      h("td", {},
        b.alive
          ? button("Stop", `stop-${b.id}`, `Stop broker ${b.id}? Its leaderships move to other replicas.`,
            "POST", `/brokers/${b.id}/stop`, null, true)
          : button("Start", `start-${b.id}`, `Start broker ${b.id}?`, "POST", `/brokers/${b.id}/start`),
        button("Pause replication", `pause-${b.id}`,
          `Pause broker ${b.id}'s replica fetchers? It falls out of the ISR after replica.lag.time.max.ms.`,
          "POST", `/replication/${b.id}/pause`, null, true),
        button("Resume replication", `resume-${b.id}`, `Resume broker ${b.id}'s replica fetchers?`,
          "POST", `/replication/${b.id}/resume`))));
    const faults = snap.faults;
    const loop = snap.event_loop;
    return [
      h("div", { class: "cards" },
        card("brokers alive", `${alive} / ${brokers.length}`, { card: "alive" }),
        card("controller", controller ? `broker ${controller.id}` : "none", { card: "controller" }),
        card("controller epoch", epoch, { card: "epoch" }),
        card("event-loop lag (1 min)", failed(loop) || !loop ? "?"
          : `max ${loop.lag_max_ms.toFixed(1)} ms · p99 ${loop.lag_p99_ms.toFixed(1)} ms`,
          { card: "loop-lag" })),
      h("h2", {}, "Brokers"),
      table(["#", "address", "state", "controller", "actions"], rows),
      h("p", {}, button("Elect preferred leaders", "elect",
        "Move every partition's leadership to its preferred replica (the first in its assignment)?",
        "POST", "/leaders/preferred")),
      h("h2", {}, "Faults"),
      failed(faults) ? sectionError(faults)
        : faults.length === 0 ? h("p", { class: "muted" }, "No faults armed.")
          : [table(["id", "broker", "api", "partition", "action", "remaining", "hits", ""],
            faults.map((f) => h("tr", { data: { fault: f.id } }, num(f.id), num(f.broker), h("td", {}, f.api),
              h("td", {}, f.partition ?? "any"),
              h("td", {}, f.action === "error" ? `error ${f.error_name}` : f.action === "delay" ? `delay ${f.delay_ms} ms` : f.action),
              num(f.remaining ?? "∞"), num(f.hits),
              h("td", {}, button("Clear", `clear-${f.id}`, `Clear fault ${f.id}?`, "DELETE", `/faults?id=${f.id}`))))),
          h("p", {}, button("Clear all faults", "clear-all", "Clear every fault?", "DELETE", "/faults", null, true))],
    ];
  }

  function faultForm(snap) {
    const ids = Array.isArray(snap.brokers) ? snap.brokers.map((b) => b.id) : [];
    const form = h("form", { class: "inline panel", id: "fault-form" },
      h("label", {}, "broker", h("select", { name: "broker" }, ids.map((id) => h("option", { value: id }, id)))),
      h("label", {}, "api", h("input", { name: "api", value: "Produce", size: 12 })),
      h("label", {}, "partition (topic:n)", h("input", { name: "partition", size: 12 })),
      h("label", {}, "error", h("input", { name: "error", placeholder: "NOT_LEADER_OR_FOLLOWER", size: 22 })),
      h("label", {}, "delay ms", h("input", { name: "delay_ms", type: "number", min: 0 })),
      h("label", {}, "count", h("input", { name: "count", type: "number", min: 1 })),
      h("label", { class: "check" }, h("input", { name: "drop_response", type: "checkbox" }), "drop response"),
      h("label", { class: "check" }, h("input", { name: "disconnect", type: "checkbox" }), "disconnect"),
      h("button", { type: "submit" }, "Add fault"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const body = { broker: Number(data.get("broker")), api: data.get("api") };
      for (const name of ["partition", "error"]) if (data.get(name)) body[name] = data.get(name);
      for (const name of ["delay_ms", "count"]) if (data.get(name)) body[name] = Number(data.get(name));
      for (const name of ["drop_response", "disconnect"]) if (data.get(name)) body[name] = true;
      act("add-fault", `Add this fault to broker ${body.broker}?\n${JSON.stringify(body)}`, "POST", "/faults", body);
    });
    return [h("h2", {}, "Add a fault"), form];
  }

  function replicaBars(p) {
    const states = p.replicas_state || [];
    const top = Math.max(1, ...states.map((r) => r.log_end_offset));
    const width = 260;
    return h("div", {}, states.map((r) => {
      const inIsr = p.isr.includes(r.broker);
      const known = r.log_end_offset >= 0; // a stopped broker's replica: the leader knows nothing
      const leo = known ? Math.round((r.log_end_offset / top) * width) : 0;
      const hw = known ? Math.round(((r.high_watermark ?? 0) / top) * width) : 0;
      const words = known ? `LEO ${r.log_end_offset} · HW ${r.high_watermark} · lag ${r.lag}` : "not fetching (offline?)";
      return h("div", {
        class: "replica",
        data: { broker: r.broker, leo: r.log_end_offset, hw: r.high_watermark, lag: r.lag, isr: inIsr },
      }, s("svg", { width: width + 280, height: 16, role: "img" },
        s("rect", { class: "track", x: 24, y: 3, width, height: 10, rx: 2 }),
        s("rect", { class: inIsr ? "leo" : "leo out", x: 24, y: 3, width: leo, height: 10, rx: 2 }),
        known ? s("line", { class: "hw", x1: 24 + hw, x2: 24 + hw, y1: 0, y2: 16 }) : null,
        s("text", { x: 0, y: 12 }, `b${r.broker}`),
        s("text", { x: width + 32, y: 12 }, `${words}${r.broker === p.leader ? " · leader" : ""}`)));
    }));
  }

  function partitionsPage(snap) {
    const parts = snap.partitions;
    if (failed(parts)) return sectionError(parts);
    const visible = parts.filter((p) => TOPIC || ui.showInternal || !p.topic.startsWith("__"));
    const shown = visible.slice(0, MAX_DRAWN);
    const topics = [...new Set(shown.map((p) => p.topic))].sort();
    const hidden = parts.length - visible.length;
    const internal = h("label", {}, h("input", {
      type: "checkbox", checked: ui.showInternal, onchange: (e) => { ui.showInternal = e.target.checked; redraw(); },
    }), " show internal topics");
    return [
      h("p", { class: "legend" }, internal, " ", h("span", {}, h("span", { class: "sw leo" }), "log end offset (LEO)"),
        h("span", {}, h("span", { class: "sw hw" }), "high watermark (HW)"),
        h("span", {}, h("span", { class: "sw out" }), "out of the ISR"),
        hidden ? h("span", { class: "muted" }, `${hidden} internal partitions hidden`) : null,
        TOPIC ? h("a", { href: location.pathname }, "all topics") : null),
      visible.length > shown.length ? h("p", { class: "muted" },
        `Drawing the first ${shown.length} of ${visible.length} partitions: pick a topic to see the rest.`) : null,
      topics.length === 0 ? h("p", { class: "muted" }, "No topics yet.") : null,
      topics.map((topic) => [h("h2", {}, h("a", { href: `?topic=${encodeURIComponent(topic)}` }, topic)), table(
        ["partition", "state", "leader", "leader epoch", "ISR", "replicas", "LSO", "LEO / HW per replica"],
        shown.filter((p) => p.topic === topic).map((p) => {
          const leaderState = (p.replicas_state || []).find((r) => r.broker === p.leader);
          const moving = (p.adding_replicas || []).length || (p.removing_replicas || []).length;
          return h("tr", { data: { topic: p.topic, partition: p.partition, leader: p.leader } },
            num(p.partition),
            stateCell(p),
            h("td", {}, p.leader >= 0 ? `broker ${p.leader}` : badge("offline", "bad")),
            num(p.leader_epoch),
            h("td", {}, p.isr.join(", "), p.isr.length < p.replicas.length ? [" ", badge("under-replicated", "warn")] : null),
            h("td", {}, p.replicas.join(", "),
              moving ? [" ", badge(`+${(p.adding_replicas || []).join(",")} −${(p.removing_replicas || []).join(",")}`, "info")] : null),
            num(leaderState?.last_stable_offset),
            h("td", {}, replicaBars(p)));
        }))]),
    ];
  }

  // The controller's partition state machine (its last transitions as the tooltip) and the replicas
  // not OnlineReplica; absent where this control API is not the controller's (multi-process).
  function stateCell(p) {
    if (!p.state) return h("td", { class: "muted" }, "—");
    const transitions = (p.transitions || []).map((t) => `${t.from} → ${t.to}: ${t.reason}`).join("\n");
    const replicas = Object.entries(p.replica_states || {}).filter(([, s]) => s !== "OnlineReplica");
    return h("td", { title: transitions, data: { state: p.state } },
      badge(p.state.replace("Partition", ""), p.state === "OnlinePartition" ? "ok" : "bad"),
      replicas.map(([broker, s]) => [" ", badge(`${broker}: ${s.replace("Replica", "")}`, "warn")]));
  }

  // Purgatory history, per broker and purgatory, kept in the tab across page changes.
  const history = JSON.parse(sessionStorage.getItem("kafka-sim-purgatory") || "{}");
  function record(snap) {
    const brokers = snap.purgatory && snap.purgatory.brokers;
    if (!brokers) return;
    for (const [id, purgatories] of Object.entries(brokers)) {
      for (const [name, stats] of Object.entries(purgatories)) {
        const key = `${id}/${name}`;
        const series = (history[key] = history[key] || []);
        if (series.length && series[series.length - 1].t >= snap.time_ms) continue;
        series.push({ t: snap.time_ms, w: stats.watched ?? 0, d: stats.delayed ?? 0 });
      }
    }
    for (const series of Object.values(history)) {
      while (series.length && series[0].t < snap.time_ms - HISTORY_MS) series.shift();
    }
    sessionStorage.setItem("kafka-sim-purgatory", JSON.stringify(history));
  }

  function sparkline(series, now) {
    const width = 160, height = 28;
    const top = Math.max(1, ...series.map((p) => Math.max(p.w, p.d)));
    const x = (t) => width - ((now - t) / HISTORY_MS) * width;
    const y = (v) => height - 2 - (v / top) * (height - 4);
    const line = (key) => series.map((p) => `${x(p.t).toFixed(1)},${y(p[key]).toFixed(1)}`).join(" ");
    return s("svg", { width, height, class: "spark", role: "img" },
      s("rect", { class: "track", x: 0, y: 0, width, height }),
      series.length > 1 ? [s("polyline", { class: "spark-watched", points: line("w") }),
        s("polyline", { class: "spark-delayed", points: line("d") })] : null,
      s("text", { x: 2, y: 10 }, top));
  }

  function purgatoryPage(snap) {
    const purgatory = snap.purgatory;
    if (failed(purgatory)) return sectionError(purgatory);
    const ids = Object.keys(purgatory.brokers).sort((a, b) => a - b);
    return [
      h("p", { class: "legend" }, h("span", {}, h("span", { class: "sw watched" }), "watched (operations × keys)"),
        h("span", {}, h("span", { class: "sw delayed" }), "delayed (waiting operations)"),
        h("span", { class: "muted" }, "last minute, sampled each second")),
      ids.length === 0 ? h("p", { class: "muted" }, "No broker is running.") : null,
      h("div", { class: "grid wide" }, ids.map((id) => h("div", { class: "panel", data: { broker: id } },
        h("h3", {}, `Broker ${id}`),
        table(["purgatory", "watched", "delayed", "completed", "expired", "last minute"],
          Object.entries(purgatory.brokers[id]).map(([name, stats]) => h("tr", { data: { purgatory: name } },
            h("td", {}, stats.name || name), num(stats.watched, { watched: stats.watched ?? 0 }),
            num(stats.delayed, { delayed: stats.delayed ?? 0 }), num(stats.completed), num(stats.expired),
            h("td", {}, sparkline(history[`${id}/${name}`] || [], snap.time_ms)))))))),
    ];
  }

  function annulus(cx, cy, r0, r1, a0, a1) {
    const pt = (r, a) => `${(cx + r * Math.sin(a)).toFixed(2)},${(cy - r * Math.cos(a)).toFixed(2)}`;
    return `M${pt(r1, a0)} A${r1},${r1} 0 0 1 ${pt(r1, a1)} L${pt(r0, a1)} A${r0},${r0} 0 0 0 ${pt(r0, a0)} Z`;
  }

  function wheel(level) {
    const size = level.wheel_size || (level.buckets || []).length || 1;
    const buckets = level.buckets || [];
    const top = Math.max(1, ...buckets);
    const cx = 110, cy = 110, r0 = 58, r1 = 96;
    const step = (2 * Math.PI) / size;
    const hand = (level.current_bucket + 0.5) * step;
    return s("svg", { width: 220, height: 220, role: "img", data: { level: level.level } },
      buckets.map((count, i) => {
        const shade = count ? 0.25 + 0.75 * (count / top) : 0;
        const path = s("path", {
          class: "bucket", d: annulus(cx, cy, r0, r1, i * step, (i + 1) * step),
          fill: count ? `rgba(47,111,222,${shade.toFixed(2)})` : "#eef1f6", data: { bucket: i, tasks: count },
        }, s("title", {}, `bucket ${i}: ${count} task${count === 1 ? "" : "s"}`));
        const mid = (i + 0.5) * step, rt = (r0 + r1) / 2;
        return [path, count ? s("text", {
          x: (cx + rt * Math.sin(mid)).toFixed(1), y: (cy - rt * Math.cos(mid) + 4).toFixed(1), "text-anchor": "middle",
        }, count) : null];
      }),
      s("line", {
        class: "hand", x1: (cx + (r0 - 10) * Math.sin(hand)).toFixed(1), y1: (cy - (r0 - 10) * Math.cos(hand)).toFixed(1),
        x2: (cx + (r1 + 10) * Math.sin(hand)).toFixed(1), y2: (cy - (r1 + 10) * Math.cos(hand)).toFixed(1),
      }),
      s("text", { x: cx, y: cy - 8, "text-anchor": "middle" }, `level ${level.level}`),
      s("text", { x: cx, y: cy + 8, "text-anchor": "middle" }, `${duration(level.tick_ms)} × ${size}`),
      s("text", { x: cx, y: cy + 24, "text-anchor": "middle" }, `${level.tasks} task${level.tasks === 1 ? "" : "s"}`));
  }

  function timerPage(snap) {
    const purgatory = snap.purgatory;
    if (failed(purgatory)) return sectionError(purgatory);
    const timer = purgatory.timer || {};
    const next = timer.next_expiration_ms;
    const due = next === null || next === undefined ? "none" : `in ${duration(Math.max(0, next - timer.now_ms))}`;
    return [
      h("div", { class: "cards" },
        card("tasks on the wheel", timer.size ?? "–", { card: "size" }),
        card("reaper's next deadline", due, { card: "next" }),
        card("queued buckets", timer.heap_entries ?? "–"),
        card("bucket queue pushes", timer.heap_pushes ?? "–"),
        card("task errors", timer.task_errors ?? "–")),
      h("p", { class: "muted" }, "Each ring is one level of the hierarchical timing wheel: a bucket per tick, "
        + "shaded by its task count; the red hand is the level's current time. A task due beyond a level's "
        + "interval waits on the next level and moves down as time reaches its bucket."),
      h("div", { class: "grid" }, (timer.levels || []).map((level) => h("div", { class: "panel" },
        h("h3", {}, `Level ${level.level}: ${duration(level.tick_ms)} buckets, ${duration(level.interval_ms)} around`),
        wheel(level),
        h("div", { class: "muted" }, `${level.occupied_buckets} occupied bucket${level.occupied_buckets === 1 ? "" : "s"}`)))),
    ];
  }

  const GROUP_STATES = ["Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"];
  const SHARE_GROUP_STATES = ["Empty", "Stable", "Dead"];
  function assignmentText(assignment) {
    if (typeof assignment === "string") return assignment || "–";
    const parts = Object.entries(assignment || {}).map(([topic, ps]) => `${topic} [${ps.join(", ")}]`);
    return parts.length ? parts.join("; ") : "–";
  }

  function groupsPage(snap) {
    const groups = snap.groups;
    if (failed(groups)) return sectionError(groups);
    if (groups.length === 0) return h("p", { class: "muted" }, "No groups yet.");
    return groups.map((g) => h("div", { class: "panel", data: { group: g.group, state: g.state } },
      h("h2", {}, g.group),
      h("p", {}, `coordinator: broker ${g.coordinator} · generation ${g.generation} · `
        + `protocol ${g.protocol_type || "–"}/${g.protocol || "–"}`),
      pills(g.type === "share" ? SHARE_GROUP_STATES : GROUP_STATES, g.state),
      h("h3", {}, `Members (${g.members.length})`),
      g.members.length === 0 ? h("p", { class: "muted" }, "none") : table(["member", "client", "host", "session ms", "assignment"],
        g.members.map((m) => h("tr", {},
          h("td", { class: "mono" }, m.member_id, m.member_id === g.leader ? [" ", badge("leader", "info")] : null),
          h("td", {}, m.client_id), h("td", {}, m.client_host), num(m.session_timeout_ms),
          h("td", {}, assignmentText(m.assignment))))),
      g.type === "share" ? sharePartitions(g.share_partitions || []) : [
        h("h3", {}, "Committed offsets"),
        g.offsets.length === 0 ? h("p", { class: "muted" }, "none") : table(["topic", "partition", "committed offset", "high watermark", "lag"],
          g.offsets.map((o) => h("tr", {}, h("td", {}, o.topic), num(o.partition), num(o.committed_offset),
            num(o.high_watermark), num(o.lag, { lag: o.lag ?? "" }))))]));
  }

  // A share group's partitions at their leaders: the start offset, and the records in flight
  // with their state, delivery count, holder and how long their acquisition lock has left.
  function sharePartitions(partitions) {
    const inFlight = (r) => `${r.first_offset === r.last_offset ? r.first_offset : `${r.first_offset}–${r.last_offset}`} `
      + `${r.state.toLowerCase()} ×${r.delivery_count}`
      + (r.member_id ? ` by ${r.member_id} (lock ${duration(r.lock_expires_in_ms)})` : "");
    return [
      h("h3", {}, "Share partitions"),
      partitions.length === 0 ? h("p", { class: "muted" }, "none fetched yet") : table(["topic", "partition", "leader", "start offset", "next offset", "records in flight"],
        partitions.map((p) => h("tr", { data: { sharePartition: `${p.topic}-${p.partition}`, acquired: p.in_flight.filter((r) => r.state === "ACQUIRED").reduce((n, r) => n + r.last_offset - r.first_offset + 1, 0) } },
          h("td", {}, p.topic), num(p.partition), num(p.leader), num(p.start_offset), num(p.next_offset),
          h("td", { class: "mono" }, p.in_flight.length ? p.in_flight.map(inFlight).join("; ") : "–")))),
    ];
  }

  const TXN_STATES = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Dead"];
  function transactionsPage(snap) {
    const txns = snap.transactions;
    if (failed(txns)) return sectionError(txns);
    if (txns.length === 0) return h("p", { class: "muted" }, "No transactional ids yet.");
    const when = (ms) => (ms > 0 ? new Date(ms).toLocaleTimeString() : "–");
    return table(["transactional id", "coordinator", "state", "producer id", "epoch", "timeout ms", "started", "partitions"],
      txns.map((t) => h("tr", { data: { txn: t.transactional_id, state: t.state } },
        h("td", { class: "mono" }, t.transactional_id), num(t.coordinator),
        h("td", {}, pills(TXN_STATES, t.state), t.pending_state ? h("div", { class: "muted" }, `→ ${t.pending_state}`) : null),
        num(t.producer_id), num(t.producer_epoch), num(t.timeout_ms), h("td", {}, when(t.start_timestamp)),
        h("td", {}, t.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ") || "–"))));
  }

  const PAGES = {
    cluster: [clusterPage, faultForm],
    partitions: [partitionsPage, null],
    purgatory: [purgatoryPage, null],
    timer: [timerPage, null],
    groups: [groupsPage, null],
    transactions: [transactionsPage, null],
  };
  const [drawPage, drawControls] = PAGES[PAGE];

  function redraw() {
    if (!last) return;
    try {
      live.replaceChildren(...[drawPage(last)].flat(Infinity).filter(Boolean));
    } catch (err) { // say so on the page, and keep listening: the next snapshot may draw
      live.replaceChildren(h("p", { class: "error" }, `could not draw this snapshot: ${err}`));
    }
    document.body.dataset.renders = Number(document.body.dataset.renders) + 1;
  }

  function show(snap) {
    last = snap;
    record(snap);
    redraw();
    statusLine.textContent = `live · ${new Date(snap.time_ms).toLocaleTimeString()}`;
    statusLine.className = "status live";
  }

  const first = JSON.parse(document.getElementById("snapshot").textContent);
  if (drawControls) controls.replaceChildren(...[drawControls(first)].flat(Infinity));
  show(first);
  const query = new URLSearchParams({ page: PAGE });
  if (TOPIC) query.set("topic", TOPIC);
  let events = null;
  function connect() {
    if (events) events.close();
    events = new EventSource(`/console/events?${query}`);
    events.onmessage = (event) => show(JSON.parse(event.data));
    events.onerror = () => {
      statusLine.textContent = "disconnected · retrying";
      statusLine.className = "status down";
    };
  }
  connect();
})();
