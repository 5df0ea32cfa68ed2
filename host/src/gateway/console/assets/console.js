// The Airlock console's only script: the calls page's live feed. Each message from
// /console/feed is {"id": N, "html": "<tr id=call-N …>"}, rendered and escaped by the
// server; a row already shown is replaced, a new one goes on top.
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  const table = document.querySelector("table[data-feed]");
  if (!table) return;
  const body = table.tBodies[0];
  const feed = new EventSource(table.dataset.feed);
  feed.onmessage = (event) => {
    const update = JSON.parse(event.data);
    const template = document.createElement("template");
    template.innerHTML = update.html.trim();
    const row = template.content.firstElementChild;
    const shown = document.getElementById("call-" + update.id);
    if (shown) {
      shown.replaceWith(row);
    } else {
      body.prepend(row);
    }
  };
  document.body.dataset.feed = "connecting";
  feed.onopen = () => { document.body.dataset.feed = "open"; };
  feed.onerror = () => { document.body.dataset.feed = "retrying"; };
});
