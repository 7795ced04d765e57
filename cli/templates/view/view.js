// rollout-ledger view: the panel beside the list, and live counts while a
// writer works. Plain script, no library; it fetches from this server only.
"use strict";

function fmt(value) {
  if (value === null || value === undefined) return "none";
  if (typeof value === "number" && !Number.isInteger(value)) return value.toFixed(3);
  return String(value);
}

function setFields(root, values) {
  for (const el of root.querySelectorAll("[data-field]")) {
    const name = el.dataset.field;
    if (!(name in values)) continue;
    if (name === "figures") {
      el.replaceChildren(...values.figures.map((line) => {
        const li = document.createElement("li");
        li.textContent = line;
        return li;
      }));
    } else {
      el.textContent = fmt(values[name]);
    }
  }
}

function openPanel(link) {
  const panel = document.getElementById("panel");
  if (!panel) return false;
  fetch(link.dataset.panel).then((r) => r.ok ? r.text() : Promise.reject(r.status))
    .then((html) => {
      const doc = new DOMParser().parseFromString(html, "text/html");
      panel.replaceChildren(...doc.body.childNodes);
      for (const row of document.querySelectorAll("tr.chosen")) row.classList.remove("chosen");
      link.closest("tr").classList.add("chosen");
    })
    .catch(() => { window.location.href = link.href; });
  return true;
}

document.addEventListener("click", (event) => {
  const link = event.target.closest("a.open[data-panel]");
  if (link && openPanel(link)) event.preventDefault();
});

document.addEventListener("submit", (event) => {
  const form = event.target.closest("form[data-compare]");
  if (!form) return;
  event.preventDefault();
  const a = encodeURIComponent(form.elements.a.value);
  const b = encodeURIComponent(form.elements.b.value);
  window.location.href = `/compare/${a}/${b}`;
});

async function pollRun(root) {
  const answer = await fetch(root.dataset.live, { cache: "no-store" });
  if (!answer.ok) return;
  const doc = await answer.json();
  const run = doc.run;
  setFields(root, { ...run, figures: doc.figures, integrity: doc.integrity, writer: run.writer || "none" });
  if (String(run.head_seq) !== root.dataset.head) {
    root.dataset.head = String(run.head_seq);
    const list = root.querySelector("[data-list]");
    if (list) {
      const page = await fetch(list.dataset.list, { cache: "no-store" });
      if (page.ok) {
        const html = new DOMParser().parseFromString(await page.text(), "text/html");
        list.replaceChildren(...html.body.childNodes);
      }
    }
  }
}

async function pollRuns(table) {
  const answer = await fetch(table.dataset.live, { cache: "no-store" });
  if (!answer.ok) return;
  const doc = await answer.json();
  for (const run of doc.runs) {
    const row = table.querySelector(`tr[data-run="${CSS.escape(run.id)}"]`);
    if (row) setFields(row, { ...run, last_event_at: run.header.last_event_at, writer: run.writer || "none" });
  }
}

function live() {
  const run = document.querySelector("div.run[data-live]");
  const runs = document.querySelector("table.runs[data-live]");
  const tick = () => {
    const done = run ? pollRun(run) : runs ? pollRuns(runs) : Promise.resolve();
    done.catch(() => {}).finally(() => setTimeout(tick, 1000));
  };
  if (run || runs) setTimeout(tick, 1000);
}

document.addEventListener("DOMContentLoaded", live);
