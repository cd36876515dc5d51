// fenced dashboard: reads /ui/api/events, a Server-Sent Events stream of
// this node's view, with fetch (so that a bearer token can go in the
// Authorization header, never in the URL), and renders each view.
"use strict";

const $ = (id) => document.getElementById(id);
let controller = null;
let timeline = []; // newest first, at most 200
let lastView = null;

function token() { return sessionStorage.getItem("fenced-token") || ""; }

function dur(ms) {
  if (ms === null || ms === undefined) return "–";
  if (ms < 1000) return ms + "ms";
  const s = ms / 1000;
  if (s < 120) return s.toFixed(1) + "s";
  const m = Math.floor(s / 60);
  if (m < 120) return m + "m" + Math.floor(s % 60) + "s";
  return Math.floor(m / 60) + "h" + (m % 60) + "m";
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  return e;
}

function fill(tableId, rows, cols) {
  const body = $(tableId).querySelector("tbody");
  body.replaceChildren(...(rows.length ? rows : [el("tr", { class: "empty" }, el("td", { colspan: cols }, "none"))]));
}

function render(v) {
  lastView = v;
  $("node").textContent = "node " + v.node + (v.prefix ? " · prefix " + v.prefix : "");
  const c = v.cluster;
  $("cluster-summary").replaceChildren(
    "leader ", el("b", { id: "leader" }, c.leader || "none"),
    " · term ", el("b", {}, c.term),
    " · commit index ", el("b", {}, c.commit_index),
    " · applied index ", el("b", {}, c.applied_index),
    " · last token ", el("b", { id: "last-token" }, c.last_token),
    " · issuer ", el("span", { class: "mono" }, c.issuer || "–"),
    c.error ? el("span", { class: "bad" }, " · " + c.error) : "");
  fill("members", (c.members || []).map((m) => el("tr", { "data-member": m.id },
    el("td", { class: "mono" }, m.id + (m.voter ? "" : " (non-voter)")),
    el("td", {}, m.role),
    el("td", { class: "state " + (m.up ? "ok" : "bad") }, m.up ? "up" : "down"),
    el("td", {}, m.up ? m.applied_index : "–"),
    el("td", { class: m.lag > 0 ? "warn" : "" }, m.up ? m.lag : "–"),
    el("td", { class: "mono" }, m.api_addr || "–"),
    el("td", { class: "mono" }, m.peer_addr))), 7);

  const locks = v.locks || [];
  $("lock-count").textContent = "(" + locks.length + ")";
  fill("locks", locks.map((l) => el("tr", { "data-lock": l.name },
    el("td", { class: "name" }, l.name),
    el("td", { class: "holder" }, l.holder ? l.holder.session : "free"),
    el("td", { class: "token mono" }, l.holder ? l.holder.token : "–"),
    el("td", {}, l.holder ? dur(l.holder.held_ms) : "–"),
    el("td", { class: "waiters" }, (l.waiters || []).join(", ") || "–"),
    el("td", {}, l.delay_pending ? el("span", { class: "warn" }, "pending " + dur(l.delay_length_ms) + " after token " + l.delay_after)
      : (l.lock_delay_ms ? dur(l.lock_delay_ms) : "–")))), 6);

  const sems = v.semaphores || [];
  fill("semaphores", sems.map((s) => el("tr", { "data-semaphore": s.name },
    el("td", { class: "name" }, s.name),
    el("td", {}, s.capacity),
    el("td", { class: "mono" }, (s.permits || []).map((p) => p.slot + ": " + p.session + "/" + p.token).join(", ") || "–"),
    el("td", {}, (s.waiters || []).map((w) => w.session + (w.permits > 1 ? "×" + w.permits : "")).join(", ") || "–"))), 4);

  const rws = v.rwlocks || [];
  fill("rwlocks", rws.map((r) => el("tr", { "data-rwlock": r.name },
    el("td", { class: "name" }, r.name),
    el("td", { class: "mono" }, r.writer ? r.writer.session + "/" + r.writer.token : "–"),
    el("td", { class: "mono" }, (r.readers || []).map((g) => g.session + "/" + g.token).join(", ") || "–"),
    el("td", {}, (r.waiters || []).map((w) => w.session + " " + w.mode).join(", ") || "–"))), 4);

  const els = v.elections || [];
  fill("elections", els.map((e) => el("tr", { "data-election": e.name },
    el("td", { class: "name" }, e.name),
    el("td", {}, e.leader ? e.leader.session : "none"),
    el("td", { class: "mono" }, e.leader ? e.leader.token : "–"),
    el("td", { class: "mono" }, e.value || ""),
    el("td", {}, (e.candidates || []).join(", ") || "–"),
    el("td", {}, e.revision))), 6);

  const ss = v.sessions || [];
  $("session-count").textContent = "(" + ss.length + ")";
  fill("sessions", ss.map((s) => el("tr", { "data-session": s.id },
    el("td", {}, s.id),
    el("td", {}, dur(s.ttl_ms)),
    el("td", {}, s.since_renewal_ms === null ? "– (follower)" : dur(s.since_renewal_ms)),
    el("td", { class: "mono" }, (s.held || []).join(", ") || "–"),
    el("td", { class: "mono" }, (s.waiting || []).join(", ") || "–"))), 5);

  for (const e of v.timeline || []) timeline.unshift(e);
  timeline = timeline.slice(0, 200);
  $("timeline").replaceChildren(...timeline.map((e) => {
    const t = new Date(e.at_ms).toISOString().slice(11, 23);
    let text;
    if (e.event === "grant") text = "grant   " + e.kind + " " + e.name + " → session " + e.session + ", token " + e.token;
    else if (e.event === "release") text = "end     " + e.kind + " " + e.name + " token " + e.token + " (" + e.reason + ", session " + e.session + ")";
    else text = "expiry  session " + e.session;
    return el("li", { class: "ev-" + (e.reason === "revoked" ? "revoked" : e.event) }, t + "  " + text);
  }));
  const notes = [];
  if (v.hidden) notes.push(v.hidden + " objects or sessions hidden: your token may not read them.");
  if (v.truncated) notes.push("Some lists were cut at the server's --ui-max-items; narrow the prefix.");
  $("notes").textContent = notes.join(" ");
}

function setConn(text, cls) { const c = $("conn"); c.textContent = text; c.className = "badge " + (cls || ""); }

async function connect() {
  if (controller) controller.abort();
  controller = new AbortController();
  const signal = controller.signal;
  const prefix = $("prefix").value;
  timeline = [];
  const headers = { Accept: "text/event-stream" };
  if (token()) headers.Authorization = "Bearer " + token();
  let resp;
  try {
    resp = await fetch("/ui/api/events?prefix=" + encodeURIComponent(prefix), { headers, signal, cache: "no-store" });
  } catch (e) {
    if (signal.aborted) return;
    return retry("cannot reach this member");
  }
  if (resp.status === 401 || resp.status === 403) {
    $("auth").hidden = false;
    $("auth-error").textContent = token() ? "refused: " + (await resp.text()).slice(0, 300) : "";
    setConn("needs a token", "down");
    return;
  }
  if (!resp.ok) return retry("HTTP " + resp.status);
  $("auth").hidden = true;
  setConn("live", "live");
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (data) render(JSON.parse(data));
      }
    }
  } catch (e) {
    if (signal.aborted) return;
  }
  retry("stream ended");
}

let retryTimer = null;
function retry(why) {
  setConn("disconnected: " + why + "; reconnecting", "down");
  clearTimeout(retryTimer);
  retryTimer = setTimeout(connect, 1000);
}

$("search").addEventListener("submit", (e) => { e.preventDefault(); connect(); });
let typing = null;
$("prefix").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(connect, 250); });
$("auth-form").addEventListener("submit", (e) => {
  e.preventDefault();
  sessionStorage.setItem("fenced-token", $("token").value.trim());
  $("token").value = "";
  connect();
});
connect();
