// Live regions: an element with `data-live` that htmx refreshes in place
// (hx-get of its page, hx-select of itself, hx-swap="outerHTML",
// hx-trigger="every Ns"). This file keeps what the person was doing across a
// swap, which would otherwise replace it with fresh markup:
// - the element that had keyboard focus has it again: found by its id, else
//   by what it is (a graph box by its task; a link, button or field by its
//   address, name and words) and its place among its likes;
// - <details> they opened stay open, a field's value stays, the graph keeps
//   its scroll position;
// - no refresh happens while the region's `data-live-toggle` checkbox is
//   unticked, while something matches its `data-live-hold` selector (runs
//   ticked for a bulk action), while text in it is selected, or while a
//   pointer is pressed in it: a swap then would undo what they are doing.
// A file rather than an hx-trigger filter: the UI runs htmx with allowEval
// off, under which a filter expression is never evaluated (it always passes).
(function () {
  "use strict";

  const FOCUSABLE = "a[href], button, input, select, textarea, summary, [tabindex]";
  const FIELDS = "select[name], textarea[name], input[name]:not([type=checkbox]):not([type=radio]):not([type=hidden])";
  let pressed = false;
  const kept = new Map(); // region id -> what to restore after its swap

  function liveOf(event) {
    const elt = event.detail && event.detail.elt;
    return elt && elt.id && elt.hasAttribute("data-live") ? elt : null;
  }

  // What an element is, in terms that survive a refresh of the same page.
  function signature(element) {
    const ref = element.getAttribute("data-ref");
    if (ref !== null) {
      return "ref\u0000" + ref; // a graph box: its words change with its status
    }
    const words = (element.textContent || "").trim().replace(/\s+/g, " ");
    const parts = [element.tagName, element.getAttribute("href"), element.getAttribute("name"), element.getAttribute("value"), words];
    return parts.map((part) => part || "").join("\u0000");
  }

  function likes(within, wanted) {
    return Array.from(within.querySelectorAll(FOCUSABLE)).filter((e) => signature(e) === wanted);
  }

  function focusKey(within) {
    const focused = document.activeElement;
    if (!focused || !within.contains(focused)) {
      return null;
    }
    if (focused.id) {
      return { id: focused.id };
    }
    const wanted = signature(focused);
    return { signature: wanted, index: likes(within, wanted).indexOf(focused) };
  }

  function found(key, within) {
    return key.id ? document.getElementById(key.id) : likes(within, key.signature)[key.index] || null;
  }

  function selectingIn(within) {
    const selection = window.getSelection();
    if (!selection || selection.isCollapsed || selection.rangeCount === 0) {
      return false;
    }
    return within.contains(selection.getRangeAt(0).commonAncestorContainer);
  }

  function busy(live) {
    return pressed || selectingIn(live);
  }

  function held(live) {
    const toggle = document.getElementById(live.getAttribute("data-live-toggle") || "");
    const hold = live.getAttribute("data-live-hold");
    return Boolean((toggle && !toggle.checked) || (hold && live.querySelector(hold)));
  }

  function snapshot(live) {
    return {
      focus: focusKey(live),
      open: Array.from(live.querySelectorAll("details[open] > summary")).map(signature),
      fields: Array.from(live.querySelectorAll(FIELDS)).map((f) => [f.name, f.value]),
      scroll: Array.from(live.querySelectorAll(".graph-wrap")).map((e) => [e.scrollLeft, e.scrollTop]),
    };
  }

  function restore(live, state) {
    for (const summary of live.querySelectorAll("details > summary")) {
      if (state.open.includes(signature(summary))) {
        summary.parentElement.open = true;
      }
    }
    const fields = Array.from(live.querySelectorAll(FIELDS));
    for (const [name, value] of state.fields) {
      const field = fields.find((f) => f.name === name);
      if (field && field.value !== value) {
        field.value = value;
      }
    }
    live.querySelectorAll(".graph-wrap").forEach((element, i) => {
      if (state.scroll[i]) {
        [element.scrollLeft, element.scrollTop] = state.scroll[i];
      }
    });
    if (state.focus !== null) {
      const again = found(state.focus, live);
      if (again && again !== document.activeElement) {
        again.focus({ preventScroll: true });
      }
    }
  }

  document.addEventListener("pointerdown", (event) => {
    pressed = Boolean(event.target.closest && event.target.closest("[data-live]"));
  });
  for (const name of ["pointerup", "pointercancel"]) {
    document.addEventListener(name, () => {
      pressed = false;
    });
  }

  document.addEventListener("htmx:beforeRequest", (event) => {
    const live = liveOf(event);
    if (live && (held(live) || busy(live))) {
      event.preventDefault(); // this tick only: the next one asks again
    }
  });

  document.addEventListener("htmx:beforeSwap", (event) => {
    const live = liveOf(event);
    if (!live) {
      return;
    }
    if (held(live) || busy(live)) {
      event.detail.shouldSwap = false; // it began while the answer was on its way
      return;
    }
    kept.set(live.id, snapshot(live));
  });

  document.addEventListener("htmx:afterSwap", () => {
    for (const [id, state] of kept) {
      const live = document.getElementById(id);
      if (live) {
        kept.delete(id);
        restore(live, state);
      }
    }
  });
})();
